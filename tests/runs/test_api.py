from __future__ import annotations

import pytest

from contextlab.engine.results import RESULT_VERSION
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.runs.schemas import RequestRowOut

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


@pytest.fixture
def transcript(make_transcript, tool_heavy_jsonl):
    return make_transcript(tool_heavy_jsonl)


def post_run(client, headers, **payload):
    return client.post("/api/runs", payload, content_type="application/json", **headers)


def test_create_whatif_run_returns_201(client, auth_header, transcript):
    response = post_run(
        client,
        auth_header,
        session_id=transcript.pk,
        mode="whatif",
        preset="aggressive",
        config={"context_window": 300000},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued"
    run = Run.objects.get(pk=body["id"])
    assert run.overrides == {"context_window": 300000}


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ({"mode": "sideways"}, ["body", "payload", "mode"]),
        ({"session_id": "abc"}, ["body", "payload", "session_id"]),
        ({"preset": "nope"}, ["body", "preset"]),
        ({"config": {"context_window": "big"}}, ["body", "config", "context_window"]),
        ({"config": {"unknown_knob": 1}}, ["body", "config", "unknown_knob"]),
        ({"config": [1, 2]}, ["body", "payload", "config"]),
    ],
)
def test_validation_errors_are_422_naming_the_field(client, auth_header, transcript, payload, loc):
    body = {"session_id": transcript.pk, "mode": "whatif", **payload}
    response = post_run(client, auth_header, **body)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == loc


def test_malformed_json_body_is_rejected(client, auth_header):
    response = client.post("/api/runs", "{not json", content_type="application/json", **auth_header)
    assert response.status_code in (400, 422)


def test_get_run_and_page_its_requests(client, auth_header, transcript):
    run = transcript.runs.get()
    response = client.get(f"/api/runs/{run.pk}/requests", **auth_header)
    assert response.status_code == 409
    assert "queued" in response.json()["detail"]
    runner.execute_run(run.pk)
    body = client.get(f"/api/runs/{run.pk}", **auth_header).json()
    assert (body["status"], body["progress"], body["error"]) == ("done", 1.0, "")
    page = client.get(f"/api/runs/{run.pk}/requests?offset=1&limit=2", **auth_header).json()
    assert page["count"] == body["summary"]["requests"]
    assert [item["index"] for item in page["items"]] == [1, 2]
    assert {"model_tokens", "repl_tokens", "cache", "events", "thresholds"} <= set(page["items"][0])
    assert client.get(f"/api/runs/{run.pk}/requests?limit=0", **auth_header).status_code == 422
    assert client.get(f"/api/runs/{run.pk}/requests?offset=-1", **auth_header).status_code == 422


def test_other_users_get_404_everywhere(client, other_auth_header, transcript):
    run = transcript.runs.get()
    assert (
        post_run(client, other_auth_header, session_id=transcript.pk, mode="whatif").status_code
        == 404
    )
    assert client.get(f"/api/runs/{run.pk}", **other_auth_header).status_code == 404
    assert client.get(f"/api/runs/{run.pk}/requests", **other_auth_header).status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", "/api/runs"), ("get", "/api/runs/1"), ("get", "/api/runs/1/requests")],
)
def test_anonymous_gets_401(client, method, path):
    assert getattr(client, method)(path).status_code == 401


# --- the request rows' declared shape ---------------------------------------------------------


def _resolve(schema: dict, node: dict) -> dict:
    """Follow a ``$ref`` (and the non-null side of an ``X | None``) to the object it names."""
    if "anyOf" in node:
        node = next(n for n in node["anyOf"] if n.get("type") != "null")
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return schema["components"]["schemas"][name]
    return node


def _request_row_schema(schema: dict) -> dict:
    operation = schema["paths"]["/api/runs/{run_id}/requests"]["get"]
    page = _resolve(schema, operation["responses"]["200"]["content"]["application/json"]["schema"])
    return _resolve(schema, page["properties"]["items"]["items"])


def _type_of(schema: dict, node: dict) -> str:
    """A property's type as a short string: "integer", "string|null", "CacheRow", ..."""
    if "anyOf" in node:
        return "|".join(_type_of(schema, n) for n in node["anyOf"])
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    if node.get("type") == "array":
        return f"array[{_type_of(schema, node['items'])}]"
    return node["type"]


def test_openapi_describes_every_request_row_field_with_its_type(client):
    schema = client.get("/api/openapi.json").json()
    row = _request_row_schema(schema)
    types = {name: _type_of(schema, prop) for name, prop in row["properties"].items()}
    assert types == {
        "index": "integer",
        "thread": "string",
        "thread_request": "integer",
        "message_id": "string|null",
        "message": "integer",
        "line": "integer",
        "timestamp": "string",
        "model": "string|null",
        "raw_tokens": "integer",
        "model_tokens": "integer",
        "segment": "integer",
        "unrecorded_tokens": "integer",
        "earlier_history_tokens": "integer",
        "repl_tokens": "integer",
        "decision_tokens": "integer",
        "recorded": "RecordedUsage|null",
        "recorded_total": "integer|null",
        "cache": "CacheRow",
        "cache_estimate": "CacheRow",
        "cache_read_gap": "number|null",
        "cache_disagrees": "boolean",
        "ttl": "string",
        "cost_usd": "number",
        "cost_estimate_usd": "number",
        "recorded_cost_usd": "number|null",
        "iteration_cost_usd": "number",
        "thresholds": "ThresholdLevels",
        "events": "array[object]",
        "turn_start": "boolean",
        "branch": "boolean",
        "blocked": "boolean",
        "view": "ViewRange",
    }
    assert set(row["required"]) == set(types)
    nested = {
        name: {
            k: _type_of(schema, p)
            for k, p in _resolve(schema, row["properties"][name])["properties"].items()
        }
        for name in ("cache", "cache_estimate", "recorded", "thresholds", "view")
    }
    assert nested["cache"] == nested["cache_estimate"]
    assert nested["cache"] == {
        "read": "integer",
        "write": "integer",
        "write_5m": "integer",
        "write_1h": "integer",
        "uncached": "integer",
        "hit_blocks": "integer",
        "blocks": "integer",
        "hit": "boolean",
        "reason": "string",
        "detail": "string",
        "server_miss_tokens": "integer",
        "source": "string",
    }
    assert nested["recorded"] == {
        "input": "integer",
        "cache_read": "integer",
        "cache_write": "integer",
        "cache_write_5m": "integer|null",
        "cache_write_1h": "integer|null",
        "output": "integer",
    }
    assert nested["thresholds"] == dict.fromkeys(
        ("effective", "autocompact", "warning", "blocking"), "integer"
    )
    assert nested["view"] == {"head": "array[string]", "start": "integer", "end": "integer"}


def _emitted_keys(rows: list[dict]) -> dict[str, set[str]]:
    """Every key the rows carry, and every key of their nested objects."""
    keys: dict[str, set[str]] = {
        "": set(),
        "cache": set(),
        "recorded": set(),
        "thresholds": set(),
        "view": set(),
    }
    for row in rows:
        keys[""].update(row)
        for name in ("cache", "recorded", "thresholds", "view"):
            if isinstance(row.get(name), dict):
                keys[name].update(row[name])
        for event in row["events"]:
            assert isinstance(event["step"], str)
            assert isinstance(event["action"], str)
    return keys


@pytest.mark.parametrize(
    ("name", "mode", "committed"),
    [
        ("marot__spotter__tool_heavy.jsonl", "whatif", True),
        # committed: two inline sidechains, and a persisted tool result (a preview)
        (
            "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
            "recorded",
            True,
        ),
        ("persisted_preview.jsonl", "recorded", True),
        # sidechains: their rows are in "subagents"
        (
            "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
            "recorded",
            False,
        ),
        # recorded compactions and microcompactions
        ("marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "recorded", False),
    ],
)
def test_every_key_the_engine_emits_in_a_row_is_declared_in_the_schema(
    client, name, mode, committed
):
    from contextlab import engine
    from tests.conftest import corpus_file, corpus_path

    path = corpus_file(name) if committed else corpus_path(name)
    session = engine.load_session(str(path))
    config, preset = engine.resolve_config(
        "auto", version=session.version, max_recorded_prompt=session.max_recorded_prompt
    )
    data = engine.replay(session, config, mode=mode, preset_name=preset).to_json()
    assert data["result_version"] == RESULT_VERSION
    rows = data["requests"] + [r for sub in data["subagents"] for r in sub["requests"]]
    assert rows
    emitted = _emitted_keys(rows)
    # and every value has its declared type (strict: no int where a float is declared)
    for row in rows:
        RequestRowOut.model_validate(row, strict=True)
    schema = client.get("/api/openapi.json").json()
    row = _request_row_schema(schema)
    declared = {"": set(row["properties"])}
    for nested in ("cache", "recorded", "thresholds", "view"):
        declared[nested] = set(_resolve(schema, row["properties"][nested])["properties"])
    # a key without a declared type fails here; so does a declared key the engine dropped
    assert emitted[""] == declared[""]
    for nested in ("cache", "thresholds", "view"):
        assert emitted[nested] == declared[nested], nested
    assert emitted["recorded"] <= declared["recorded"]
    if mode == "recorded":
        assert emitted["recorded"] == declared["recorded"]


def test_request_page_items_keep_their_keys_and_values(client, auth_header, transcript):
    """The derived schema validates the served rows without dropping or changing anything."""
    from contextlab.runs import services

    run = transcript.runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    stored = services.result_data(run)["requests"]
    page = client.get(f"/api/runs/{run.pk}/requests?limit=1000", **auth_header).json()
    assert page["items"] == stored


def test_run_tools_in_the_api_and_as_csv(client, auth_header, other_auth_header, transcript):
    """The worker stores the tools breakdown with the result; the API and the CSV serve it,
    a result stored without it is worked out again, a stranger gets 404."""
    from contextlab.engine.results.tools import ToolBreakdown
    from contextlab.runs.models import RunResult
    from contextlab.runs.schemas import ToolBreakdownOut

    run = transcript.runs.get()
    assert client.get(f"/api/runs/{run.pk}/tools", **auth_header).status_code == 409
    runner.execute_run(run.pk)
    stored = RunResult.objects.get(run=run).data["tool_breakdown"]
    body = client.get(f"/api/runs/{run.pk}/tools", **auth_header).json()
    assert body == stored
    assert set(body) == set(ToolBreakdown.__annotations__)
    ToolBreakdownOut.model_validate(body)
    bash = next(t for t in body["tools"] if t["tool"] == "Bash")
    assert bash["calls"] >= 1
    assert "estimate" in body["attribution"]
    client.force_login(run.owner)
    csv_text = client.get(f"/runs/{run.pk}/tools.csv").content.decode()
    client.logout()
    assert csv_text.splitlines()[0].startswith("tool,calls,errors")
    assert f"Bash,{bash['calls']},{bash['errors']},{bash['history_tokens']}," in csv_text
    # a result stored before the breakdown was: the same answer, worked out from the result
    row = RunResult.objects.get(run=run)
    del row.data["tool_breakdown"]
    row.save()
    run.refresh_from_db()
    Run.objects.filter(pk=run.pk).update(finished_at=run.finished_at.replace(microsecond=1))
    assert client.get(f"/api/runs/{run.pk}/tools", **auth_header).json() == stored
    assert client.get(f"/api/runs/{run.pk}/tools", **other_auth_header).status_code == 404


def test_a_request_composition_says_which_kinds_of_content_it_holds(
    client, auth_header, other_auth_header, transcript
):
    run = transcript.runs.get()
    url = f"/api/runs/{run.pk}/requests/1/composition"
    assert client.get(url, **auth_header).status_code == 409  # not replayed yet
    runner.execute_run(run.pk)
    body = client.get(url, **auth_header).json()
    row = client.get(f"/api/runs/{run.pk}/requests?offset=1&limit=1", **auth_header).json()
    assert (body["index"], body["number"]) == (1, 2)
    assert body["model_tokens"] == row["items"][0]["model_tokens"]
    assert abs(sum(p["tokens"] for p in body["parts"]) - body["model_tokens"]) <= len(body["parts"])
    kinds = {c["kind"]: c for c in body["content"]}
    assert kinds
    assert set(kinds) <= {"prose", "code", "json", "output", "cjk", "encoded", "image"}
    assert all(c["label"] and c["tokens"] > 0 for c in body["content"])
    assert sum(c["share"] for c in body["content"]) == pytest.approx(1.0)
    count = row["count"]
    missing = client.get(f"/api/runs/{run.pk}/requests/{count}/composition", **auth_header)
    assert missing.status_code == 404
    assert client.get(url, **other_auth_header).status_code == 404
