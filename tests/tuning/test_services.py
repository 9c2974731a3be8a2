from __future__ import annotations

import pytest

from contextlab import engine
from contextlab.jobs import lifecycle, tasks
from contextlab.runs import services as run_services
from contextlab.runs.models import Run
from contextlab.summaries.models import RunSummarizer
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import reports as tuning_reports
from contextlab.tuning import services
from contextlab.tuning.models import ComparisonRun, ConfigVersion, SweepRun
from tests.tuning.conftest import EARLY

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def one_run(comparison):
    return ComparisonRun.objects.filter(comparison=comparison).select_related("run").first().run  # type: ignore[union-attr]


def spec(preset="auto", **overrides):
    return tuning_configs.ConfigSpec(preset=preset, overrides=overrides)


# --- configs and versions ------------------------------------------------------------------------


def test_saving_a_config_creates_version_one(user):
    version = services.save_config(
        owner=user, name="early", preset="claude-code-2.1.88", overrides=EARLY
    )
    assert version.number == 1
    assert version.saved_config.name == "early"
    assert version.overrides == EARLY
    assert version.label == "early v1"


def test_editing_a_config_adds_a_version_and_keeps_the_old_one(user):
    v1 = services.save_config(owner=user, name="c", preset="auto", overrides=EARLY)
    v2 = services.save_config(
        owner=user,
        name="c",
        preset="auto",
        overrides={"autocompact_pct_override": 60.0},
        saved=v1.saved_config,
    )
    assert (v1.number, v2.number) == (1, 2)
    v1.refresh_from_db()
    assert v1.overrides == EARLY
    assert v1.saved_config.latest == v2


def test_saving_the_same_content_does_not_add_a_version(user):
    v1 = services.save_config(owner=user, name="c", preset="auto", overrides=EARLY)
    again = services.save_config(
        owner=user, name="c", preset="auto", overrides=EARLY, saved=v1.saved_config
    )
    assert again == v1
    assert ConfigVersion.objects.count() == 1


def test_config_names_are_unique_per_owner(user, other_user):
    services.save_config(owner=user, name="c", preset="auto", overrides={})
    with pytest.raises(engine.FieldError) as exc:
        services.save_config(owner=user, name="c", preset="auto", overrides={})
    assert exc.value.field == "name"
    services.save_config(owner=other_user, name="c", preset="auto", overrides={})


def test_editing_a_config_does_not_change_runs_made_with_the_old_version(user, session, finish):
    v1 = services.save_config(owner=user, name="c", preset="auto", overrides=EARLY)
    a = tuning_configs.config_spec(owner=user, version_id=v1.pk, prefix="a")
    comparison = services.create_comparison(owner=user, transcripts=[session], a=a, b=spec("auto"))
    finish()
    run = ComparisonRun.objects.get(comparison=comparison, side="a").run
    config_before = dict(run.config)
    v2 = services.save_config(
        owner=user,
        name="c",
        preset="auto",
        overrides={"autocompact_pct_override": 60.0},
        saved=v1.saved_config,
    )
    run.refresh_from_db()
    assert run.config == config_before
    assert run.config["autocompact_pct_override"] == 10
    assert comparison.a_version == v1
    # the new version makes a new run instead
    later = services.create_comparison(
        owner=user,
        transcripts=[session],
        a=tuning_configs.config_spec(owner=user, version_id=v2.pk),
        b=spec("auto"),
    )
    assert ComparisonRun.objects.get(comparison=later, side="a").run != run


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"autocompact_buffer_tokens": -5}, "config.autocompact_buffer_tokens"),
        ({"autocompact_buffer_tokens": 500_000}, "config.autocompact_buffer_tokens"),
        ({"no_such_knob": 1}, "config.no_such_knob"),
        ({"context_window": "big"}, "config.context_window"),
    ],
)
def test_invalid_configs_name_the_field(overrides, field):
    with pytest.raises(engine.FieldError) as exc:
        tuning_configs.validate_config("auto", overrides, prefix="a")
    assert exc.value.field == f"a.{field}"
    assert exc.value.message


def test_unknown_preset_is_refused():
    with pytest.raises(engine.FieldError) as exc:
        tuning_configs.validate_config("nope", None, prefix="b")
    assert exc.value.field == "b.preset"


def test_config_diff_lists_changes_from_the_preset():
    diff = tuning_configs.config_diff("claude-code-2.1.88", {"autocompact_pct_override": 70})
    assert diff == [{"field": "autocompact_pct_override", "preset": None, "config": 70.0}]
    assert tuning_configs.config_diff("aggressive", {}) == []


def test_check_form_collects_one_error_per_field_with_the_range():
    check = tuning_configs.check_form(
        "auto",
        {
            "autocompact_buffer_tokens": "-1",
            "context_window": "abc",
            "autocompact_pct_override": "70",
        },
    )
    assert set(check.errors) == {"autocompact_buffer_tokens", "context_window"}
    assert "between 0 and 1000000" in check.errors["autocompact_buffer_tokens"]


def test_check_form_reports_cross_field_rules_on_their_field():
    check = tuning_configs.check_form("auto", {"autocompact_buffer_tokens": "190000"})
    assert "autocompact_buffer_tokens" in check.errors
    assert "effective window" in check.errors["autocompact_buffer_tokens"]


def test_check_form_keeps_only_changed_fields_as_overrides():
    base = tuning_configs.preset_base("auto").to_dict()
    values = {s["name"]: tuning_configs.form_value(base[s["name"]]) for s in engine.field_specs()}
    values["autocompact_pct_override"] = "70"
    values["snip_enabled"] = "on"
    check = tuning_configs.check_form("auto", values)
    assert check.errors == {}
    assert check.overrides == {"autocompact_pct_override": 70.0, "snip_enabled": True}
    assert [d["field"] for d in check.diff] == ["autocompact_pct_override", "snip_enabled"]


# --- runs: reuse and batching -----------------------------------------------------------------------


def test_comparison_creates_one_run_per_side_and_enqueues_them(
    user, session, django_capture_on_commit_callbacks, monkeypatch
):
    calls = []
    monkeypatch.setattr(tasks.replay_batch, "delay", lambda ids: calls.append(ids))
    with django_capture_on_commit_callbacks(execute=True):
        comparison = services.create_comparison(
            owner=user, transcripts=[session], a=spec("auto"), b=spec("auto", **EARLY)
        )
    runs = [item.run for item in ComparisonRun.objects.filter(comparison=comparison)]
    assert len(runs) == 2
    assert {r.mode for r in runs} == {"whatif"}
    assert {r.status for r in runs} == {"queued"}
    queued = sorted(i for ids in calls for i in ids)
    assert queued == sorted(r.pk for r in runs)


def test_identical_runs_are_reused(user, session, finish):
    first = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto", **EARLY)
    )
    finish()
    # "auto" on a 2.1.38 session resolves to claude-code-2.1.74: the same config as naming it
    second = services.create_comparison(
        owner=user,
        transcripts=[session],
        a=spec("claude-code-2.1.74"),
        b=spec("auto", autocompact_pct_override=10.0),
    )
    runs_first = {i.side: i.run_id for i in ComparisonRun.objects.filter(comparison=first)}
    runs_second = {i.side: i.run_id for i in ComparisonRun.objects.filter(comparison=second)}
    assert runs_first == runs_second
    assert Run.objects.filter(mode="whatif").count() == 2


def test_a_run_stored_by_another_engine_version_is_replayed_again(
    user, session, finish, monkeypatch
):
    first = one_run(
        services.create_comparison(
            owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
        )
    )
    finish()
    first.refresh_from_db()
    # the worker records the engine that stored the result
    assert first.status == Run.Status.DONE
    assert first.engine_version == engine.ENGINE_VERSION
    # same engine: reused
    again = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    assert one_run(again) == first
    # the engine changed since (its version bumped): the stored run is not reused
    monkeypatch.setattr(engine, "ENGINE_VERSION", engine.ENGINE_VERSION + 1)
    changed = one_run(
        services.create_comparison(
            owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
        )
    )
    assert changed != first
    assert changed.status == Run.Status.QUEUED
    assert changed.config == first.config
    # replayed by the new engine, it is the one reused from then on
    finish()
    changed.refresh_from_db()
    assert changed.engine_version == engine.ENGINE_VERSION
    latest = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    assert one_run(latest) == changed


def test_a_run_stored_before_runs_recorded_the_engine_version_is_not_reused(user, session, finish):
    first = one_run(
        services.create_comparison(
            owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
        )
    )
    finish()
    Run.objects.filter(pk=first.pk).update(engine_version=0)  # as the migration leaves it
    again = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    assert one_run(again) != first


def test_a_queued_run_is_reused_but_a_failed_one_is_not(user, session):
    first = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    # identical sides share one run
    assert ComparisonRun.objects.filter(comparison=first).values("run").distinct().count() == 1
    run = one_run(first)
    again = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    assert one_run(again) == run
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
    third = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    assert one_run(third) != run


def test_runs_of_other_users_are_never_reused(user, other_user, session, other_session, finish):
    services.create_comparison(
        owner=other_user, transcripts=[other_session], a=spec("auto"), b=spec("auto")
    )
    mine = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    assert one_run(mine).owner == user


def test_a_run_whose_summaries_an_llm_writes_is_not_reused_for_extractive_ones(
    user, session, finish
):
    """Same session, same resolved config: a comparison (extractive summaries) must not pick up
    a run whose summaries come from an LLM backend, finished or not."""
    llm = run_services.start_run(
        owner=user,
        transcript=session,
        mode="whatif",
        preset="auto",
        summarizer="anthropic",
        summary_model="claude-sonnet-4-6",
    )
    Run.objects.filter(pk=llm.pk).update(status=Run.Status.DONE)
    comparison = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    run = one_run(comparison)
    assert run != llm
    assert run.config == llm.config
    assert not RunSummarizer.objects.filter(run=run).exists()
    # an extractive run of that config is reused as before
    again = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    assert one_run(again) == run


def test_reuse_matches_the_summarizer_backend_and_model(user, session):
    config = run_services.start_run(owner=user, transcript=session, mode="whatif").config
    llm = run_services.start_run(
        owner=user,
        transcript=session,
        mode="whatif",
        summarizer="openai",
        summary_model="llama3",
    )
    find = services.reusable_run
    assert find(owner=user, transcript=session, config=config) != llm
    assert (
        find(
            owner=user,
            transcript=session,
            config=config,
            summarizer="openai",
            summary_model="llama3",
        )
        == llm
    )
    assert (
        find(
            owner=user, transcript=session, config=config, summarizer="openai", summary_model="qwen"
        )
        is None
    )


def test_comparison_runs_are_created_as_single_runs_are(user, session, monkeypatch):
    created = []
    real = lifecycle.create

    def recording(**kwargs):
        run = real(**kwargs)
        created.append(run.pk)
        return run

    monkeypatch.setattr(lifecycle, "create", recording)
    single = run_services.start_run(owner=user, transcript=session, mode="whatif")
    comparison = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto", **EARLY)
    )
    made = {item.run_id for item in ComparisonRun.objects.filter(comparison=comparison)}
    assert created == [single.pk, *sorted(made - {single.pk})]
    assert single.pk in made  # the identical extractive run is reused


def test_batches_split_one_session_over_two_workers():
    class FakeRun:
        def __init__(self, pk, transcript_id):
            self.pk, self.transcript_id = pk, transcript_id

    one = [FakeRun(i, 1) for i in range(5)]
    assert services.batches(one) == [[0, 1, 2], [3, 4]]  # type: ignore[arg-type]
    many = [FakeRun(i, i % 3) for i in range(6)]
    assert sorted(services.batches(many)) == [[0, 3], [1, 4], [2, 5]]  # type: ignore[arg-type]


def counting(monkeypatch, name):
    calls = []
    real = getattr(engine, name)

    def wrapper(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, name, wrapper)
    return calls


def test_the_batch_runner_parses_each_session_once(user, session, monkeypatch):
    load = counting(monkeypatch, "load_session_cached")
    replays = counting(monkeypatch, "replay")
    sweep = services.create_sweep(
        owner=user,
        transcripts=[session],
        base=spec("auto"),
        field_name="autocompact_pct_override",
        values="20:60:10",
    )
    from contextlab.jobs import batches as runner

    outcomes: list[lifecycle.Outcome] = []
    runner.execute_batch(
        [item.run_id for item in SweepRun.objects.filter(sweep=sweep)], on_outcome=outcomes.append
    )
    assert [type(o) for o in outcomes] == [lifecycle.Done] * 5
    assert len(replays) == 5
    assert len(load) == 1
    assert tuning_reports.sweep_status(sweep) == "done"


def test_the_batch_runner_skips_finished_runs(user, session, finish, monkeypatch):
    services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto", **EARLY)
    )
    finish()
    replays = counting(monkeypatch, "replay")
    from contextlab.jobs import batches as runner

    outcomes: list[lifecycle.Outcome] = []
    runner.execute_batch(
        list(Run.objects.filter(mode="whatif").values_list("pk", flat=True)),
        on_outcome=outcomes.append,
    )
    assert replays == []
    assert outcomes == []


# --- reports --------------------------------------------------------------------------------------


def test_comparison_report_has_totals_delta_and_divergence(user, session, finish):
    comparison = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto", **EARLY)
    )
    assert tuning_reports.comparison_report(comparison)["status"] == "queued"
    finish()
    report = tuning_reports.comparison_report(comparison)
    assert report["status"] == "done"
    a, b = report["a"]["summary"], report["b"]["summary"]
    for key in tuning_reports.SUMMARY_KEYS:
        assert key in a
        assert key in b
    assert b["compactions"] > a["compactions"]
    assert report["delta"] == engine.compare.delta(a, b)
    assert report["delta"]["compactions"]["better"] == "a"
    (pair,) = report["pairs"]
    assert pair.divergence == 1


def test_totals_over_many_sessions_add_up(user, session, second_session, finish):
    comparison = services.create_comparison(
        owner=user,
        transcripts=[session, second_session],
        a=spec("auto"),
        b=spec("auto", **EARLY),
    )
    finish()
    report = tuning_reports.comparison_report(comparison)
    assert report["done_sessions"] == 2
    per_session = [p.a_measures for p in report["pairs"]]
    total = report["a"]["summary"]
    assert total["requests"] == sum(m["requests"] for m in per_session)
    assert total["cost_usd"] == pytest.approx(sum(m["cost_usd"] for m in per_session))
    assert total["peak_model_tokens"] == max(m["peak_model_tokens"] for m in per_session)


def test_sweep_makes_one_run_per_value_per_session_and_reuses(
    user, session, second_session, finish
):
    sweep = services.create_sweep(
        owner=user,
        transcripts=[session, second_session],
        base=spec("auto"),
        field_name="autocompact_pct_override",
        values=[30, 60, 90],
    )
    assert SweepRun.objects.filter(sweep=sweep).count() == 6
    assert Run.objects.filter(mode="whatif").count() == 6
    finish()
    report = tuning_reports.sweep_report(sweep)
    assert report["status"] == "done"
    assert [p["value"] for p in report["points"]] == [30.0, 60.0, 90.0]
    assert all(p["summary"]["requests"] > 0 for p in report["points"])
    again = services.create_sweep(
        owner=user,
        transcripts=[session],
        base=spec("auto"),
        field_name="autocompact_pct_override",
        values="30,60",
    )
    assert Run.objects.filter(mode="whatif").count() == 6
    assert tuning_reports.sweep_status(again) == "done"
    # the run of the sweep is the one a comparison with the same config uses
    comparison = services.create_comparison(
        owner=user,
        transcripts=[session],
        a=spec("auto", autocompact_pct_override=30),
        b=spec("auto", autocompact_pct_override=60),
    )
    assert tuning_reports.comparison_status(comparison) == "done"


@pytest.mark.parametrize(
    ("field", "values", "where"),
    [
        ("no_such_field", [1, 2], "field"),
        ("blocking_limit_base", [1, 2], "field"),
        ("autocompact_buffer_tokens", [-5, 10], "values"),
        ("autocompact_buffer_tokens", "1000:500000:100000", "values"),
        ("autocompact_pct_override", "abc", "values"),
    ],
)
def test_bad_sweeps_name_the_field_or_values(user, session, field, values, where):
    with pytest.raises(engine.FieldError) as exc:
        services.create_sweep(
            owner=user, transcripts=[session], base=spec(), field_name=field, values=values
        )
    assert exc.value.field == where


def test_result_data_is_what_reports_read(user, session, finish):
    comparison = services.create_comparison(
        owner=user, transcripts=[session], a=spec("auto"), b=spec("auto")
    )
    finish()
    run = one_run(comparison)
    run.refresh_from_db()
    data = run_services.result_data(run)
    assert data is not None
    assert tuning_reports.measures(run) == engine.compare.summary_measures(data)
