"""schemathesis against the API's own OpenAPI schema (``/api/openapi.json``), through the WSGI
app on PostgreSQL, as a logged-in token holder with a real session and run: no request it
generates gets a 5xx, every 4xx is JSON with a ``detail``, and every 422 names the field."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from hypothesis import HealthCheck, given, settings

from contextlab.jobs import replay as runner

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: generated cases per operation (SCHEMATHESIS_EXAMPLES overrides: more for a longer run)
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25"))


def _check(case: Any, response: Any, problems: list[str]) -> None:
    where = f"{case.method} {case.formatted_path} {case.query or ''} {str(case.body)[:200]}"
    status = response.status_code
    if status >= 500:
        problems.append(f"{status} from {where}: {response.text[:300]}")
        return
    if status < 400:
        return
    if case.method.upper() == "HEAD":
        # a HEAD answer carries no body (RFC 9110 §9.3.2): its status is the whole answer
        if status not in (400, 401, 403, 404, 405, 409, 412, 422, 429):
            problems.append(f"unexpected {status} from {where}")
        return
    try:
        body = json.loads(response.text)
    except ValueError:
        problems.append(f"{status} without JSON from {where}: {response.text[:200]}")
        return
    detail = body.get("detail") if isinstance(body, dict) else None
    if not detail:
        problems.append(f"{status} without a detail from {where}: {response.text[:200]}")
    elif status == 422 and isinstance(detail, list):
        for item in detail:
            loc = item.get("loc") or []
            # ("body", "payload", "session_id"), ("query", "limit"), ("path", "run_id") …
            if not [part for part in loc if part not in ("body", "query", "path", "payload")]:
                problems.append(f"422 naming no field from {where}: {item}")


def test_the_api_answers_every_generated_request_without_a_5xx(
    user: Any, api_token: str, make_transcript: Any, short_jsonl: Path
) -> None:
    session = make_transcript(short_jsonl)
    runner.execute_run(session.runs.get().pk)  # a done run: its requests page answers too
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", WSGIHandler())
    headers = {"Authorization": f"Bearer {api_token}"}
    problems: list[str] = []
    counts: dict[str, int] = {}
    statuses: dict[int, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        counts[f"{operation.method.upper()} {operation.path}"] = 0

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            counts[f"{case.method} {case.path}"] += 1
            response = case.call(headers=headers)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            _check(case, response, problems)

        run()
    total = sum(counts.values())
    print(
        f"schemathesis: {total} cases over {len(counts)} operations; statuses "
        f"{dict(sorted(statuses.items()))}; {len(problems)} problems"
    )
    assert len(counts) >= 20
    assert set(statuses) & {200, 201, 204}  # authenticated: some requests succeed
    assert not problems, "\n".join(problems[:20])
