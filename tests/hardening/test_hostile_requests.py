"""Hostile requests on every route that takes numbers or JSON: each answers a 4xx that names
what is wrong, never a 5xx. Runs on SQLite (unit run) and PostgreSQL (the default database)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from contextlab.runs.models import Run
from contextlab.tuning.models import Comparison, Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media"), pytest.mark.slow]

INFINITE_CONFIG = '{"declared_max_result_size_chars": {"Bash": Infinity}}'
NAN_CONFIG = '{"autocompact_pct_override": NaN}'
DEEP = "[" * 100_000 + "]" * 100_000
#: deep, yet short enough for the form's 64 KB cap on overrides
FORM_DEEP = "[" * 5_000 + "]" * 5_000
FORM_DEEP_OBJECT = '{"a": ' * 3_000 + "1" + "}" * 3_000
#: under the interpreter's recursion limit, over the loader's 200 levels
FORM_300_DEEP = '{"a": ' + "[" * 300 + "]" * 300 + "}"


@dataclass(frozen=True)
class Ctx:
    api: Client  # token-authenticated API client
    page: Client  # logged-in browser client
    session: int
    auth: dict[str, str]

    def post_json(self, path: str, body: str) -> Any:
        return self.api.post(path, body, content_type="application/json", **self.auth)

    def get(self, path: str) -> Any:
        return self.api.get(path, **self.auth)


@dataclass(frozen=True)
class RequestAttack:
    name: str
    send: Callable[[Ctx], Any]
    status: int
    #: words the answer must contain (a field name or the reason)
    says: str = ""


def run_body(ctx: Ctx, config: str) -> str:
    return f'{{"session_id": {ctx.session}, "mode": "whatif", "config": {config}}}'


def sweep_body(ctx: Ctx, values: str, ids: str = "") -> str:
    return (
        f'{{"session_ids": {ids or f"[{ctx.session}]"}, "field": "autocompact_pct_override", '
        f'"values": {values}}}'
    )


def comparison_body(ids: str) -> str:
    return f'{{"session_ids": {ids}, "a": {{"preset": "auto"}}, "b": {{"preset": "auto"}}}}'


def form_run(ctx: Ctx, config: str) -> Any:
    return ctx.page.post(
        f"/sessions/{ctx.session}/runs/", {"preset": "auto", "mode": "whatif", "config": config}
    )


def form_sweep(ctx: Ctx, values: str, sessions: list[str] | None = None) -> Any:
    return ctx.page.post(
        "/sweeps/new/",
        {
            "sessions": sessions or [str(ctx.session)],
            "base_config": "preset:auto",
            "field": "autocompact_pct_override",
            "sweep_values": values,
        },
    )


def form_compare(ctx: Ctx, sessions: list[str], a_overrides: str = "") -> Any:
    return ctx.page.post(
        "/compare/new/",
        {
            "sessions": sessions,
            "a_config": "preset:auto",
            "b_config": "preset:auto",
            "a_overrides": a_overrides,
        },
    )


HUGE = str(2**70)
ATTACKS = [
    # the run form (the report page) and POST /api/runs
    RequestAttack(
        "form: config {Bash: Infinity}", lambda c: form_run(c, INFINITE_CONFIG), 422, "Infinity"
    ),
    RequestAttack("form: config NaN", lambda c: form_run(c, NAN_CONFIG), 422, "NaN"),
    RequestAttack("form: config nested 100k", lambda c: form_run(c, DEEP), 422, "characters"),
    RequestAttack("form: config nested 5k", lambda c: form_run(c, FORM_DEEP), 422, "nested"),
    RequestAttack(
        "form: config object nested 3k", lambda c: form_run(c, FORM_DEEP_OBJECT), 422, "nested"
    ),
    RequestAttack("form: config nested 300", lambda c: form_run(c, FORM_300_DEEP), 422, "nested"),
    RequestAttack(
        "form: config of 70k chars",
        lambda c: form_run(
            c, json.dumps({"declared_max_result_size_chars": {f"T{i}": 1 for i in range(7000)}})
        ),
        422,
        "characters",
    ),
    RequestAttack(
        "api: config {Bash: Infinity}",
        lambda c: c.post_json("/api/runs", run_body(c, INFINITE_CONFIG)),
        400,
        "parse",
    ),
    RequestAttack(
        "api: config nested 100k",
        lambda c: c.post_json("/api/runs", run_body(c, DEEP)),
        400,
        "parse",
    ),
    RequestAttack(
        "api: config 1e400",
        lambda c: c.post_json("/api/runs", run_body(c, '{"autocompact_pct_override": 1e400}')),
        400,
        "parse",
    ),
    RequestAttack(
        "api: config of 100k chars",
        lambda c: c.post_json(
            "/api/runs",
            run_body(
                c,
                json.dumps({"declared_max_result_size_chars": {f"T{i}": 1 for i in range(10_000)}}),
            ),
        ),
        422,
        "characters",
    ),
    RequestAttack(
        "api: session_id 2**70",
        lambda c: c.post_json("/api/runs", f'{{"session_id": {HUGE}, "mode": "whatif"}}'),
        422,
        "session_id",
    ),
    RequestAttack(
        "api: session_id -1",
        lambda c: c.post_json("/api/runs", '{"session_id": -1, "mode": "whatif"}'),
        422,
        "session_id",
    ),
    RequestAttack(
        "api: a 3 MB JSON body",
        lambda c: c.post_json("/api/runs", run_body(c, json.dumps({"x": "y" * 3_000_000}))),
        413,
        "limit",
    ),
    RequestAttack(
        "api: body not UTF-8",
        lambda c: c.api.post(
            "/api/runs", b'{"session_id": "\xff"}', content_type="application/json", **c.auth
        ),
        400,
        "parse",
    ),
    RequestAttack(
        "api: lone surrogate in a string",
        lambda c: c.post_json("/api/runs", run_body(c, '{"\\ud800": 1}')),
        422,
        "config",
    ),
    # sweeps
    RequestAttack(
        "api: sweep 0:inf:1",
        lambda c: c.post_json("/api/sweeps", sweep_body(c, '"0:inf:1"')),
        422,
        "finite",
    ),
    RequestAttack(
        "api: sweep nan:1:1",
        lambda c: c.post_json("/api/sweeps", sweep_body(c, '"nan:1:1"')),
        422,
        "finite",
    ),
    RequestAttack(
        'api: sweep values ["inf"]',
        lambda c: c.post_json("/api/sweeps", sweep_body(c, '["inf", 50]')),
        422,
        "finite",
    ),
    RequestAttack(
        "api: sweep 0:1e308:1e-300",
        lambda c: c.post_json("/api/sweeps", sweep_body(c, '"0:1e308:1e-300"')),
        422,
        "at most 50",
    ),
    RequestAttack(
        "api: sweep values text of 5000 chars",
        lambda c: c.post_json("/api/sweeps", sweep_body(c, json.dumps(",".join(["50"] * 2500)))),
        422,
        "values",
    ),
    RequestAttack(
        "api: sweep session 2**70",
        lambda c: c.post_json("/api/sweeps", sweep_body(c, '"50:60:10"', f"[{HUGE}]")),
        422,
        "session_ids",
    ),
    RequestAttack("form: sweep 0:inf:1", lambda c: form_sweep(c, "0:inf:1"), 422, "finite"),
    RequestAttack("form: sweep inf, 50", lambda c: form_sweep(c, "inf, 50"), 422, "finite"),
    RequestAttack("form: sweep session 2**70", lambda c: form_sweep(c, "50:60:10", [HUGE]), 404),
    # comparisons
    RequestAttack(
        "api: comparison ids [-1, 0, 2**70]",
        lambda c: c.post_json("/api/comparisons", comparison_body(f"[-1, 0, {HUGE}]")),
        422,
        "session_ids",
    ),
    RequestAttack(
        "api: comparison ids 2**70 alone",
        lambda c: c.post_json("/api/comparisons", comparison_body(f"[{HUGE}]")),
        422,
        "session_ids",
    ),
    RequestAttack(
        "api: comparison of 1000 ids",
        lambda c: c.post_json(
            "/api/comparisons", comparison_body(json.dumps(list(range(1, 1001))))
        ),
        422,
        "session_ids",
    ),
    RequestAttack(
        "api: comparison version_id 2**70",
        lambda c: c.post_json(
            "/api/comparisons",
            f'{{"session_ids": [{c.session}], "a": {{"version_id": {HUGE}}}, "b": {{}}}}',
        ),
        422,
        "version_id",
    ),
    RequestAttack("form: comparison session 2**70", lambda c: form_compare(c, [HUGE]), 404),
    RequestAttack(
        "form: comparison overrides Infinity",
        lambda c: form_compare(c, [str(c.session)], INFINITE_CONFIG),
        422,
        "Infinity",
    ),
    # pages and reads
    RequestAttack(
        "api: run page limit 10**6",
        lambda c: c.get(
            f"/api/runs/{Run.objects.get(transcript_id=c.session).pk}/requests?limit=1000000"
        ),
        422,
        "limit",
    ),
    RequestAttack(
        "api: run page offset -1",
        lambda c: c.get(
            f"/api/runs/{Run.objects.get(transcript_id=c.session).pk}/requests?offset=-1"
        ),
        422,
        "offset",
    ),
]


@pytest.fixture
def ctx(user, alice_client, auth_header, make_transcript, short_jsonl) -> Ctx:
    from contextlab.jobs import replay as runner

    transcript = make_transcript(short_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    return Ctx(api=Client(), page=alice_client, session=transcript.pk, auth=auth_header)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_hostile_request(attack: RequestAttack, ctx: Ctx) -> None:
    runs_before = Run.objects.count()
    response = attack.send(ctx)
    assert response.status_code == attack.status, response.content[:600]
    text = response.content.decode(errors="replace")
    assert attack.says.lower() in text.lower(), text[:600]
    assert "Traceback" not in text
    # refused: nothing was queued or stored
    assert Run.objects.count() == runs_before
    assert Comparison.objects.count() == 0
    assert Sweep.objects.count() == 0


HUGE_ID_PAGES = [
    f"/sessions/{HUGE}/",
    f"/sessions/{HUGE}/?run={HUGE}",
    f"/sessions/{HUGE}/requests/0/",
    f"/sessions/{HUGE}/messages/main/0/0/",
    f"/runs/{HUGE}/",
    f"/configs/{HUGE}/",
    f"/compare/{HUGE}/",
    f"/compare/{HUGE}/requests/0/",
    f"/sweeps/{HUGE}/",
]
HUGE_ID_API = [
    f"/api/sessions/{HUGE}",
    f"/api/runs/{HUGE}",
    f"/api/runs/{HUGE}/requests",
    f"/api/comparisons/{HUGE}",
    f"/api/sweeps/{HUGE}",
]


@pytest.mark.parametrize("path", HUGE_ID_PAGES + HUGE_ID_API)
def test_ids_past_any_row_answer_404(path: str, ctx: Ctx) -> None:
    client = ctx.api if path.startswith("/api/") else ctx.page
    response = client.get(path, **(ctx.auth if path.startswith("/api/") else {}))
    assert response.status_code == 404


@pytest.mark.parametrize("path", [f"/sessions/{{pk}}/requests/{HUGE}/", "/tune/?session=" + HUGE])
def test_huge_indexes_and_preselections_do_not_fail(path: str, ctx: Ctx) -> None:
    response = ctx.page.get(path.format(pk=ctx.session))
    assert response.status_code in (200, 404)


def test_a_sweep_past_the_run_cap_is_refused_naming_values(ctx: Ctx, make_transcript, tmp_path):
    from tests.hardening.hostile import session_text

    ids = [ctx.session]
    for i in range(5):  # distinct bytes, distinct sessions
        path = tmp_path / f"s{i}.jsonl"
        path.write_text(session_text(content=f'"prompt {i}"'))
        ids.append(make_transcript(path).pk)
    values = ", ".join(str(v) for v in range(50, 92))  # 42 values x 6 sessions = 252 runs
    response = ctx.post_json("/api/sweeps", sweep_body(ctx, f'"{values}"', str(ids)))
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"][-1] == "values"
    assert "at most 250" in detail["msg"]
    assert Sweep.objects.count() == 0
