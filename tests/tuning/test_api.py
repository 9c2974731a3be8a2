from __future__ import annotations

import pytest

from contextlab.runs.models import Run
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning import services
from contextlab.tuning.models import Comparison, Sweep
from tests.tuning.conftest import EARLY

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def post(client, url, headers, payload):
    return client.post(url, payload, content_type="application/json", **headers)


def test_create_comparison_returns_201_and_its_id(client, auth_header, session):
    response = post(
        client,
        "/api/comparisons",
        auth_header,
        {"session_ids": [session.pk], "a": {"preset": "auto"}, "b": {"config": EARLY}},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    comparison = Comparison.objects.get(pk=body["id"])
    assert body["status"] == "queued"
    assert body["url"] == f"/compare/{comparison.pk}/"
    assert comparison.b_overrides == EARLY


def test_get_comparison_shape_once_done(client, auth_header, session, second_session, finish):
    created = post(
        client,
        "/api/comparisons",
        auth_header,
        {
            "session_ids": [session.pk, second_session.pk],
            "a": {"preset": "claude-code-2.1.88"},
            "b": {"preset": "claude-code-2.1.88", "config": EARLY},
        },
    ).json()
    pending = client.get(f"/api/comparisons/{created['id']}", **auth_header).json()
    assert pending["status"] == "queued"
    assert pending["delta"] == {}
    finish()
    response = client.get(f"/api/comparisons/{created['id']}", **auth_header)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "done"
    for side in ("a", "b"):
        assert len(body[side]["run_ids"]) == 2
        for key in tuning_reports.SUMMARY_KEYS:
            assert key in body[side]["summary"], key
    assert body["b"]["summary"]["compactions"] > body["a"]["summary"]["compactions"]
    assert body["delta"]["cost_usd"]["a"] == body["a"]["summary"]["cost_usd"]
    assert set(body["delta"]["compactions"]) >= {"label", "a", "b", "delta", "relative", "better"}
    assert [s["session_id"] for s in body["sessions"]] == [session.pk, second_session.pk]
    assert body["sessions"][0]["first_divergence"] == 1
    assert body["sessions"][0]["first_divergence_number"] == 2  # as the pages number it


@pytest.mark.parametrize(
    ("side", "loc"),
    [
        (
            {"config": {"autocompact_buffer_tokens": -1}},
            ["body", "b", "config", "autocompact_buffer_tokens"],
        ),
        (
            {"config": {"autocompact_buffer_tokens": 500_000}},
            ["body", "b", "config", "autocompact_buffer_tokens"],
        ),
        ({"config": {"unknown_knob": 3}}, ["body", "b", "config", "unknown_knob"]),
        ({"preset": "nope"}, ["body", "b", "preset"]),
        ({"version_id": 123456}, ["body", "b", "version_id"]),
    ],
)
def test_invalid_configs_are_422_naming_the_field(client, auth_header, session, side, loc):
    response = post(
        client, "/api/comparisons", auth_header, {"session_ids": [session.pk], "a": {}, "b": side}
    )
    assert response.status_code == 422, response.content
    detail = response.json()["detail"]
    assert detail[0]["loc"] == loc
    assert detail[0]["msg"]
    assert not Comparison.objects.exists()


def test_empty_session_list_is_422(client, auth_header):
    response = post(client, "/api/comparisons", auth_header, {"session_ids": [], "a": {}, "b": {}})
    assert response.status_code == 422


def test_other_users_sessions_and_comparisons_are_404(
    client, auth_header, other_auth_header, session, other_session
):
    response = post(
        client,
        "/api/comparisons",
        auth_header,
        {"session_ids": [other_session.pk], "a": {}, "b": {}},
    )
    assert response.status_code == 404
    created = post(
        client, "/api/comparisons", auth_header, {"session_ids": [session.pk], "a": {}, "b": {}}
    ).json()
    assert client.get(f"/api/comparisons/{created['id']}", **other_auth_header).status_code == 404
    sweep = post(
        client,
        "/api/sweeps",
        auth_header,
        {"session_ids": [session.pk], "field": "autocompact_pct_override", "values": [50, 70]},
    ).json()
    assert client.get(f"/api/sweeps/{sweep['id']}", **other_auth_header).status_code == 404
    response = post(
        client,
        "/api/sweeps",
        other_auth_header,
        {"session_ids": [session.pk], "field": "autocompact_pct_override", "values": [50]},
    )
    assert response.status_code == 404


def test_anonymous_is_401(client, session):
    assert (
        post(
            client, "/api/comparisons", {}, {"session_ids": [session.pk], "a": {}, "b": {}}
        ).status_code
        == 401
    )
    assert client.get("/api/comparisons/1").status_code == 401
    assert (
        post(
            client, "/api/sweeps", {}, {"session_ids": [1], "field": "x", "values": [1]}
        ).status_code
        == 401
    )
    assert client.get("/api/sweeps/1").status_code == 401


def test_saved_config_versions_can_be_named(client, auth_header, user, session):
    version = services.save_config(owner=user, name="early", preset="auto", overrides=EARLY)
    response = post(
        client,
        "/api/comparisons",
        auth_header,
        {"session_ids": [session.pk], "a": {"version_id": version.pk}, "b": {}},
    )
    assert response.status_code == 201
    comparison = Comparison.objects.get(pk=response.json()["id"])
    assert comparison.a_version == version
    assert comparison.a_overrides == EARLY


def test_create_and_read_a_sweep(client, auth_header, session, finish):
    response = post(
        client,
        "/api/sweeps",
        auth_header,
        {
            "session_ids": [session.pk],
            "base": {"preset": "claude-code-2.1.88"},
            "field": "autocompact_buffer_tokens",
            "values": "5000:25000:5000",
        },
    )
    assert response.status_code == 201, response.content
    sweep = Sweep.objects.get(pk=response.json()["id"])
    assert sweep.values == [5000, 10000, 15000, 20000, 25000]
    finish()
    body = client.get(f"/api/sweeps/{sweep.pk}", **auth_header).json()
    assert body["status"] == "done"
    assert [p["value"] for p in body["points"]] == [5000, 10000, 15000, 20000, 25000]
    for point in body["points"]:
        assert point["status"] == "done"
        assert len(point["run_ids"]) == 1
        for key in tuning_reports.SUMMARY_KEYS:
            assert key in point["summary"]


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ({"field": "unknown_knob", "values": [1, 2]}, ["body", "field"]),
        ({"field": "autocompact_buffer_tokens", "values": [-100, 5]}, ["body", "values"]),
        ({"field": "autocompact_buffer_tokens", "values": [500_000]}, ["body", "values"]),
        (
            {
                "field": "autocompact_pct_override",
                "values": [50],
                "base": {"config": {"context_window": -1}},
            },
            ["body", "base", "config", "context_window"],
        ),
    ],
)
def test_invalid_sweeps_are_422_naming_the_field(client, auth_header, session, payload, loc):
    response = post(client, "/api/sweeps", auth_header, {"session_ids": [session.pk], **payload})
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == loc
    assert not Sweep.objects.exists()


def test_delete_comparison_and_sweep_only_for_the_owner(
    client, auth_header, other_auth_header, user, session
):
    comparison = services.create_comparison(
        owner=user,
        transcripts=[session],
        a=tuning_configs.ConfigSpec(),
        b=tuning_configs.ConfigSpec(overrides=EARLY),
    )
    sweep = services.create_sweep(
        owner=user,
        transcripts=[session],
        base=tuning_configs.ConfigSpec(),
        field_name="autocompact_pct_override",
        values=[40, 60],
    )
    runs = Run.objects.count()
    urls = [f"/api/comparisons/{comparison.pk}", f"/api/sweeps/{sweep.pk}"]
    for url in urls:
        assert client.delete(url).status_code == 401, url
        assert client.delete(url, **other_auth_header).status_code == 404, url
    assert Comparison.objects.count() == Sweep.objects.count() == 1
    for url in urls:
        assert client.delete(url, **auth_header).status_code == 204, url
        assert client.get(url, **auth_header).status_code == 404, url
        assert client.delete(url, **auth_header).status_code == 404, url
    assert not Comparison.objects.exists()
    assert not Sweep.objects.exists()
    assert Run.objects.count() == runs


def test_list_comparisons_and_sweeps_newest_first_owner_only(
    client,
    auth_header,
    other_auth_header,
    user,
    session,
    second_session,
    finish,
    django_assert_max_num_queries,
):
    first = services.create_comparison(
        owner=user,
        transcripts=[session, second_session],
        a=tuning_configs.ConfigSpec(),
        b=tuning_configs.ConfigSpec(overrides=EARLY),
    )
    sweep = services.create_sweep(
        owner=user,
        transcripts=[session],
        base=tuning_configs.ConfigSpec(),
        field_name="autocompact_pct_override",
        values=[40, 60],
    )
    listed = client.get("/api/comparisons", **auth_header).json()
    assert [c["id"] for c in listed] == [first.pk]
    assert listed[0]["status"] == "queued"
    assert listed[0]["a_label"] == "auto"
    assert listed[0]["b_label"] == "auto · autocompact 10 %"
    assert listed[0]["session_ids"] == sorted([session.pk, second_session.pk])
    assert listed[0]["url"] == f"/compare/{first.pk}/"
    sweeps = client.get("/api/sweeps", **auth_header).json()
    assert [(s["id"], s["field"], s["values"]) for s in sweeps] == [
        (sweep.pk, "autocompact_pct_override", [40, 60])
    ]
    assert sweeps[0]["status"] == "queued"
    assert client.get("/api/comparisons", **other_auth_header).json() == []
    assert client.get("/api/sweeps", **other_auth_header).json() == []
    assert client.get("/api/comparisons").status_code == 401

    finish()
    later = [
        services.create_comparison(
            owner=user,
            transcripts=[session],
            a=tuning_configs.ConfigSpec(),
            b=tuning_configs.ConfigSpec(),
        )
        for _ in range(5)
    ]
    # a fixed number of queries however many comparisons there are (no query per row)
    with django_assert_max_num_queries(6):
        listed = client.get("/api/comparisons", **auth_header).json()
    assert [c["id"] for c in listed] == [c.pk for c in reversed(later)] + [first.pk]
    assert {c["status"] for c in listed} == {"done"}
    assert client.get("/api/sweeps", **auth_header).json()[0]["status"] == "done"
