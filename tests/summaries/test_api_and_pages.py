"""Choosing a summarizer from the API and the run form; the report lists the summaries."""

from __future__ import annotations

import re

import pytest

from contextlab.runs.models import Run
from contextlab.runs.templatetags.humanize_tokens import usd
from contextlab.summaries.models import RunSummarizer
from tests.summaries.test_runner import SUMMARY, drive

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def transcript(make_transcript, tool_heavy_jsonl):
    return make_transcript(tool_heavy_jsonl)


def post_run(client, headers, **payload):
    return client.post("/api/runs", payload, content_type="application/json", **headers)


def test_api_run_with_an_llm_summarizer(client, auth_header, transcript):
    response = post_run(
        client,
        auth_header,
        session_id=transcript.pk,
        mode="whatif",
        summarizer="anthropic",
        summary_model="claude-sonnet-4-6",
        spend_cap_usd=1.5,
    )
    assert response.status_code == 201, response.content
    settings = RunSummarizer.objects.get(run_id=response.json()["id"])
    assert (settings.backend, settings.model, settings.spend_cap_usd) == (
        "anthropic",
        "claude-sonnet-4-6",
        1.5,
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"summarizer": "gpt-magic"}, "summarizer"),
        ({"summarizer": "openai"}, "summary_model"),
        ({"summarizer": "anthropic", "spend_cap_usd": -1}, "spend_cap_usd"),
    ],
)
def test_api_rejects_bad_summarizer_settings_naming_the_field(
    client, auth_header, transcript, payload, field
):
    response = post_run(client, auth_header, session_id=transcript.pk, mode="whatif", **payload)
    assert response.status_code == 422
    assert field in str(response.json())
    assert not RunSummarizer.objects.exists()


def test_form_rejects_a_bad_spend_cap_naming_the_field(alice_client, transcript):
    response = alice_client.post(
        f"/sessions/{transcript.pk}/runs/",
        {"mode": "whatif", "preset": "auto", "summarizer": "anthropic", "spend_cap_usd": "lots"},
    )
    assert response.status_code == 422
    assert b"spend_cap_usd" in response.content


@pytest.mark.slow
def test_report_lists_llm_summaries_with_cost_and_backend(
    alice_client, make_transcript, tmp_path, llm_stub, django_capture_on_commit_callbacks
):
    from tests.engine.test_pipeline import long_session
    from tests.summaries.test_runner import whatif_run

    for _ in range(10):
        llm_stub.ok(SUMMARY, input_tokens=12_345, output_tokens=678)
    transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
    run = drive(
        whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6").pk,
        django_capture_on_commit_callbacks,
    )
    assert run.status == Run.Status.DONE
    page = alice_client.get(f"/sessions/{transcript.pk}/?run={run.pk}")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="summaries"' in html
    assert "claude-sonnet-4-6" in html
    assert "12345" in html
    assert "Primary Request and Intent: keep going" in html
    # dollars in the pages' one format (``usd``), not a bare "0.0470 $"
    card = html[
        html.index('id="summaries"') : html.index("</section>", html.index('id="summaries"'))
    ]
    spent = RunSummarizer.objects.get(run=run).spent_usd
    assert spent > 0
    assert f"Spent {usd(spent)}" in card
    assert not re.search(r"\d\.\d{4} \$|<td>\d+\.\d{4}</td>", card)


def test_the_run_page_says_which_summary_the_run_waits_for(
    alice_client, make_transcript, tmp_path, llm_stub, django_capture_on_commit_callbacks
):
    """Queued for its fetch task or running the call: the progress line names the backend."""
    from contextlab.jobs import replay as run_runner
    from tests.engine.test_pipeline import long_session
    from tests.summaries.test_runner import whatif_run

    transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False):
        run_runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    html = alice_client.get(run.get_absolute_url()).content.decode()
    assert "waiting for summary 1 from anthropic (claude-sonnet-4-6)…" in html
    assert "waiting for a worker" not in html
    # the fetch task has claimed it and the call is in flight
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    html = alice_client.get(run.get_absolute_url()).content.decode()
    assert "waiting for summary 1 from anthropic" in html
    # once nothing is pending, the line is the plain progress
    RunSummarizer.objects.filter(run=run).update(pending_key="", calls=1)
    html = alice_client.get(run.get_absolute_url()).content.decode()
    assert "waiting for summary" not in html


def test_the_run_api_says_who_writes_the_summaries_and_whether_the_run_waits(
    client, auth_header, make_transcript, tmp_path, django_capture_on_commit_callbacks
):
    from contextlab.jobs import replay as run_runner
    from tests.engine.test_pipeline import long_session
    from tests.summaries.test_runner import whatif_run

    transcript = make_transcript(long_session(30).write(tmp_path / "long.jsonl"))
    recorded = transcript.runs.get()
    assert client.get(f"/api/runs/{recorded.pk}", **auth_header).json()["summarizer"] is None
    run = whatif_run(transcript, backend="anthropic", model="claude-sonnet-4-6")
    with django_capture_on_commit_callbacks(execute=False):
        run_runner.execute_run(run.pk)
    body = client.get(f"/api/runs/{run.pk}", **auth_header).json()
    assert body["status"] == "queued"
    assert body["summarizer"] == {
        "backend": "anthropic",
        "model": "claude-sonnet-4-6",
        "calls": 0,
        "spent_usd": 0.0,
        "spend_cap_usd": None,
        "waiting": True,
    }
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
    assert client.get(f"/api/runs/{run.pk}", **auth_header).json()["summarizer"]["waiting"] is False
