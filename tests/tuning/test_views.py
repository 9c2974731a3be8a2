from __future__ import annotations

import re

import pytest

from contextlab.runs.models import Run
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services
from contextlab.tuning.models import Comparison, ConfigVersion, SavedConfig, Sweep
from tests.tuning.conftest import EARLY

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

HX = {"HTTP_HX_REQUEST": "true"}


def spec(preset="auto", **overrides):
    return tuning_configs.ConfigSpec(preset=preset, overrides=overrides)


@pytest.fixture
def comparison(user, session):
    return services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto", **EARLY)
    )


@pytest.fixture
def done_comparison(comparison, finish):
    finish()
    return comparison


@pytest.fixture
def sweep(user, session):
    return services.create_sweep(
        owner=user,
        transcripts=[session],
        base=spec("auto"),
        field_name="autocompact_pct_override",
        values=[20, 50, 90],
    )


@pytest.fixture
def saved(user):
    return services.save_config(
        owner=user, name="early", preset="auto", overrides=EARLY
    ).saved_config


def page_urls(comparison, sweep, saved, session):
    return [
        "/tune/",
        "/configs/new/",
        f"/configs/{saved.pk}/",
        "/compare/new/",
        f"/compare/{comparison.pk}/",
        f"/compare/{comparison.pk}/requests/0/?session={session.pk}",
        "/sweeps/new/",
        f"/sweeps/{sweep.pk}/",
    ]


def test_every_page_needs_login(client, comparison, sweep, saved, session):
    for url in page_urls(comparison, sweep, saved, session):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url
    for url in ("/configs/check/", "/compare/new/", "/sweeps/new/", "/configs/new/"):
        assert client.post(url).status_code == 302, url


def test_every_page_renders_for_its_owner(alice_client, done_comparison, sweep, saved, session):
    for url in page_urls(done_comparison, sweep, saved, session):
        response = alice_client.get(url)
        assert response.status_code == 200, (url, response.content[:500])


def test_other_users_get_404(mallory_client, comparison, sweep, saved, session):
    for url in page_urls(comparison, sweep, saved, session)[2:]:
        if url.endswith("/new/"):
            continue
        assert mallory_client.get(url).status_code == 404, url


def test_another_users_session_cannot_be_compared_or_swept(alice_client, other_session):
    response = alice_client.post(
        "/compare/new/",
        {"sessions": [other_session.pk], "a_config": "preset:auto", "b_config": "preset:auto"},
    )
    assert response.status_code == 404
    response = alice_client.post(
        "/sweeps/new/",
        {
            "sessions": [other_session.pk],
            "base_config": "preset:auto",
            "field": "autocompact_pct_override",
            "sweep_values": "50,60",
        },
    )
    assert response.status_code == 404
    assert not Comparison.objects.exists()
    assert not Sweep.objects.exists()


def test_another_users_saved_config_cannot_be_used(
    alice_client, mallory_client, session, other_user
):
    version = services.save_config(owner=other_user, name="theirs", preset="auto", overrides={})
    response = alice_client.post(
        "/compare/new/",
        {"sessions": [session.pk], "a_config": f"version:{version.pk}", "b_config": "preset:auto"},
    )
    assert response.status_code == 422
    assert b"a.version_id" in response.content


def test_index_empty_states(alice_client):
    body = alice_client.get("/tune/").content.decode()
    assert "No saved configs" in body
    assert "No comparisons yet" in body
    assert "No sweeps yet" in body
    assert "upload a transcript" in body


def test_nav_links_to_tune(alice_client):
    assert 'href="/tune/"' in alice_client.get("/sessions/").content.decode()


# --- configs ---------------------------------------------------------------------------------------


def test_config_page_starts_from_a_preset(alice_client):
    body = alice_client.get("/configs/new/?preset=aggressive").content.decode()
    assert '<option value="aggressive" selected' in body
    assert 'name="autocompact_pct_override" value="75.0"' in body
    assert "None yet" in body  # no differences from the preset


def test_inline_validation_names_the_field_and_range(alice_client):
    response = alice_client.post(
        "/configs/check/",
        {"preset": "auto", "autocompact_buffer_tokens": "-5", "context_window": "200000"},
        **HX,
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body
    assert 'id="config-check"' in body
    assert "Error in <strong>autocompact_buffer_tokens</strong>" in body
    assert "between 0 and 1000000" in body
    # the field's own error span, swapped out of band next to its input
    assert re.search(
        r'id="err-autocompact_buffer_tokens"[^>]*hx-swap-oob="true">[^<]*between', body
    )


def test_inline_validation_shows_the_diff(alice_client):
    body = alice_client.post(
        "/configs/check/", {"preset": "claude-code-2.1.88", "autocompact_pct_override": "70"}, **HX
    ).content.decode()
    assert 'id="config-diff"' in body
    assert 'data-field="autocompact_pct_override"' in body


def test_changing_the_preset_reloads_the_fields(alice_client):
    body = alice_client.post(
        "/configs/check/", {"preset": "1m-window", "reset": "1", "context_window": "5"}, **HX
    ).content.decode()
    assert 'id="config-fields"' in body
    assert 'name="context_window" value="1000000"' in body


def test_saving_a_config_then_editing_adds_a_version(alice_client, user):
    response = alice_client.post(
        "/configs/new/",
        {"name": "mine", "preset": "auto", "autocompact_pct_override": "70"},
    )
    assert response.status_code == 302
    saved = SavedConfig.objects.get(owner=user, name="mine")
    assert response["Location"] == f"/configs/{saved.pk}/?saved=1"
    page = alice_client.get(response["Location"]).content.decode()
    assert "Saved as version 1" in page
    assert 'data-field="autocompact_pct_override"' in page
    response = alice_client.post(
        f"/configs/{saved.pk}/",
        {"name": "mine", "preset": "auto", "autocompact_pct_override": "60"},
    )
    assert response.status_code == 302
    assert list(saved.versions.values_list("number", "overrides")) == [
        (2, {"autocompact_pct_override": 60.0}),
        (1, {"autocompact_pct_override": 70.0}),
    ]


def test_saving_an_invalid_config_is_refused_naming_the_field(alice_client):
    response = alice_client.post(
        "/configs/new/",
        {"name": "bad", "preset": "auto", "autocompact_buffer_tokens": "500000"},
    )
    assert response.status_code == 422
    assert b"Error in <strong>autocompact_buffer_tokens</strong>" in response.content
    assert not ConfigVersion.objects.exists()


# --- comparisons -------------------------------------------------------------------------------------


def test_compare_form_lists_sessions_and_configs(alice_client, session, saved):
    body = alice_client.get(f"/compare/new/?session={session.pk}").content.decode()
    assert f'value="{session.pk}" checked' in body
    assert f'value="version:{saved.latest.pk}"' in body


def test_compare_form_creates_and_redirects(alice_client, session):
    response = alice_client.post(
        "/compare/new/",
        {
            "sessions": [session.pk],
            "a_config": "preset:auto",
            "b_config": "preset:auto",
            "b_overrides": '{"autocompact_pct_override": 10}',
        },
    )
    comparison = Comparison.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/compare/{comparison.pk}/"
    assert comparison.b_overrides == EARLY


@pytest.mark.parametrize(
    ("b_overrides", "field"),
    [
        ('{"autocompact_buffer_tokens": -1}', "b.config.autocompact_buffer_tokens"),
        ('{"autocompact_buffer_tokens": 900000}', "b.config.autocompact_buffer_tokens"),
        ('{"bogus": 1}', "b.config.bogus"),
        ("{not json", "b.config"),
    ],
)
def test_compare_form_refuses_invalid_configs(alice_client, session, b_overrides, field):
    response = alice_client.post(
        "/compare/new/",
        {
            "sessions": [session.pk],
            "a_config": "preset:auto",
            "b_config": "preset:auto",
            "b_overrides": b_overrides,
        },
    )
    assert response.status_code == 422
    assert f"Error in <strong>{field}</strong>".encode() in response.content
    assert not Comparison.objects.exists()


def test_compare_form_needs_a_session(alice_client):
    response = alice_client.post(
        "/compare/new/", {"a_config": "preset:auto", "b_config": "preset:auto"}
    )
    assert response.status_code == 422
    assert b"session_ids" in response.content


def test_compare_page_polls_while_runs_are_pending(alice_client, comparison):
    body = alice_client.get(f"/compare/{comparison.pk}/").content.decode()
    assert 'id="compare-progress"' in body
    assert 'hx-trigger="every 1s"' in body
    partial = alice_client.get(f"/compare/{comparison.pk}/", **HX)
    assert "<html" not in partial.content.decode()
    assert 'hx-trigger="every 1s"' in partial.content.decode()
    assert "HX-Refresh" not in partial


def test_progress_partial_stops_polling_and_refreshes_when_done(alice_client, done_comparison):
    partial = alice_client.get(f"/compare/{done_comparison.pk}/", **HX)
    assert 'hx-trigger="every 1s"' not in partial.content.decode()
    assert partial["HX-Refresh"] == "true"


def test_compare_page_shows_delta_charts_and_divergence(alice_client, done_comparison, session):
    body = alice_client.get(f"/compare/{done_comparison.pk}/").content.decode()
    assert 'id="delta-table"' in body
    assert 'data-measure="cost_usd"' in body
    assert 'data-measure="compactions"' in body
    assert 'data-chart="chart-context-data"' in body
    assert 'id="chart-cost-data"' in body
    assert f'href="/compare/{done_comparison.pk}/requests/1/?session={session.pk}"' in body
    assert 'id="first-divergence"' in body


def test_compare_page_with_many_sessions_has_per_session_rows(
    alice_client, user, session, second_session, finish
):
    comparison = services.create_comparison(
        owner=user,
        transcripts=[session, second_session],
        a=spec("auto"),
        b=spec("auto", **EARLY),
    )
    finish()
    body = alice_client.get(
        f"/compare/{comparison.pk}/?session={second_session.pk}"
    ).content.decode()
    assert 'id="session-deltas"' in body
    assert f'<option value="{second_session.pk}" selected' in body
    assert alice_client.get(f"/compare/{comparison.pk}/?session=999999").status_code == 404


def test_compare_request_shows_both_model_views(alice_client, done_comparison, session):
    url = f"/compare/{done_comparison.pk}/requests/1/?session={session.pk}"
    body = alice_client.get(url).content.decode()
    assert 'id="explorer"' in body
    assert "side-a" in body
    assert "side-b" in body
    assert 'id="prev-link"' in body
    assert 'id="next-link"' in body
    assert "this is the first request where A and B diverge" in body
    assert 'class="row differs"' in body
    partial = alice_client.get(url, **HX).content.decode()
    assert partial.lstrip().startswith('<div id="explorer"')
    assert "<html" not in partial


def test_compare_request_out_of_range_is_404(alice_client, done_comparison, session):
    url = f"/compare/{done_comparison.pk}/requests/99/?session={session.pk}"
    assert alice_client.get(url).status_code == 404


def test_compare_request_before_runs_finish_says_so(alice_client, comparison, session):
    url = f"/compare/{comparison.pk}/requests/0/?session={session.pk}"
    response = alice_client.get(url)
    assert response.status_code == 200
    assert b"must finish" in response.content


def test_transcript_text_is_escaped_in_the_ab_view(alice_client, user, make_transcript, finish):
    from tests.conftest import FIXTURES

    hostile = make_transcript(FIXTURES / "hostile.jsonl")
    comparison = services.create_comparison(
        owner=user, transcripts=[hostile], a=spec("auto"), b=spec("auto", **EARLY)
    )
    finish()
    run = comparison.items.select_related("run").get(side="a").run
    assert run.status == "done", run.error
    for index in range(run.summary["requests"]):
        body = alice_client.get(
            f"/compare/{comparison.pk}/requests/{index}/?session={hostile.pk}&all=1"
        ).content.decode()
        assert "<script>window.__xss" not in body
        assert "<img src=x onerror" not in body


# --- sweeps -------------------------------------------------------------------------------------


def test_sweep_form_creates_and_redirects(alice_client, session):
    response = alice_client.post(
        "/sweeps/new/",
        {
            "sessions": [session.pk],
            "base_config": "preset:auto",
            "field": "autocompact_pct_override",
            "sweep_values": "50:90:20",
        },
    )
    sweep = Sweep.objects.get()
    assert response["Location"] == f"/sweeps/{sweep.pk}/"
    assert sweep.values == [50.0, 70.0, 90.0]


def test_sweep_form_refuses_bad_values_naming_them(alice_client, session):
    response = alice_client.post(
        "/sweeps/new/",
        {
            "sessions": [session.pk],
            "base_config": "preset:auto",
            "field": "autocompact_buffer_tokens",
            "sweep_values": "-10,5",
        },
    )
    assert response.status_code == 422
    assert b"Error in <strong>values</strong>" in response.content
    assert b"autocompact_buffer_tokens" in response.content


def test_sweep_page_table_chart_and_axes(alice_client, sweep, finish):
    pending = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'hx-trigger="every 1s"' in pending
    finish()
    body = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="sweep-table"' in body
    assert body.count("<tr data-value=") == 3
    assert 'data-chart="chart-sweep-data"' in body
    assert '<option value="mean_history_share" selected' in body
    chart = alice_client.get(
        f"/sweeps/{sweep.pk}/?x=compactions&y=peak_model_tokens",
        HTTP_HX_TARGET="sweep-chart",
        **HX,
    ).content.decode()
    assert chart.lstrip().startswith('<div id="sweep-chart"')
    assert "peak model-view tokens" in chart
    done = alice_client.get(f"/sweeps/{sweep.pk}/", **HX)
    assert done["HX-Refresh"] == "true"


def test_a_comparison_whose_sessions_were_deleted_says_so(alice_client, comparison, session):
    from contextlab.transcripts import services as transcript_services

    transcript_services.delete_transcript(transcript=session)
    response = alice_client.get(f"/compare/{comparison.pk}/")
    assert response.status_code == 200
    assert b"were deleted" in response.content
    assert b'hx-trigger="every 1s"' not in response.content


def test_align_rows_pairs_blocks_and_places_summaries():
    from contextlab.tuning.alignment import align_rows

    def row(message, block, badge="intact", text="t"):
        return {
            "message": message,
            "block": block,
            "badge": badge,
            "role": "user",
            "repl": {"text": text},
            "model": {"text": text} if badge == "intact" else None,
        }

    summary = {"message": None, "block": 0, "badge": "summarized", "model": {"text": "sum"}}
    view_a = {"rows": [row(0, 0), row(1, 0), row(1, 1)]}
    view_b = {"rows": [row(0, 0, "summarized"), summary, row(1, 0), row(1, 1, text="other")]}
    rows = align_rows(view_a, view_b)
    assert [r["key"] for r in rows] == ["0-0", "s-1-0", "1-0", "1-1"]
    assert rows[0]["differs"]  # sent under A, replaced by the summary under B
    assert rows[1]["a"] is None
    assert rows[1]["b"]["cell"]["fold"]["head"] == "sum"
    assert not rows[2]["differs"]
    assert rows[3]["differs"]


# --- deleting ------------------------------------------------------------------------------------


def delete_urls(comparison, sweep, saved):
    return [
        f"/compare/{comparison.pk}/delete/",
        f"/sweeps/{sweep.pk}/delete/",
        f"/configs/{saved.pk}/delete/",
    ]


def counts():
    return (Comparison.objects.count(), Sweep.objects.count(), SavedConfig.objects.count())


def test_delete_needs_post_login_and_ownership(
    client, alice_client, mallory_client, comparison, sweep, saved
):
    before = counts()
    for url in delete_urls(comparison, sweep, saved):
        assert alice_client.get(url).status_code == 405, url
        response = client.post(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url
        assert mallory_client.post(url).status_code == 404, url
    assert counts() == before == (1, 1, 1)


def test_deleting_a_comparison_keeps_its_runs(alice_client, done_comparison):
    run_ids = set(done_comparison.items.values_list("run_id", flat=True))
    assert run_ids
    response = alice_client.post(f"/compare/{done_comparison.pk}/delete/", follow=True)
    assert response.redirect_chain[-1][0] == "/tune/"
    body = response.content.decode()
    assert f"Deleted comparison {done_comparison.pk}." in body
    assert "No comparisons yet" in body
    assert not Comparison.objects.filter(pk=done_comparison.pk).exists()
    assert set(Run.objects.filter(pk__in=run_ids).values_list("pk", flat=True)) == run_ids
    assert alice_client.get(f"/compare/{done_comparison.pk}/").status_code == 404


def test_deleting_a_sweep_keeps_its_runs(alice_client, sweep):
    run_ids = set(sweep.items.values_list("run_id", flat=True))
    assert len(run_ids) == 3
    response = alice_client.post(f"/sweeps/{sweep.pk}/delete/", follow=True)
    assert f"Deleted sweep {sweep.pk} of autocompact_pct_override." in response.content.decode()
    assert not Sweep.objects.exists()
    assert Run.objects.filter(pk__in=run_ids).count() == 3


def test_deleting_a_config_keeps_the_comparisons_that_used_it(alice_client, user, session, saved):
    version = saved.latest
    built = services.create_comparison(
        owner=user,
        transcripts=[session],
        a=tuning_configs.ConfigSpec(
            preset="auto", overrides=dict(version.overrides), version=version
        ),
        b=spec("auto"),
    )
    assert built.a_label == "early v1"
    response = alice_client.post(f"/configs/{saved.pk}/delete/", follow=True)
    assert "Deleted config “early”." in response.content.decode()
    assert not SavedConfig.objects.exists()
    assert not ConfigVersion.objects.exists()
    built.refresh_from_db()
    assert built.a_version is None
    assert built.a_overrides == EARLY
    assert built.a_label == "auto · autocompact 10 %"
    assert alice_client.get(f"/compare/{built.pk}/").status_code == 200


def test_detail_pages_offer_delete_with_a_confirmation(alice_client, comparison, sweep, saved):
    for url, action in zip(
        (f"/compare/{comparison.pk}/", f"/sweeps/{sweep.pk}/", f"/configs/{saved.pk}/"),
        delete_urls(comparison, sweep, saved),
        strict=True,
    ):
        body = alice_client.get(url).content.decode()
        form = re.search(r'<form method="post" action="([^"]+)"[^>]*id="delete-form">', body)
        assert form is not None, url
        assert form.group(1) == action, url
        assert "data-confirm=" in body[form.end() :].split("</form>")[0], url
    assert 'id="delete-form"' not in alice_client.get("/configs/new/").content.decode()


def test_index_lists_status_without_a_query_per_row(
    alice_client, user, session, comparison, sweep, finish, django_assert_max_num_queries
):
    body = alice_client.get("/tune/").content.decode()
    rows = re.findall(r'<td[^>]*><span class="status (\w+)">', body)
    assert rows == ["queued", "queued"]
    finish()
    for _ in range(4):
        services.create_comparison(owner=user, transcripts=[session], a=spec(), b=spec())
    with django_assert_max_num_queries(14):
        body = alice_client.get("/tune/").content.decode()
    assert re.findall(r'<td[^>]*><span class="status (\w+)">', body) == ["done"] * 6
