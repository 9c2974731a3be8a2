"""The report's waste findings and compact-now-or-wait table, and ``GET /api/runs/{id}/waste``,
on the synthetic sessions of ``tests/waste_sessions.py`` replayed by the real runner."""

from __future__ import annotations

import re

import pytest

from contextlab.jobs import replay as runner
from tests import waste_sessions

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def wasteful(make_transcript):
    transcript = make_transcript(waste_sessions.FIXTURES / "wasteful.jsonl")
    runner.execute_run(transcript.runs.get().pk)
    return transcript


@pytest.fixture
def tidy(make_transcript):
    transcript = make_transcript(waste_sessions.FIXTURES / "tidy.jsonl")
    runner.execute_run(transcript.runs.get().pk)
    return transcript


def test_the_report_lists_each_finding_with_its_cost_fix_and_request_links(alice_client, wasteful):
    run = wasteful.runs.get()
    html = alice_client.get(f"/sessions/{wasteful.pk}/").content.decode()
    assert 'id="waste"' in html
    for kind in ("reread", "cleared_output", "unused_result", "unused_tools", "cache_break"):
        block = re.search(rf'id="waste-{kind}" data-count="(\d+)"', html)
        assert block is not None, kind
        assert int(block.group(1)) >= 1, kind
    # the transcript's names apart from our words; the settings a fix names set as code
    assert '<span class="file-name">/work/project/report.py</span> read again unchanged' in html
    assert "<code>&quot;promptCacheTtl&quot;: &quot;1h&quot;</code>" in html
    assert "<code>BASH_MAX_OUTPUT_LENGTH</code>" in html
    # links open the request pages, numbered from 1 on the page (the address keeps the index)
    links = re.findall(
        rf'<a class="finding-request" href="/sessions/{wasteful.pk}/requests/(\d+)/\?run={run.pk}">request (\d+)</a>',
        html,
    )
    assert links
    assert all(int(number) == int(index) + 1 for index, number in links)
    assert "(estimate)" in html
    assert 'href="/glossary/#waste"' in html
    assert 'id="idle-gaps"' in html
    assert 'href="/glossary/#idle-compaction"' in html
    # each pause's saving as a signed amount ("−$0.0092"), never a dash or "$-0.0092"
    savings = re.findall(r'data-label="Compacting saves">([^<]*)</td>', html)
    assert len(savings) == 5
    assert all(re.fullmatch(r"−?\$\d+\.\d+", s) for s in savings), savings


def test_a_tidy_session_shows_no_finding(alice_client, tidy):
    html = alice_client.get(f"/sessions/{tidy.pk}/").content.decode()
    counts = re.findall(r'id="waste-[a-z_]+" data-count="(\d+)"', html)
    assert counts == ["0"] * 5
    assert "does not record the tool definitions" in html
    assert '<span class="tool-name">Bash</span>, <span class="tool-name">Edit</span>' in html
    assert 'id="idle-gaps"' not in html
    assert "No pause outlived the cache" in html


def test_the_api_gives_every_finding_and_the_idle_answer(client, auth_header, wasteful):
    run = wasteful.runs.get()
    response = client.get(f"/api/runs/{run.pk}/waste", **auth_header)
    assert response.status_code == 200
    body = response.json()
    assert body["run_id"] == run.pk
    kinds = {f["kind"] for f in body["waste"]["findings"]}
    assert kinds == {"reread", "cleared_output", "unused_result", "unused_tools", "cache_break"}
    assert sorted(body["waste"]["tool_definitions"]) == sorted(waste_sessions.DEFINED_TOOLS)
    assert body["waste"]["total_cost_usd"] == pytest.approx(
        sum(f["cost_usd"] for f in body["waste"]["findings"]), abs=1e-5
    )
    assert [g["ttl"] for g in body["idle"]["gaps"]] == ["5m"] * 5
    schema = client.get("/api/openapi.json").json()
    assert "/api/runs/{run_id}/waste" in schema["paths"]


def test_the_api_waits_for_a_finished_run_and_hides_others_runs(
    client, auth_header, other_auth_header, make_transcript
):
    transcript = make_transcript(waste_sessions.FIXTURES / "tidy.jsonl")
    run = transcript.runs.get()
    assert client.get(f"/api/runs/{run.pk}/waste", **auth_header).status_code == 409
    runner.execute_run(run.pk)
    assert client.get(f"/api/runs/{run.pk}/waste", **other_auth_header).status_code == 404


def test_the_worker_stores_the_findings_and_the_page_reads_them(
    alice_client, client, auth_header, wasteful
):
    """The runner stores the findings and the idle answer with the result; the report and the
    API show that stored copy (not one of their own); a result stored before the worker did,
    or by another engine version, is worked out again, to the same answer."""
    from contextlab import engine
    from contextlab.runs.models import Run, RunResult

    run = wasteful.runs.get()
    stored = RunResult.objects.get(run=run).data[runner.WASTE_KEY]
    assert stored["engine_version"] == engine.ENGINE_VERSION
    assert {f["kind"] for f in stored["waste"]["findings"]} >= {"reread", "cache_break"}
    assert len(stored["idle"]["gaps"]) == 5
    api = client.get(f"/api/runs/{run.pk}/waste", **auth_header).json()
    assert (api["waste"], api["idle"]) == (stored["waste"], stored["idle"])

    # a marked finding in the stored copy: the page shows the mark, escaped
    row = RunResult.objects.get(run=run)
    marked = next(
        f for f in row.data[runner.WASTE_KEY]["waste"]["findings"] if f["kind"] == "reread"
    )
    marked["subject"] = "<b>stored-copy</b>"
    marked["text"] = "<b>stored-copy</b> read again unchanged"
    row.save()
    Run.objects.filter(pk=run.pk).update(finished_at=run.finished_at.replace(microsecond=2))
    html = alice_client.get(f"/sessions/{wasteful.pk}/").content.decode()
    assert "&lt;b&gt;stored-copy&lt;/b&gt;" in html
    assert "<b>stored-copy</b>" not in html

    # stored by another engine version: worked out again (the mark is gone), the same answer
    row.data[runner.WASTE_KEY]["engine_version"] = engine.ENGINE_VERSION - 1
    row.save()
    Run.objects.filter(pk=run.pk).update(finished_at=run.finished_at.replace(microsecond=3))
    html = alice_client.get(f"/sessions/{wasteful.pk}/").content.decode()
    assert "stored-copy" not in html
    assert '<span class="file-name">/work/project/report.py</span> read again unchanged' in html
    again = client.get(f"/api/runs/{run.pk}/waste", **auth_header).json()
    assert (again["waste"], again["idle"]) == (stored["waste"], stored["idle"])

    # stored before the worker stored them: worked out on demand, never a crash
    del row.data[runner.WASTE_KEY]
    row.save()
    Run.objects.filter(pk=run.pk).update(finished_at=run.finished_at.replace(microsecond=4))
    assert alice_client.get(f"/sessions/{wasteful.pk}/").status_code == 200
    before = client.get(f"/api/runs/{run.pk}/waste", **auth_header).json()
    assert (before["waste"], before["idle"]) == (stored["waste"], stored["idle"])
