"""Keys never reach a page, a log line or a stored result.

Fake ANTHROPIC_API_KEY, OPENAI_API_KEY and SECRET_KEY values are set; the test replays a
session, renders every kind of page (reports, explorer, tuning, forms with errors, error
pages, the API and its schema, /healthz) and greps each body, the stored run and everything
logged meanwhile for the three values.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.test import Client

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run

pytestmark = pytest.mark.django_db

FAKE_KEYS = {
    "ANTHROPIC_API_KEY": "sk-ant-FAKE-leak-probe-5b1f0c9e7d",
    "OPENAI_API_KEY": "sk-FAKE-openai-leak-probe-8c2e4a",
    "SECRET_KEY": "FAKE-django-secret-leak-probe-3f9a6d2c1b0e8f7a6d5c4b3a2918",
}


def _assert_clean(where: str, text: str) -> None:
    for name, value in FAKE_KEYS.items():
        assert value not in text, f"{name} appears in {where}"
        assert value[6:26] not in text, f"part of {name} appears in {where}"


@pytest.mark.slow
def test_no_key_in_pages_logs_or_results(
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
    user: Any,
    make_transcript: Any,
    tool_heavy_jsonl: Any,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEYS["ANTHROPIC_API_KEY"])
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEYS["OPENAI_API_KEY"])
    monkeypatch.setenv("SECRET_KEY", FAKE_KEYS["SECRET_KEY"])
    settings.SECRET_KEY = FAKE_KEYS["SECRET_KEY"]
    caplog.set_level(logging.DEBUG)

    transcript = make_transcript(tool_heavy_jsonl)
    run = transcript.runs.get()
    runner.execute_run(run.pk)
    client = Client(raise_request_exception=False)
    client.force_login(user)

    # a what-if run with an LLM summarizer queued from the form (its key is the worker's)
    queued = client.post(
        f"/sessions/{transcript.pk}/runs/",
        {"preset": "auto", "config": "", "summarizer": "anthropic", "spend_cap_usd": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert queued.status_code in (204, 422), queued.content

    pages = [
        "/sessions/",
        f"/sessions/{transcript.pk}/",
        f"/sessions/{transcript.pk}/?run={run.pk}",
        f"/sessions/{transcript.pk}/requests/0/?run={run.pk}",
        f"/sessions/{transcript.pk}/requests/1/?run={run.pk}",
        f"/runs/{run.pk}/",
        "/tune/",
        "/configs/new/",
        "/compare/new/",
        "/sweeps/new/",
        "/sessions/987654/",
        "/no/such/page/",
        "/healthz",
        "/api/docs",
        "/api/openapi.json",
        "/api/sessions",
        f"/api/runs/{run.pk}",
        f"/api/runs/{run.pk}/requests?offset=0&limit=50",
        "/api/no-such-thing",
    ]
    rendered = 0
    for url in pages:
        response = client.get(url)
        assert response.status_code < 500, url
        _assert_clean(url, response.content.decode(errors="replace"))
        _assert_clean(f"{url} headers", json.dumps(dict(response.headers)))
        rendered += 1
    # forms answering with errors, by field
    bad_forms = [
        (f"/sessions/{transcript.pk}/runs/", {"preset": "auto", "config": "{oops"}),
        (f"/sessions/{transcript.pk}/runs/", {"config": '{"autocompact_pct_override": 150}'}),
        ("/compare/new/", {"sessions": [transcript.pk], "b_overrides": "{x"}),
        ("/sweeps/new/", {"sessions": [transcript.pk], "field": "nope", "sweep_values": "1"}),
        ("/configs/new/", {"name": "", "preset": "auto"}),
    ]
    for url, data in bad_forms:
        response = client.post(url, data)
        assert 400 <= response.status_code < 500, url
        _assert_clean(f"POST {url}", response.content.decode(errors="replace"))
        rendered += 1
    for user_client in (Client(), Client(enforce_csrf_checks=True)):
        for url in ("/accounts/login/", "/accounts/signup/"):
            _assert_clean(url, user_client.get(url).content.decode())
        _assert_clean("csrf failure", user_client.post("/accounts/login/").content.decode())
    assert rendered == len(pages) + len(bad_forms)

    # what was stored for the runs, and everything logged meanwhile
    results_checked = 0
    for stored in Run.objects.all():
        _assert_clean(
            f"run {stored.pk}",
            json.dumps([stored.config, stored.overrides, stored.summary, stored.error]),
        )
        result = getattr(stored, "result", None)
        if result is not None:
            _assert_clean(f"run {stored.pk} result", json.dumps(result.data))
            results_checked += 1
    assert results_checked >= 1
    _assert_clean("the log", caplog.text)
    assert caplog.records, "nothing was logged: the log check would prove nothing"
