from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contextlab import engine
from contextlab.jobs import replay as runner
from contextlab.runs import labels, services
from contextlab.runs.models import Run
from contextlab.runs.templatetags import humanize_tokens

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

HX = {"HTTP_HX_REQUEST": "true"}
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def done_transcript(make_transcript, tool_heavy_jsonl):
    transcript = make_transcript(tool_heavy_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    return transcript


def test_pages_need_login(client, done_transcript):
    run = done_transcript.runs.get()
    for url in (
        f"/sessions/{done_transcript.pk}/",
        f"/sessions/{done_transcript.pk}/requests/0/",
        f"/sessions/{done_transcript.pk}/messages/main/0/0/",
        f"/runs/{run.pk}/",
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/")
    assert client.post(f"/sessions/{done_transcript.pk}/runs/").status_code == 302


def test_other_users_get_404_on_every_page(mallory_client, done_transcript):
    run = done_transcript.runs.get()
    for url in (
        f"/sessions/{done_transcript.pk}/",
        f"/sessions/{done_transcript.pk}/?run={run.pk}",
        f"/sessions/{done_transcript.pk}/requests/0/",
        f"/sessions/{done_transcript.pk}/messages/main/0/0/",
        f"/runs/{run.pk}/",
    ):
        assert mallory_client.get(url).status_code == 404, url
    assert (
        mallory_client.post(f"/sessions/{done_transcript.pk}/runs/", {"preset": "auto"}).status_code
        == 404
    )


def test_report_shows_charts_fidelity_and_runs(alice_client, done_transcript):
    response = alice_client.get(f"/sessions/{done_transcript.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    for chart in ("chart-context", "chart-cache", "chart-cost", "chart-fidelity"):
        assert f'id="{chart}"' in html
        assert f'id="{chart}-data" type="application/json"' in html
    assert "Fidelity" in html
    assert "calibrated prefix" in html
    assert "vendor/plotly/plotly-basic.min.js" in html
    figure = json.loads(
        re.search(r'id="chart-context-data" type="application/json">(.*?)</script>', html).group(1)
    )
    # each point carries its request's position, the chart the URL pattern a click opens
    assert figure["data"][1]["customdata"][:3] == [0, 1, 2]
    pattern = f"/sessions/{done_transcript.pk}/requests/{{i}}/?run={done_transcript.runs.get().pk}"
    assert (
        f'id="chart-context" data-chart="chart-context-data" data-request-url="{pattern}"' in html
    )


def test_report_of_a_queued_run_says_it_is_running(alice_client, make_transcript, short_jsonl):
    transcript = make_transcript(short_jsonl)
    html = alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    assert "the report appears here when it is done" in html
    assert 'hx-trigger="every 1s"' in html


def test_run_progress_partial_polls_until_done(alice_client, make_transcript, short_jsonl):
    transcript = make_transcript(short_jsonl)
    run = transcript.runs.get()
    Run.objects.filter(pk=run.pk).update(status="running", progress_done=2, progress_total=8)
    response = alice_client.get(f"/runs/{run.pk}/?reload=1", **HX)
    html = response.content.decode()
    assert "<html" not in html
    assert 'hx-trigger="every 1s"' in html
    assert 'value="25"' in html
    runner.execute_run(run.pk)  # the row is "running" with a fresh heartbeat: not taken
    Run.objects.filter(pk=run.pk).update(status="queued")
    runner.execute_run(run.pk)
    response = alice_client.get(f"/runs/{run.pk}/?reload=1", **HX)
    assert "hx-trigger" not in response.content.decode()
    assert response["HX-Refresh"] == "true"
    full = alice_client.get(f"/runs/{run.pk}/")
    assert b"<html" in full.content
    assert b"Resolved pipeline config" in full.content


def test_failed_run_shows_its_reason(alice_client, make_transcript, short_jsonl):
    transcript = make_transcript(short_jsonl)
    Run.objects.filter(transcript=transcript).update(
        status="failed", error="The replay failed: ValueError: bad"
    )
    html = alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    assert "The replay failed: ValueError: bad" in html


def test_whatif_form_queues_a_run(alice_client, done_transcript):
    response = alice_client.post(
        f"/sessions/{done_transcript.pk}/runs/",
        {"preset": "aggressive", "config": '{"context_window": 300000}'},
        **HX,
    )
    assert response.status_code == 204
    run = Run.objects.filter(mode="whatif").get()
    assert response["HX-Redirect"] == f"/sessions/{done_transcript.pk}/?run={run.pk}"
    assert run.overrides == {"context_window": 300000}


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"preset": "auto", "config": "{oops"}, "config"),
        ({"preset": "auto", "config": "[1]"}, "config"),
        ({"preset": "auto", "config": '{"context_window": "huge"}'}, "config.context_window"),
        ({"preset": "no-such", "config": ""}, "preset"),
    ],
)
def test_whatif_form_errors_name_the_field(alice_client, done_transcript, form, field):
    response = alice_client.post(f"/sessions/{done_transcript.pk}/runs/", form, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert f"Error in <strong>{field}</strong>" in html
    assert "<html" not in html
    assert not Run.objects.filter(mode="whatif").exists()
    page = alice_client.post(f"/sessions/{done_transcript.pk}/runs/", form)
    assert page.status_code == 422
    assert b"<html" in page.content


def test_explorer_page_and_htmx_partials(alice_client, done_transcript):
    run = done_transcript.runs.get()
    url = f"/sessions/{done_transcript.pk}/requests/1/?run={run.pk}"
    page = alice_client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="req-slider"' in html
    assert 'id="prev-link"' in html
    assert 'id="next-link"' in html
    assert re.search(
        r'<tr id="b-\d+-\d+" class="row b-(intact|persisted|cleared|snipped|collapsed|summarized|boundary|restored)">',
        html,
    )
    assert "gutter cache-" in html
    assert re.search(r"recorded by the API · replay [+-]\d+\.\d%", html)
    partial = alice_client.get(url, **HX).content.decode()
    assert partial.lstrip().startswith('<div id="explorer"')
    assert "<html" not in partial
    assert page["Vary"]
    assert "HX-Request" in page["Vary"]


def test_explorer_404s_for_missing_requests_and_bad_run_ids(alice_client, done_transcript):
    assert alice_client.get(f"/sessions/{done_transcript.pk}/requests/9999/").status_code == 404
    assert (
        alice_client.get(f"/sessions/{done_transcript.pk}/requests/0/?run=abc").status_code == 404
    )
    assert (
        alice_client.get(f"/sessions/{done_transcript.pk}/requests/0/?run=999999").status_code
        == 404
    )


def test_explorer_before_the_run_finishes_has_an_empty_state(
    alice_client, make_transcript, short_jsonl
):
    transcript = make_transcript(short_jsonl)
    html = alice_client.get(f"/sessions/{transcript.pk}/requests/0/").content.decode()
    assert "still running" in html


def test_explorer_paginates_rows(alice_client, done_transcript, settings):
    settings.EXPLORER_ROWS_PER_PAGE = 10
    run = done_transcript.runs.get()
    last = run.summary["requests"] - 1
    url = f"/sessions/{done_transcript.pk}/requests/{last}/?run={run.pk}"
    html = alice_client.get(url).content.decode()
    assert html.count('class="row b-') == 10
    assert "load more" in html
    more = alice_client.get(url + "&page=2", **HX).content.decode()
    assert more.lstrip().startswith("<tr")
    assert 1 <= more.count('class="row b-') <= 10


def test_block_text_returns_the_full_escaped_text(alice_client, done_transcript):
    html = alice_client.get(f"/sessions/{done_transcript.pk}/messages/main/0/0/").content.decode()
    assert html.startswith('<pre class="text full">')
    assert (
        alice_client.get(f"/sessions/{done_transcript.pk}/messages/main/9999/0/").status_code == 404
    )
    assert alice_client.get(f"/sessions/{done_transcript.pk}/messages/nope/0/0/").status_code == 404
    assert (
        alice_client.get(
            f"/sessions/{done_transcript.pk}/messages/main/0/0/?original=1"
        ).status_code
        == 404
    )


def test_persisted_preview_links_to_the_original(alice_client, make_transcript):
    transcript = make_transcript(FIXTURES / "persisted_preview.jsonl")
    run = transcript.runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    found = None
    for i in range(run.summary["requests"]):
        html = alice_client.get(
            f"/sessions/{transcript.pk}/requests/{i}/?run={run.pk}"
        ).content.decode()
        match = re.search(r'hx-get="(/sessions/\d+/messages/main/\d+/\d+/\?original=1)"', html)
        if match:
            found = match.group(1)
            assert 'class="row b-persisted"' in html
            break
    assert found, "no persisted preview in any request"
    original = alice_client.get(found)
    assert original.status_code == 200
    assert len(original.content) > 2000


def test_hostile_transcript_text_is_escaped(alice_client, make_transcript):
    transcript = make_transcript(FIXTURES / "hostile.jsonl")
    run = transcript.runs.get()
    runner.execute_run(run.pk)
    pages = [alice_client.get(f"/sessions/{transcript.pk}/").content.decode()]
    for i in range(Run.objects.get(pk=run.pk).summary["requests"]):
        pages.append(
            alice_client.get(
                f"/sessions/{transcript.pk}/requests/{i}/?run={run.pk}"
            ).content.decode()
        )
    html = "\n".join(pages)
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "<script>window.__xss" not in html
    assert "<img src=x onerror" not in html
    assert 'href="javascript:' not in html
    assert "<svg onload" not in html


def test_report_of_a_session_folder_names_its_compaction_fork(
    alice_client, make_transcript, tmp_path
):
    """The fork's row says what it is and carries main-conversation-sized costs; a message of
    the main chain it shares opens from the fork thread too (stored once, expanded on read)."""
    from tests.engine.test_compaction_fork import FORK_ID, folder

    transcript = make_transcript(folder(tmp_path, gap_before_fork=20))
    runner.execute_run(transcript.runs.get().pk)
    html = alice_client.get(f"/sessions/{transcript.pk}/").content.decode()
    row = re.search(rf"<code>agent-{FORK_ID}</code></td><td>([^<]*)</td>", html)
    assert row is not None
    assert row.group(1) == "compaction fork"
    block = alice_client.get(f"/sessions/{transcript.pk}/messages/agent-{FORK_ID}/1/0/")
    main_block = alice_client.get(f"/sessions/{transcript.pk}/messages/main/1/0/")
    assert block.status_code == main_block.status_code == 200
    assert block.content == main_block.content


def test_a_whatif_report_reads_as_differences_from_the_recorded_replay(
    alice_client, done_transcript, user
):
    recorded = done_transcript.runs.get()
    whatif = services.start_run(
        owner=user,
        transcript=done_transcript,
        mode="whatif",
        overrides={"autocompact_pct_override": 70},
    )
    runner.execute_run(whatif.pk)
    whatif.refresh_from_db()
    # runs are named by what they changed
    assert whatif.label == "what-if · autocompact 70 %"
    html = alice_client.get(f"/sessions/{done_transcript.pk}/?run={whatif.pk}").content.decode()
    assert "what-if · autocompact 70 %" in html
    assert 'id="differences"' in html
    assert f'?run={recorded.pk}">run #{recorded.pk}</a>' in html
    cost = re.search(r'id="diff-cost_usd">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r'<td class="num">(.*?)</td>', cost)
    # what was paid, and the what-if's cost anchored on it: recorded + (what-if estimate −
    # recorded replay's estimate), with the band the recorded replay's own cost error gives
    assert cells[0] == humanize_tokens.usd(recorded.summary["cost_usd"])
    anchored = engine.compare.whatif_cost(whatif.summary, recorded.summary)
    assert anchored["cost_usd"] == pytest.approx(
        recorded.summary["cost_usd"]
        + whatif.summary["estimate"]["cost_usd"]
        - recorded.summary["estimate"]["cost_usd"],
        abs=1e-6,
    )
    assert cells[1] == (
        humanize_tokens.usd(anchored["cost_usd"])
        + " ± "
        + humanize_tokens.usd(anchored["band_usd"])
    )
    assert 'id="cost-headline"' in html
    assert "what-if estimate" in html
    rate = re.search(r'id="diff-cache_hit_rate">(.*?)</tr>', html, re.S).group(1)
    assert re.findall(r'<td class="num">(.*?)</td>', rate)[2].endswith(("pp", "no change"))
    # the recorded replay's curve is on the context chart, and nothing is called an error
    figure = json.loads(
        re.search(r'id="chart-context-data" type="application/json">(.*?)</script>', html).group(1)
    )
    assert "recorded replay: model view" in {t["name"] for t in figure["data"]}
    assert "|error|" not in html
    # the recorded run's own report has no differences
    own = alice_client.get(f"/sessions/{done_transcript.pk}/?run={recorded.pk}").content.decode()
    assert 'id="differences"' not in own


def test_run_labels_name_the_changed_settings():
    assert labels.run_label("recorded", "auto", {}) == "recorded"
    assert labels.run_label("whatif", "auto", {}) == "what-if · auto"
    assert (
        labels.run_label("whatif", "auto", {"snip_enabled": True, "autocompact_pct_override": 70.0})
        == "what-if · autocompact 70 %, snip on"
    )
    assert labels.run_label("whatif", "claude-code-2.1.88", {"context_window": 1000000}) == (
        "what-if · window 1,000,000 tokens (claude-code-2.1.88)"
    )
