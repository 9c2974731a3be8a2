"""Advice through the API: a job of what-if runs, then recommendations a team can paste; the
recommended config replayed as a comparison gives the saving stated, within its band."""

from __future__ import annotations

import pytest

from contextlab import engine
from contextlab.advice.models import Advice, AdviceRun
from contextlab.runs.models import Run
from contextlab.workspaces import services as workspace_services

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

KNOBS = {"autocompact_pct_override": [10, 50, 90], "cache_ttl": ["1h"]}
KEYS = {
    "settings",
    "config",
    "saving_usd",
    "saving_low_usd",
    "saving_high_usd",
    "history_kept_delta",
    "compactions_delta",
    "hurts",
}


def post(client, url, headers, payload):
    return client.post(url, payload, content_type="application/json", **headers)


@pytest.fixture
def sessions(make_transcript, tool_heavy_jsonl, short_jsonl):
    return [make_transcript(tool_heavy_jsonl), make_transcript(short_jsonl)]


def _advise(client, auth_header, sessions, **extra):
    payload = {"session_ids": [s.pk for s in sessions], "goal": "lowest_cost", "knobs": KNOBS}
    response = post(client, "/api/advice", auth_header, {**payload, **extra})
    assert response.status_code == 201, response.content
    return response.json()


def test_advice_is_a_job_then_recommendations(client, auth_header, sessions, finish):
    created = _advise(client, auth_header, sessions)
    # the sessions' own settings + 4 candidates, on 2 sessions
    assert created["total"] == 10
    assert created["status"] == "queued"
    body = client.get(f"/api/advice/{created['id']}", **auth_header).json()
    assert body["recommendations"] is None
    assert (body["done"], body["total"]) == (0, 10)
    finish()
    body = client.get(f"/api/advice/{created['id']}", **auth_header).json()
    assert body["status"] == "done"
    assert body["done"] == 10
    recs = body["recommendations"]
    assert len(recs) == 5
    for rec in recs:
        assert set(rec) >= KEYS
        assert rec["saving_low_usd"] <= rec["saving_usd"] <= rec["saving_high_usd"]
        # the settings are the Claude Code form of the config, and read back as it
        assert rec["settings"] == engine.claude_code_settings(rec["config"]).settings
        assert engine.overrides_from_settings(rec["settings"]) == rec["config"]
    costs = [r["cost_usd"] for r in recs]
    assert costs == sorted(costs)  # lowest cost first
    assert recs[0]["saving_usd"] == pytest.approx(body["baseline"]["cost_usd"] - costs[0])
    # the 1-hour TTL writes cost 2x input: on sessions with short gaps it does not pay
    ttl = next(r for r in recs if r["config"] == {"cache_ttl": "1h"})
    assert ttl["settings"]["promptCacheTtl"] == "1h"
    # 10 % compacts the tool-heavy session early: less history, more compactions
    early = next(r for r in recs if r["config"] == {"autocompact_pct_override": 10})
    assert early["compactions_delta"] > 0
    assert early["history_kept_delta"] < 0
    assert early["settings"] == {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "10"}}
    page = client.get(f"/api/advice/{created['id']}", **auth_header).json()
    assert page["recommendations"] == recs  # kept, not recomputed differently


def test_goals_order_the_recommendations(client, auth_header, sessions, finish):
    created = _advise(client, auth_header, sessions, goal="most_history")
    finish()
    recs = client.get(f"/api/advice/{created['id']}", **auth_header).json()["recommendations"]
    shares = [r["mean_history_share"] for r in recs]
    assert shares == sorted(shares, reverse=True)
    fewest = _advise(client, auth_header, sessions, goal="fewest_compactions")
    recs = client.get(f"/api/advice/{fewest['id']}", **auth_header).json()["recommendations"]
    assert [r["compactions"] for r in recs] == sorted(r["compactions"] for r in recs)
    # a cap below every candidate's cost: nothing to recommend
    capped = _advise(client, auth_header, sessions, goal="cost_cap", cost_cap=0.000001)
    assert client.get(f"/api/advice/{capped['id']}", **auth_header).json()["recommendations"] == []


def test_recommended_config_replayed_as_a_comparison_gives_the_stated_saving(
    client, auth_header, sessions, finish
):
    created = _advise(client, auth_header, sessions)
    finish()
    rec = client.get(f"/api/advice/{created['id']}", **auth_header).json()["recommendations"][0]
    # what a team pastes, read back as a what-if config, against the sessions' own settings
    pasted = engine.overrides_from_settings(rec["settings"])
    comparison = post(
        client,
        "/api/comparisons",
        auth_header,
        {
            "session_ids": [s.pk for s in sessions],
            "a": {"preset": "auto"},
            "b": {"preset": "auto", "config": pasted},
        },
    ).json()
    finish()
    result = client.get(f"/api/comparisons/{comparison['id']}", **auth_header).json()
    assert result["status"] == "done"
    saving = result["a"]["summary"]["cost_usd"] - result["b"]["summary"]["cost_usd"]
    assert rec["saving_low_usd"] - 1e-6 <= saving <= rec["saving_high_usd"] + 1e-6
    assert saving == pytest.approx(rec["saving_usd"], abs=1e-6)


def test_identical_runs_are_reused_across_the_workspaces_editors(
    client, auth_header, user, other_user, make_transcript, tool_heavy_jsonl, other_auth_header
):
    team = workspace_services.create_workspace(creator=user, name="Team")
    workspace_services.set_member(workspace=team, username=other_user.username, role="editor")
    session = make_transcript(tool_heavy_jsonl)
    from contextlab.transcripts import moving

    moving.move_session(user=user, transcript=session, workspace_id=team.pk)
    first = _advise(client, auth_header, [session])
    before = Run.objects.filter(mode=Run.Mode.WHATIF).count()
    second = _advise(client, other_auth_header, [session])
    assert Run.objects.filter(mode=Run.Mode.WHATIF).count() == before
    assert set(
        AdviceRun.objects.filter(advice_id=first["id"]).values_list("run_id", flat=True)
    ) == set(AdviceRun.objects.filter(advice_id=second["id"]).values_list("run_id", flat=True))


def test_workspace_and_filters_choose_the_sessions(
    client, auth_header, user, make_transcript, short_jsonl, tool_heavy_jsonl
):
    personal = workspace_services.personal_workspace(user)
    make_transcript(short_jsonl)
    make_transcript(tool_heavy_jsonl)
    created = _advise(
        client, auth_header, [], session_ids=None, workspace_id=personal.pk, member=user.username
    )
    assert len(Advice.objects.get(pk=created["id"]).sessions.all()) == 2
    none = post(
        client,
        "/api/advice",
        auth_header,
        {"workspace_id": personal.pk, "member": "nobody-here", "knobs": KNOBS},
    )
    assert none.status_code == 422
    assert "workspace_id" in str(none.json())


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"goal": "cheapest"}, "goal"),
        ({"goal": "cost_cap"}, "cost_cap"),
        ({"goal": "cost_cap", "cost_cap": -5}, "cost_cap"),
        ({"knobs": {"snip_enabled": [True]}}, "knobs"),
        ({"knobs": {"<script>alert(1)</script>": [1]}}, "knobs"),
        ({"knobs": {"autocompact_pct_override": [250]}}, "autocompact_pct_override"),
        ({"knobs": {"autocompact_pct_override": []}}, "autocompact_pct_override"),
        ({"knobs": {"autocompact_pct_override": list(range(10, 100, 5))}}, "knobs"),
        ({"knobs": {"auto_compact_window": [50_000]}}, "auto_compact_window"),
        ({"knobs": {"cache_ttl": ["2h"]}}, "cache_ttl"),
        ({"project": "x" * 5000}, "project"),
        ({"since": "yesterday"}, "since"),
        ({"session_ids": [2**70]}, "session_ids"),
    ],
)
def test_bad_requests_are_422_naming_the_field(client, auth_header, sessions, payload, field):
    body = {"session_ids": [s.pk for s in sessions], **payload}
    response = post(client, "/api/advice", auth_header, body)
    assert response.status_code == 422, response.content
    assert field in response.content.decode()
    assert "<script>alert" not in response.content.decode()
    assert not Advice.objects.exists()


def test_another_users_sessions_and_advice_are_404(
    client, auth_header, other_auth_header, sessions
):
    response = post(client, "/api/advice", other_auth_header, {"session_ids": [sessions[0].pk]})
    assert response.status_code == 422
    created = _advise(client, auth_header, sessions)
    assert client.get(f"/api/advice/{created['id']}", **other_auth_header).status_code == 404


def test_cancel_stops_the_unshared_runs(client, auth_header, sessions):
    created = _advise(client, auth_header, sessions)
    runs = set(AdviceRun.objects.filter(advice_id=created["id"]).values_list("run_id", flat=True))
    response = client.post(f"/api/advice/{created['id']}/cancel", **auth_header)
    assert response.status_code == 200
    assert response.json()["cancelled"] == len(runs)
    body = client.get(f"/api/advice/{created['id']}", **auth_header).json()
    assert body["status"] == "failed"
    assert body["done"] == 0


def test_one_hour_against_five_minutes_per_session(client, auth_header, sessions, finish):
    created = _advise(client, auth_header, sessions, knobs={"cache_ttl": ["5m", "1h"]})
    finish()
    body = client.get(f"/api/advice/{created['id']}", **auth_header).json()
    rows = {row["session_id"]: row for row in body["ttl"]}
    assert set(rows) == {s.pk for s in sessions}
    runs = {
        (item.run.transcript_id, item.candidate): item.run
        for item in AdviceRun.objects.filter(advice_id=created["id"]).select_related("run")
    }
    for session in sessions:
        row = rows[session.pk]
        gaps = row["gaps_under_5m"] + row["gaps_5m_to_1h"] + row["gaps_over_1h"]
        assert gaps <= row["requests"] - 1
        if session == sessions[0]:
            assert gaps > 0  # the tool-heavy session has several requests
        five = runs[(session.pk, '{"cache_ttl": "5m"}')].summary["cost_usd"]
        hour = runs[(session.pk, '{"cache_ttl": "1h"}')].summary["cost_usd"]
        assert row["cost_5m_usd"] == pytest.approx(five)
        assert row["cost_1h_usd"] == pytest.approx(hour)
        assert row["one_hour_saves_usd"] == pytest.approx(five - hour)
        # with no gap the 5-minute cache outlives... the hour's dearer writes buy nothing
        if row["gaps_5m_to_1h"] == 0 and row["one_hour_saves_usd"] != 0:
            assert row["one_hour_saves_usd"] < 0
            assert row["verdict"].startswith("5 minutes saves")


def test_a_threshold_the_session_never_nears_uses_its_own_run_and_replays_the_same(
    client, auth_header, sessions, finish
):
    """The shortcut is checked against a real replay of the same config."""
    from contextlab.advice import services

    created = _advise(client, auth_header, sessions)
    links = {
        (item.run.transcript_id, item.candidate): item.run_id
        for item in AdviceRun.objects.filter(advice_id=created["id"]).select_related("run")
    }
    heavy = sessions[0]
    # 10 % compacts the tool-heavy session: a run of its own
    assert links[(heavy.pk, '{"autocompact_pct_override": 10}')] != links[(heavy.pk, "baseline")]
    shared = [
        key
        for (pk, key), run_id in links.items()
        if key != "baseline" and run_id == links[(pk, "baseline")]
    ]
    assert '{"autocompact_pct_override": 90}' in shared  # nowhere near 90 % of the window
    finish()
    comparison = post(
        client,
        "/api/comparisons",
        auth_header,
        {
            "session_ids": [s.pk for s in sessions],
            "a": {"preset": "auto"},
            "b": {"preset": "auto", "config": {"autocompact_pct_override": 90}},
        },
    ).json()
    finish()
    result = client.get(f"/api/comparisons/{comparison['id']}", **auth_header).json()
    for row in result["sessions"]:
        assert row["a_run_id"] != row["b_run_id"]  # really replayed
        for measure in ("cost_usd", "compactions", "mean_history_share"):
            assert row["a"][measure] == row["b"][measure], (row["name"], measure)
    for session in sessions:
        config, _ = services.tuning_services.resolved_for(
            session, services.ConfigSpec(preset="auto", overrides={"autocompact_pct_override": 90})
        )
        assert services.never_reached(session, config)
        low, _ = services.tuning_services.resolved_for(
            session, services.ConfigSpec(preset="auto", overrides={"autocompact_pct_override": 1})
        )
        assert not services.never_reached(session, low)


def test_compact_now_or_wait_per_session(
    client, alice_client, auth_header, make_transcript, short_jsonl, finish
):
    from contextlab.jobs import replay as runner
    from tests import waste_sessions

    pauses = make_transcript(waste_sessions.FIXTURES / "wasteful.jsonl")
    quiet = make_transcript(short_jsonl)
    runner.execute_run(pauses.runs.get().pk)  # its recorded replay, which its report shows
    created = _advise(client, auth_header, [pauses, quiet], knobs={"cache_ttl": ["1h"]})
    finish()
    body = client.get(f"/api/advice/{created['id']}", **auth_header).json()
    rows = {row["session_id"]: row for row in body["idle"]}
    assert set(rows) == {pauses.pk, quiet.pk}
    from contextlab.runs import services as run_services

    # the session's recorded replay, as its report shows it (not the advice's what-if baseline)
    recorded = pauses.runs.get(mode=Run.Mode.RECORDED)
    expected = engine.idle_compaction(engine.as_result(run_services.result_data(recorded)))
    row = rows[pauses.pk]
    assert row["gaps"] == len(expected["gaps"]) == 5  # four 10–16 minute pauses, one of 2 hours
    assert row["saving_usd"] == pytest.approx(expected["saving_usd"])
    assert row["saving_usd"] == pytest.approx(row["paid_usd"] - row["compact_usd"], abs=1e-5)
    assert not row["sizes_recorded"]
    assert row["compact_wins"] == expected["compact_wins"]
    assert row["best_saving_usd"] == pytest.approx(expected["best_saving_usd"])
    assert rows[quiet.pk]["gaps"] == 0
    page = alice_client.get(body["url"]).content.decode()
    assert 'id="idle-sessions"' in page
    assert f'href="/sessions/{pauses.pk}/#idle"' in page
