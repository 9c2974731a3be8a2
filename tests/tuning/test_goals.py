"""A sweep names its best value for a goal; config fields say which Claude Code knob sets them."""

from __future__ import annotations

import pytest

from contextlab.tuning import goals
from contextlab.tuning.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def _point(value, cost, kept, compactions):
    return {
        "value": value,
        "summary": {"cost_usd": cost, "mean_history_share": kept, "compactions": compactions},
    }


POINTS = [
    _point(50, 1.0, 0.60, 4),
    _point(70, 1.4, 0.80, 2),
    _point(90, 2.0, 0.95, 1),
    {"value": 95, "summary": None},  # not measured on every session
]


@pytest.mark.parametrize(
    ("goal", "cap", "value"),
    [
        ("lowest_cost", None, 50),
        ("most_history", None, 90),
        ("fewest_compactions", None, 90),
        ("cost_cap", 1.5, 70),
        ("cost_cap", 1.2, 50),
    ],
)
def test_best_value_per_goal(goal, cap, value):
    chosen = goals.best(POINTS, lambda p: p["summary"], goal, cap)
    assert chosen is not None
    assert chosen["value"] == value


def test_no_value_fits_a_cap_below_every_cost():
    assert goals.best(POINTS, lambda p: p["summary"], "cost_cap", 0.5) is None


def test_ties_go_to_the_cheaper_then_the_first():
    tied = [_point(1, 2.0, 0.5, 1), _point(2, 1.0, 0.5, 1), _point(3, 1.0, 0.5, 1)]
    assert goals.best(tied, lambda p: p["summary"], "fewest_compactions")["value"] == 2


@pytest.mark.parametrize(
    ("goal", "cap", "field"),
    [
        ("cheapest", None, "goal"),
        ("cost_cap", None, "cost_cap"),
        ("cost_cap", -1.0, "cost_cap"),
        ("cost_cap", float("nan"), "cost_cap"),
        ("<script>" * 20, None, "goal"),
    ],
)
def test_bad_goals_name_the_field(goal, cap, field):
    from contextlab import engine

    with pytest.raises(engine.FieldError) as caught:
        goals.check_goal(goal, cap)
    assert caught.value.field == field
    assert "<script><script><script><script><script><script>" not in caught.value.message


def test_sweep_api_and_page_name_the_best_value(client, auth_header, session, finish):
    created = client.post(
        "/api/sweeps",
        {
            "session_ids": [session.pk],
            "field": "autocompact_pct_override",
            "values": [10, 50, 100],
        },
        content_type="application/json",
        **auth_header,
    )
    assert created.status_code == 201, created.content
    sweep = Sweep.objects.get(pk=created.json()["id"])
    body = client.get(f"/api/sweeps/{sweep.pk}", **auth_header).json()
    assert body["best"]["lowest_cost"] is None  # nothing measured yet
    finish()
    body = client.get(f"/api/sweeps/{sweep.pk}", **auth_header).json()
    points = {p["value"]: p["summary"] for p in body["points"]}
    cheapest = min(points, key=lambda v: (points[v]["cost_usd"], -points[v]["mean_history_share"]))
    assert body["best"]["lowest_cost"]["value"] == cheapest
    most = max(points, key=lambda v: points[v]["mean_history_share"])
    assert (
        points[body["best"]["most_history"]["value"]]["mean_history_share"]
        == (points[most]["mean_history_share"])
    )
    # 10 % compacts early and often on the tool-heavy session: never the fewest compactions
    assert body["best"]["fewest_compactions"]["value"] != 10
    assert body["best"]["fewest_compactions"]["tie"] is False

    client.force_login(session.owner)
    page = client.get(f"/sweeps/{sweep.pk}/?goal=most_history")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="best-value"' in text
    assert f"= {body['best']['most_history']['value']}" in text
    assert "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in text  # its Claude Code setting
    bad = client.get(f"/sweeps/{sweep.pk}/?goal=cost_cap&cost_cap=%3Cb%3Ex")
    assert bad.status_code == 200
    assert "the cost cap is not a number" in bad.content.decode()
    assert "<b>x" not in bad.content.decode()


def test_a_sweep_whose_values_all_measure_the_same_says_so(client, auth_header, session, finish):
    created = client.post(
        "/api/sweeps",
        {"session_ids": [session.pk], "field": "autocompact_pct_override", "values": [80, 90]},
        content_type="application/json",
        **auth_header,
    )
    finish()
    sweep_id = created.json()["id"]
    body = client.get(f"/api/sweeps/{sweep_id}", **auth_header).json()
    assert body["best"]["lowest_cost"]["tie"] is True  # neither threshold is reached
    client.force_login(session.owner)
    text = client.get(f"/sweeps/{sweep_id}/").content.decode()
    assert 'id="best-tie"' in text
    assert "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=80" in text  # the env lines, one a line
    assert "cc.env_lines" not in text


def test_config_fields_api_marks_knobs_and_experiments(client, auth_header):
    response = client.get("/api/config-fields", **auth_header)
    assert response.status_code == 200
    fields = {f["name"]: f for f in response.json()}
    pct = fields["autocompact_pct_override"]
    assert pct["kind"] == "knob"
    assert pct["experiment"] is False
    assert pct["knobs"][0]["name"] == "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"
    assert "only lower" in pct["knobs"][0]["limits"]
    assert fields["snip_enabled"]["experiment"] is True
    assert fields["snip_enabled"]["knobs"] == []
    assert fields["anchors_enabled"]["kind"] == "measurement"
    assert {k["name"] for k in fields["cache_ttl"]["knobs"]} == {
        "promptCacheTtl",
        "ENABLE_PROMPT_CACHING_1H",
        "FORCE_PROMPT_CACHING_5M",
    }


def test_config_form_shows_experiment_and_knob_badges(client, user):
    client.force_login(user)
    text = client.get("/configs/new/").content.decode()
    assert ">experiment</span>" in text
    assert "<code>CLAUDE_AUTOCOMPACT_PCT_OVERRIDE</code>" in text
