"""A run's life: claim, recovery of abandoned runs, and the rule that only ``jobs.lifecycle``
changes a run's status (with no import cycle among the job modules)."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from contextlab import blobs
from contextlab.jobs import lifecycle, tasks
from contextlab.runs.models import Run

ROOT = Path(__file__).resolve().parents[2]
CONTEXTLAB = ROOT / "contextlab"
LIFECYCLE = CONTEXTLAB / "jobs" / "lifecycle.py"

# --- claim and recovery ---------------------------------------------------------------------------


@pytest.fixture
def run(make_transcript, short_jsonl):
    return make_transcript(short_jsonl).runs.get()


def _stale(run: Run, attempts: int) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        attempts=attempts,
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_a_run_owned_by_a_live_worker_is_not_taken(run):
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, heartbeat_at=timezone.now(), attempts=1
    )
    assert lifecycle.claim(run.pk) is False


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_stale_running_run_is_requeued_then_failed_after_max_attempts(
    run, settings, django_capture_on_commit_callbacks
):
    settings.RUN_MAX_ATTEMPTS = 2
    _stale(run, attempts=1)
    with django_capture_on_commit_callbacks() as callbacks:
        changed = tasks.recover_runs()
    assert [r.status for r in changed] == [Run.Status.QUEUED]
    assert len(callbacks) == 1  # re-published for a worker
    _stale(run, attempts=2)
    changed = tasks.recover_runs()
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "stopped responding" in run.error
    assert run.finished_at is not None


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_fresh_running_run_is_left_alone(run):
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, attempts=1, heartbeat_at=timezone.now()
    )
    assert tasks.recover_runs() == []


# --- one writer of Run.status ---------------------------------------------------------------------

#: calls that write the fields they are given as keywords (or in a ``defaults`` dict)
WRITING_CALLS = {"update", "create", "update_or_create", "get_or_create", "Run"}


def _has_status_key(node: ast.expr) -> bool:
    if isinstance(node, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == "status" for k in node.keys)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return any(k.arg == "status" for k in node.keywords)
    return False


def _call_writes_status(node: ast.Call, status_dicts: set[str]) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in WRITING_CALLS:
        return any(
            k.arg == "status"
            or _has_status_key(k.value)
            or (k.arg is None and isinstance(k.value, ast.Name) and k.value.id in status_dicts)
            for k in node.keywords
        )
    if name == "setattr":
        return any(isinstance(a, ast.Constant) and a.value == "status" for a in node.args)
    return name == "bulk_update" and "'status'" in ast.unparse(node)


def status_writes(source: str) -> list[int]:
    """Lines of ``source`` that write a ``status`` field: a keyword (or a dict of fields, given
    inline or by name) of an update or create call or a ``Run(...)``; an assignment to
    ``<anything>.status``; ``setattr(…, "status", …)``; ``bulk_update(…, ["status"])``."""
    tree = ast.parse(source)
    status_dicts = {  # names bound to a dict of fields that holds a status
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and node.value is not None
        and _has_status_key(node.value)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if _call_writes_status(node, status_dicts):
                lines.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for each in ast.walk(target):
                    if isinstance(each, ast.Attribute) and each.attr == "status":
                        lines.append(node.lineno)
    return sorted(set(lines))


def test_the_status_write_finder_sees_every_form():
    source = """
Run.objects.filter(pk=1).update(status=Run.Status.DONE)
Run.objects.create(owner=u, status="queued")
Run(status="done").save()
Run.objects.update_or_create(pk=1, defaults={"status": "failed"})
fields: dict[str, Any] = {"status": Run.Status.RUNNING}
Run.objects.filter(pk=1).update(**fields)
run.status = Run.Status.FAILED
setattr(run, "status", "done")
Run.objects.bulk_update(runs, ["status"])
Run.objects.filter(status=Run.Status.RUNNING).update(heartbeat_at=now)
HttpResponse(status=204)
render(request, "page.html", context, status=422)
payload = {"status": run.status}
"""
    assert status_writes(source) == [2, 3, 4, 5, 7, 8, 9, 10]


def test_only_the_lifecycle_module_writes_a_run_status():
    """Every change of a run's status lives in ``jobs/lifecycle.py``. The engine is left out:
    it cannot import Django (a test enforces it), and its ``status`` are HTTP statuses."""
    offenders = {}
    for path in sorted(CONTEXTLAB.rglob("*.py")):
        relative = path.relative_to(CONTEXTLAB)
        if path == LIFECYCLE or "migrations" in relative.parts or relative.parts[0] == "engine":
            continue
        lines = status_writes(path.read_text())
        if lines:
            offenders[str(relative)] = lines
    assert offenders == {}, f"status written outside jobs/lifecycle.py: {offenders}"
    assert status_writes(LIFECYCLE.read_text())  # the finder does see the writes there


# --- layers ---------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_media")
def test_a_checkpoint_left_by_another_run_with_the_same_id_is_never_resumed(run):
    """SQLite gives a deleted newest row's id to the next row: a checkpoint file named by that
    id may have been written for the deleted run, and resuming it would replay another session."""
    from contextlab import engine

    pending = engine.SummaryPending("k" * 40, None)  # type: ignore[arg-type]
    pending.checkpoint = b"this run's state"
    lifecycle.park(run, pending)
    assert lifecycle.load_checkpoint(run) == b"this run's state"
    stranger = Run(pk=run.pk, created_at=run.created_at + timedelta(seconds=1))
    assert lifecycle.load_checkpoint(stranger) is None
    blobs.write_bytes(lifecycle.checkpoint_name(run.pk), b"a checkpoint of an older release")
    assert lifecycle.load_checkpoint(run) is None


@pytest.mark.usefixtures("clean_media")
def test_finishing_a_run_without_an_llm_summarizer_sends_the_storage_no_checkpoint_delete(
    run, monkeypatch
):
    """Only a replay with an LLM summarizer keeps a checkpoint (``park``): finishing another
    run asks the storage to delete none (on an object store, a request on every run)."""
    from contextlab.summaries.models import Backend, RunSummarizer

    deleted: list[str] = []
    delete = blobs.delete
    monkeypatch.setattr(blobs, "delete", lambda name: (deleted.append(name), delete(name))[1])
    assert lifecycle.claim(run.pk)
    lifecycle.finish(run.pk, {"requests": []})
    assert Run.objects.get(pk=run.pk).status == Run.Status.DONE
    assert deleted == []

    # an LLM summarizer's run: its checkpoint is removed once it is done
    RunSummarizer.objects.create(run=run, backend=Backend.ANTHROPIC, model="m")
    blobs.write_bytes(lifecycle.checkpoint_name(run.pk), b"a checkpoint")
    lifecycle.finish(run.pk, {"requests": []})
    assert deleted == [lifecycle.checkpoint_name(run.pk)]
    assert not blobs.exists(lifecycle.checkpoint_name(run.pk))


@pytest.mark.usefixtures("clean_media")
def test_a_replay_whose_session_grew_before_it_read_it_is_called_again(run):
    """``replay`` raising ``SessionGrew`` (its file was replaced by the grown one before it
    read it) is called again, within ``MAX_REPLAYS_OF_GROWN``; a session that keeps growing
    so fails the run with why, never with ``SessionGrew``'s name."""
    calls = 0

    def grows_once() -> dict[str, list[object]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise lifecycle.SessionGrew(run.pk)
        return {"requests": []}

    assert lifecycle.claim(run.pk)
    assert lifecycle.conclude(run, grows_once) == lifecycle.Done(run.pk, 0)
    assert calls == 2

    def always_grows() -> dict[str, list[object]]:
        nonlocal calls
        calls += 1
        raise lifecycle.SessionGrew(run.pk)

    calls = 0
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)
    assert lifecycle.claim(run.pk)
    outcome = lifecycle.conclude(run, always_grows)
    assert isinstance(outcome, lifecycle.Failed)
    assert calls == lifecycle.MAX_REPLAYS_OF_GROWN
    stored = Run.objects.get(pk=run.pk)
    assert stored.status == Run.Status.FAILED
    assert stored.error.startswith(f"The session grew {lifecycle.MAX_REPLAYS_OF_GROWN} times")
