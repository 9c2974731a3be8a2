"""Codex rollouts through the real upload paths: the page, the API, a real worker; sessions
carry their agent in the list, the API and their filters."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from contextlab.runs.models import RunResult
from contextlab.transcripts.models import Transcript
from tests.conftest import wait_for_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
ROLLOUT = FIXTURES / "v0_64_remote_compaction.jsonl"
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_the_page_upload_takes_a_rollout_and_a_gzipped_one(alice_client, short_jsonl):
    response = alice_client.post(
        "/sessions/upload/",
        {
            "file": [
                SimpleUploadedFile("rollout-2025-10-01.jsonl", ROLLOUT.read_bytes()),
                SimpleUploadedFile(
                    "renamed.jsonl.gz", gzip.compress((FIXTURES / "v0_58_calls.jsonl").read_bytes())
                ),
                SimpleUploadedFile("claude.jsonl", short_jsonl.read_bytes()),
            ]
        },
        **JSON,
    )
    assert response.status_code == 201, response.content
    assert [r["ok"] for r in response.json()["results"]] == [True, True, True]
    agents = dict(Transcript.objects.values_list("name", "agent"))
    assert agents == {
        "rollout-2025-10-01.jsonl": "codex",
        "renamed.jsonl.gz": "codex",
        "claude.jsonl": "claude_code",
    }
    codex = Transcript.objects.get(name="rollout-2025-10-01.jsonl")
    assert codex.version == "0.64.0"
    assert codex.request_count == 4
    main = codex.threads[0]
    assert main["context_window"] == 258_400

    page = alice_client.get("/sessions/").content.decode()
    assert '<span class="agent" data-agent="codex">Codex</span> 0.64.0' in page
    assert '<span class="agent" data-agent="claude_code">Claude Code</span>' in page
    only = alice_client.get("/sessions/?agent=codex").content.decode()
    assert "rollout-2025-10-01.jsonl" in only
    assert "claude.jsonl" not in only
    bad = alice_client.get("/sessions/?agent=<script>x</script>")
    assert bad.status_code == 400
    assert bad["Content-Type"].startswith("text/plain")  # the reason, never as HTML


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_the_api_lists_the_agent_and_filters_by_it(client, auth_header, short_jsonl):
    for name, path in (("r.jsonl", ROLLOUT), ("c.jsonl", short_jsonl)):
        created = client.post(
            "/api/sessions", {"file": SimpleUploadedFile(name, path.read_bytes())}, **auth_header
        )
        assert created.status_code == 201, created.content
    rows = client.get("/api/sessions", **auth_header).json()
    assert {r["name"]: r["agent"] for r in rows} == {"r.jsonl": "codex", "c.jsonl": "claude_code"}
    codex = client.get("/api/sessions?agent=codex", **auth_header).json()
    assert [r["name"] for r in codex] == ["r.jsonl"]
    detail = client.get(f"/api/sessions/{codex[0]['id']}", **auth_header).json()
    assert detail["agent"] == "codex"
    for hostile in ("gemini", "x" * 5000, "codex'--"):
        refused = client.get("/api/sessions", {"agent": hostile}, **auth_header)
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"][-1] == "agent"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_media")
def test_a_rollout_uploaded_over_http_is_replayed_by_the_worker(
    celery_worker_process, client, auth_header
):
    response = client.post(
        "/api/sessions",
        {"file": SimpleUploadedFile("session.jsonl", ROLLOUT.read_bytes())},
        **auth_header,
    )
    assert response.status_code == 201, response.content
    session = client.get(f"/api/sessions/{response.json()['id']}", **auth_header).json()
    run = wait_for_run(session["runs"][0]["id"])
    assert run.status == "done", run.error + celery_worker_process.output()
    data = RunResult.objects.get(run=run).data
    assert data["summary"]["requests"] == 4
    assert data["summary"]["compaction_requests"] == [2]
    assert data["session"]["config"]["context_window"] == 258_400
    rows = client.get(f"/api/runs/{run.pk}/requests?limit=10", **auth_header).json()["items"]
    assert [r["model"] for r in rows] == ["gpt-5.1-codex"] * 4
    # a what-if on the Codex session: "auto" is Codex's preset, its compaction where it was
    response = client.post(
        "/api/runs",
        {"session_id": session["id"], "mode": "whatif"},
        content_type="application/json",
        **auth_header,
    )
    assert response.status_code == 201, response.content
    whatif = wait_for_run(response.json()["id"])
    assert whatif.status == "done", whatif.error
    assert whatif.resolved_preset == "codex"
    data = RunResult.objects.get(run=whatif).data
    assert data["summary"]["compaction_requests"] == [2]


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_the_explorer_shows_a_codex_compaction_with_its_inferred_trigger(
    alice_client, make_transcript
):
    from contextlab.jobs import replay as runner

    transcript = make_transcript(ROLLOUT)
    run = transcript.runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "done", run.error
    # the boundary is history the summary replaced: among the rows "Show them" opens
    page = alice_client.get(f"/sessions/{transcript.pk}/requests/2/?run={run.pk}&replaced=1")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Codex compacted its context here (remote compaction" in html
    assert "Automatic: inferred (mid-turn, after a tool call)" in html
    report = alice_client.get(f"/sessions/{transcript.pk}/?run={run.pk}")
    assert report.status_code == 200
    text = " ".join(re.sub(r"<[^>]+>", " ", report.content.decode()).split())
    assert "1 compactions" in text
