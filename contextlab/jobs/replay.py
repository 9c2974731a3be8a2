"""Worker side: replay one run (load the session, replay it) and hand its outcome over.

Claiming the run, the heartbeat, progress and how the replay ended (done, waiting for a
summary, failed) are ``jobs.lifecycle``'s; ``jobs.tasks`` queues what follows.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from contextlab import blobs, engine
from contextlab.jobs import lifecycle
from contextlab.runs.models import Run
from contextlab.summaries import services as summaries
from contextlab.transcripts.models import (
    IN_PARTS,
    AppendedMessages,
    Transcript,
    TranscriptMessages,
    TranscriptMessagesPart,
)

logger = logging.getLogger(__name__)

#: the result JSON's key of the waste findings and idle answer the worker stores (``waste_report``)
WASTE_KEY = "waste_report"


@dataclass(frozen=True)
class SummaryFetch:
    """What a fetch task resumes a run for: summary ``key``, and the call that fetches and
    stores it (the backend is called for that summary only)."""

    key: str
    fetch: summaries.Fetch


def load_session(
    transcript: Transcript,
    *,
    store_messages: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> engine.Session:
    """The parsed, tokenized session (shared through the session cache) with its messages
    stored once for the explorer (``store_messages=False``: a resumed run, which stored them
    when it started). A session that continues earlier ones (``Transcript.continues``) is
    read stitched to them, earliest first, as one conversation. ``progress`` hears the token
    counting of a session not in the cache yet (and may stop it). The caller closes
    ``session.upload``."""
    # of which file the stored messages are (one query: none stored, the usual case of a
    # session's first replay, goes straight to storing them whole); none stored also says
    # no replay has read the file yet, so the upload check's parse is looked for first (on a
    # worker host: one object-store request fewer than asking for a prepared copy first)
    stored = (
        TranscriptMessages.objects.filter(transcript=transcript)
        .values_list("sha256", flat=True)
        .first()
        if store_messages
        else ""
    )
    session = engine.load_session_cached(
        transcript.path,
        cache_dir=settings.SESSION_CACHE_DIR,
        name=transcript.name,
        sha256=transcript.sha256,
        earlier=[
            engine.EarlierUpload(earlier.path, name=earlier.name, sha256=earlier.sha256)
            for earlier in transcript.earlier_sessions()
        ],
        mirror=blobs.session_cache_mirror(),
        progress=progress,
        # a live session that grew: the version before the append has its tokens counted
        seed_sha256=transcript.previous_sha256 or None,
        parsed_first=stored is None,
    )
    if store_messages and (stored is None or stored not in ("", transcript.sha256)):
        store_messages_of(transcript, session, none_stored=stored is None)
    return session


#: Appends whose rows a live session's stored messages take after them (``AppendedMessages``)
#: before they are stored whole again: a page reading them cold reads every part.
APPENDED_PARTS_MAX = 100


def store_messages_of(
    transcript: Transcript, session: engine.Session, *, none_stored: bool = False
) -> None:
    """Store the session's messages for the explorer (``engine.messages_json``) in parts of
    a few megabytes (``TranscriptMessages``: one value of every message would not fit
    PostgreSQL's ``jsonb`` past sessions of about 550 MB); a row stored meanwhile (by another
    run of the session) is kept. A live session's append (the stored messages are of the file
    before it) stores only the rows it changed or added, after them (``_store_appended``).
    The worker holds one part's JSON at a time, never every text of the session a second time
    (its blocks hold them compact): on PostgreSQL streamed to the server
    (``lifecycle.copy_json_parts``), elsewhere (SQLite) stored part by part. ``none_stored``:
    the caller found none stored (of any file), so there is no append to store alone."""
    if not none_stored and _store_appended(transcript, session):
        return
    head = {**engine.messages_json_head(session), IN_PARTS: True}
    parts = engine.messages_json_parts(session)
    kept = {"sha256": transcript.sha256, "marks": engine.message_marks(session)}
    if connection.vendor != "postgresql":
        with transaction.atomic():
            stored, _ = TranscriptMessages.objects.update_or_create(
                transcript=transcript, defaults={"data": head, **kept}
            )
            stored.parts.all().delete()
            for seq, text in enumerate(parts):
                TranscriptMessagesPart.objects.create(
                    messages=stored, seq=seq, data=lifecycle.json_value(text)
                )
        return
    with contextlib.suppress(IntegrityError), transaction.atomic():
        # stored meanwhile by another run: the same rows
        lifecycle.copy_json_row(TranscriptMessages, transcript.pk, partial(_dump, head))
        lifecycle.copy_json_parts(TranscriptMessagesPart, transcript.pk, parts)
        # set after the COPY (which writes the data only): the data is not written again
        TranscriptMessages.objects.filter(pk=transcript.pk).update(**kept)


def _store_appended(transcript: Transcript, session: engine.Session) -> bool:
    """Store the rows of ``session`` that its stored messages, of the file before a live
    session's append, lack (``engine.appended_messages_json``), after them: what is written
    grows with the append, not with the session. False when that is not how they can be
    stored (none stored, of another file, too many parts, the session changed otherwise than
    by appended lines): the stale ones are deleted and the caller stores them whole."""
    with transaction.atomic():
        stored = (
            TranscriptMessages.objects.select_for_update()
            .filter(transcript=transcript)
            .only("sha256", "marks")
            .first()
        )
        if stored is None:
            return False
        if stored.sha256 in ("", transcript.sha256):
            return True  # stored meanwhile by another run of the session
        appended = None
        grown = bool(transcript.previous_sha256) and stored.sha256 == transcript.previous_sha256
        if grown and stored.marks:
            appended = engine.appended_messages_json(session, stored.marks)
            # not grown by appended lines alone (a thread moved, a message replaced): the
            # search index keeps none of its rows either
            grown = appended is not None
            if stored.appended.count() >= APPENDED_PARTS_MAX:
                appended = None
        if appended is None:
            # an append's (``grown``): the search index keeps the rows it left in place
            stored.grown_by_append = grown
            stored.delete()
            return False
        AppendedMessages.objects.create(
            messages=stored,
            sha256=transcript.sha256,
            previous_sha256=stored.sha256,
            data=appended,
        )
        TranscriptMessages.objects.filter(pk=stored.pk).update(
            sha256=transcript.sha256, marks=engine.message_marks(session)
        )
    logger.info(
        "session %s: the messages of %s thread(s) stored after the append",
        transcript.pk,
        len(appended),
    )
    return True


def _dump(data: dict[str, Any], sink: engine.TextSink) -> None:
    sink.write(json.dumps(data))


def replay_run(
    run: Run,
    session: engine.Session,
    summary: SummaryFetch | None = None,
    later: LaterFindings | None = None,
    clock: lifecycle.ProgressClock | None = None,
) -> dict[str, Any]:
    """The engine's result JSON for ``run`` on an already-loaded session.

    A run with an LLM summarizer checkpoints where it waits for a summary and resumes from
    there; a checkpoint another engine version wrote is ignored (the replay starts over).
    With ``summary`` (a fetch task), the backend is called for that one missing summary.
    With ``later``, a live session's update carries its last version's findings and leaves
    its own for after the result is stored (``LaterFindings``). ``clock``: when the run's
    progress was last written (by the token count before: ``lifecycle.ProgressClock``).
    """
    summarizer = summaries.summarizer_for(run, fetch=summary.fetch if summary is not None else None)
    progress = lifecycle.progress_writer(run.pk, clock=clock)
    if summarizer is None and follows_live(run):
        data = _replay_live(run, session, progress)
        if later is None:
            return with_findings(data, session)
        later.hold(run, data, session)
        return {**data, **lifecycle.load_live_findings(run)}
    saved = lifecycle.load_checkpoint(run) if summarizer is not None else None
    result = None
    if saved is not None and summarizer is not None:
        try:
            result = engine.resume(saved, session, summarizer=summarizer, progress=progress)
        except ValueError:
            logger.warning("run %s: checkpoint unusable; replaying from the start", run.pk)
    if result is None:
        result = engine.replay(
            session,
            engine.PipelineConfig.from_dict(run.config),
            mode=run.mode,
            preset_name=run.resolved_preset or run.preset,
            progress=progress,
            summarizer=summarizer,
            checkpoint=summarizer is not None,
        )
    return with_findings(result.to_json(), session)


class LaterFindings:
    """A live session's update stores its result first and its findings (tools breakdown,
    waste report) after it: working them out reads every message's text (about 1.9 s of a
    3.2 s update at 64 MB), and the explorer shows the appended turn as soon as the result is
    stored. Until then the result carries the last version's findings (the report's tools
    table and waste list lag that one update behind). Holds the last replay's result JSON
    and its session, which it closes."""

    def __init__(self) -> None:
        self._held: tuple[Run, dict[str, Any], engine.Session] | None = None

    def hold(self, run: Run, data: dict[str, Any], session: engine.Session) -> None:
        self._held = (run, data, session)

    def __bool__(self) -> bool:
        return self._held is not None

    def store(self) -> None:
        """Work the held result's findings out and store them, if that result is still the
        run's (``lifecycle.store_findings``), and keep them for the next version to carry."""
        if self._held is None:
            return
        run, data, session = self._held
        finished = Run.objects.filter(pk=run.pk).values_list("finished_at", flat=True).first()
        if finished is None:
            return
        with_live_findings(run, data, session)
        found = {key: data[key] for key in (engine.TOOL_BREAKDOWN_KEY, WASTE_KEY)}
        if lifecycle.store_findings(run.pk, finished, found):
            lifecycle.save_live_findings(run, found)
        else:
            logger.info("run %s: a newer result was stored; its findings are that one's", run.pk)

    def close(self) -> None:
        if self._held is not None:
            self._held[2].close()
            self._held = None


def waste_scan_name(run_id: int) -> str:
    """The stored name of a live session's run's last ``engine.WasteScan`` state: the next
    version's findings go on from it over the appended messages (``_live_scan``). In the
    storage every worker host reads: the next append's update may run on another host."""
    return f"checkpoints/run-{run_id}.waste-scan"


def _scan_owner(run: Run, sha256: str) -> bytes:
    # the run's identity (a deleted run's id may be handed out again) and the file scanned
    owner = f"contextlab-waste-scan run={run.pk} created={run.created_at.isoformat()}"
    return f"{owner} sha256={sha256}\n".encode()


#: The waste scan state of a live run's last version as objects (``engine.HeldScan``), by
#: run, with its owner line (``_scan_owner``): the next version's scan in this worker goes on
#: from it without reading the stored state back (about 0.02–0.03 s at 64 MB); at most
#: ``KEPT_FINDINGS_RUNS`` runs, of sessions of ``KEPT_FINDINGS_MAX_BYTES`` at most
_HELD_SCANS: OrderedDict[int, tuple[bytes, engine.HeldScan]] = OrderedDict()


def _live_scan(run: Run, session: engine.Session) -> engine.WasteScan:
    """The main thread's waste scan of a live session's version: gone on from the state
    the version before the append kept (the file of ``previous_sha256``): as this worker
    holds it, else as stored; else made whole. Its state for the next append is stored (and
    held). The findings are the same either way; what is read grows with the append, not
    the session."""
    transcript = run.transcript
    kept = held = None
    found = _HELD_SCANS.pop(run.pk, None)  # used up (changed) by this version's
    if transcript.previous_sha256:
        owner = _scan_owner(run, transcript.previous_sha256)
        if found is not None and found[0] == owner:
            held = found[1]
        else:
            blob = blobs.read_bytes(waste_scan_name(run.pk))
            if blob is not None and blob.startswith(owner):
                kept = blob[len(owner) :]
    scanned = engine.scan_main_thread_on(session, kept, held)
    owner = _scan_owner(run, transcript.sha256)
    if not blobs.write_bytes(waste_scan_name(run.pk), owner + scanned.state):
        logger.info("run %s: its waste scan could not be stored for another host", run.pk)
    if transcript.size <= KEPT_FINDINGS_MAX_BYTES:
        _HELD_SCANS[run.pk] = (owner, scanned.held)
    while len(_HELD_SCANS) > KEPT_FINDINGS_RUNS:
        _HELD_SCANS.popitem(last=False)
    return scanned.scan


#: What the findings of a live run's last version kept to go on from (``engine.KeptFindings``:
#: the messages' rows and the tools breakdown's tallies), by run, with the run's identity and
#: the file version they are of (``_scan_owner``). In this worker's memory only: a worker
#: that did not take the last version works them out whole, as before.
_KEPT_FINDINGS: OrderedDict[int, tuple[bytes, engine.KeptFindings]] = OrderedDict()
#: live runs whose findings a worker keeps at most (a 64 MB session's: its 4,182 messages'
#: rows without texts and the breakdown's per-message tallies)
KEPT_FINDINGS_RUNS = 4
#: sessions of more bytes keep none in memory (their rows would hold the worker's memory
#: between appends; a 2 GB session's worker must stay within 1.5 GB): their findings go on
#: from the stored waste scan and are otherwise worked out whole, as before
KEPT_FINDINGS_MAX_BYTES = 256 * 1024 * 1024


def with_live_findings(run: Run, data: dict[str, Any], session: engine.Session) -> dict[str, Any]:
    """``with_findings`` of a live session's version, each part gone on from the last
    version's: the waste scan (kept in the storage, ``_live_scan``), the messages' rows and
    the tools breakdown (kept in this worker's memory, ``engine.live_findings``). The same
    findings as ``with_findings(data, session)``; what is worked out grows with the append,
    but for the waste rules that read no text (about 0.015 s at 64 MB)."""
    scan = _live_scan(run, session)
    transcript = run.transcript
    held = _KEPT_FINDINGS.pop(run.pk, None)  # used up (changed) by this version's
    kept = None
    if held is not None and transcript.previous_sha256:
        owner, found = held
        kept = found if owner == _scan_owner(run, transcript.previous_sha256) else None
    live = engine.live_findings(data, session, kept)
    data[engine.TOOL_BREAKDOWN_KEY] = live.tool_breakdown
    data[WASTE_KEY] = waste_report(data, live.messages, scan)
    if live.kept is not None and transcript.size <= KEPT_FINDINGS_MAX_BYTES:
        _KEPT_FINDINGS[run.pk] = (_scan_owner(run, transcript.sha256), live.kept)
        while len(_KEPT_FINDINGS) > KEPT_FINDINGS_RUNS:
            _KEPT_FINDINGS.popitem(last=False)
    return data


def with_findings(
    data: dict[str, Any], session: engine.Session, scan: engine.WasteScan | None = None
) -> dict[str, Any]:
    """``data`` (a result's JSON) with its tools breakdown and ``waste_report`` stored in it.

    The report's tools table, waste findings and idle answer read them (the explorer's tool
    filter too); worked out once per result, here, rather than on a view of the report: a live
    session's provisional result too, once per version (each append's), never on its pages'
    views or polls. The waste findings compare texts (a file read again unchanged, a result no
    later request used): these rows read each back from the session when asked, never all of
    them at once. ``scan``: the main thread's waste scan (``engine.scan_main_thread``), when
    the caller holds it: then no rule reads a text, and the rows hold none (nor a persisted
    output's whole text, which only a what-if's tools breakdown counts)."""
    whatif = (data.get("session") or {}).get("mode") == "whatif"
    messages = engine.expand_messages(
        engine.messages_json(
            session,
            include_originals=scan is None or whatif,
            include_texts=False,
            texts_on_read=scan is None,
        )
    )
    data[engine.TOOL_BREAKDOWN_KEY] = engine.tool_breakdown(data, messages)
    data[WASTE_KEY] = waste_report(data, messages, scan)
    return data


def waste_report(
    data: dict[str, Any],
    messages: dict[str, list[dict[str, Any]]],
    scan: engine.WasteScan | None = None,
) -> dict[str, Any]:
    """The report's waste findings and compact-now-or-wait answer of a result and its session's
    messages (``engine.expand_messages``): ``{"engine_version", "waste", "idle"}``. Stored with
    the result under ``WASTE_KEY``; ``runs.waste`` works out again one of another engine
    version (or a result stored before it was)."""
    result = engine.as_result(data)
    return {
        "engine_version": engine.ENGINE_VERSION,
        "waste": engine.waste_findings(result, messages, scan=scan),
        "idle": engine.idle_compaction(result),
    }


def follows_live(run: Run) -> bool:
    """A recorded run of a session that grows by appends (``contextlab watch``): its replay
    keeps its state, so the next append's goes on from it. (A what-if run, or one with an LLM
    summarizer, is replayed whole after each append.)"""
    return run.mode == Run.Mode.RECORDED and run.transcript.appended_at is not None


def _replay_live(
    run: Run, session: engine.Session, progress: Callable[[int, int], None]
) -> dict[str, Any]:
    """Go on from the run's last replay state over what the session gained (``Run
    .live_continue``; its result is then provisional), else replay it whole; the state is
    kept for the next append either way. A state that does not fit (missing, of another
    engine version, the session changed otherwise than by appended lines) means a whole
    replay."""
    saved = lifecycle.load_live_state(run) if run.live_continue else None
    result = None
    run.provisional = False
    if saved is not None:
        try:
            result, state = engine.continue_live(
                saved,
                session,
                progress=progress,
                refit_share=settings.LIVE_REFIT_PERCENT / 100,
            )
            run.provisional = True
        except ValueError as exc:
            logger.info("run %s: replayed whole, its last state does not fit (%s)", run.pk, exc)
    elif run.live_continue:
        logger.info("run %s: replayed whole, no state of its last replay", run.pk)
    if result is None:
        result, state = engine.replay_live(
            session,
            engine.PipelineConfig.from_dict(run.config),
            mode=run.mode,
            preset_name=run.resolved_preset or run.preset,
            progress=progress,
        )
    lifecycle.save_live_state(run, state)
    return result.to_json()


def _replay(
    run: Run, summary: SummaryFetch | None, loaded: list[str], later: LaterFindings
) -> dict[str, Any]:
    later.close()  # a replay of the session before it grew: its findings are not wanted
    again = bool(loaded)
    if again:  # the session grew while the last replay ran
        run.transcript.refresh_from_db()
        # the state this replay just kept is of the file before the growth: go on from it
        run.live_continue = True
        # the messages the last replay stored may be the old file's (an append that came
        # after they were stored deleted none): this replay stores the grown file's
        TranscriptMessages.objects.filter(transcript_id=run.transcript_id).delete()
    loaded[:] = [run.transcript.sha256]
    clock = lifecycle.ProgressClock()  # counting and replaying: one progress write a period
    counting = None
    if summary is None:  # a resumed run counted its session when it started
        counting = lifecycle.progress_writer(run.pk, stage=Run.Stage.COUNTING, clock=clock)
    try:
        session = load_session(
            run.transcript, store_messages=summary is None or again, progress=counting
        )
    except FileNotFoundError:
        if not _file_replaced(run, loaded):
            raise
        # A live session's append replaced the file after this run's row was read: the
        # append deletes the file it grew from once it commits, and leaves a running run to
        # replay the grown one (``lifecycle.replay_again``). Nothing was read: the next
        # attempt starts as this one did, on the session as it is now.
        logger.info(
            "run %s: its file was replaced by the grown session's before it was read", run.pk
        )
        run.transcript.refresh_from_db()
        loaded.clear()
        raise lifecycle.SessionGrew(run.pk) from None
    try:
        return replay_run(run, session, summary, later=later, clock=clock)
    finally:
        if not later:
            session.close()


def execute_run(run_id: int, summary: SummaryFetch | None = None) -> lifecycle.Outcome | None:
    """Replay run ``run_id`` and store how it ended; None if there was nothing to do (the
    run is finished, running elsewhere, or waits for another summary). Safe to call twice.

    With ``summary`` (a fetch task's), the backend is called for that missing summary when
    the replay reaches it; a message for a summary the run no longer waits for does nothing.
    Transient database errors propagate (after the run is put back in the queue).
    """
    if summary is not None and summaries.waits_for_another_summary(run_id, summary.key):
        logger.info("run %s: waits for another summary than %s; skipping", run_id, summary.key[:40])
        return None
    if not lifecycle.claim(run_id, resuming=summary is not None):
        logger.info("run %s: not claimable (finished or running elsewhere); skipping", run_id)
        return None
    run = Run.objects.select_related("transcript").get(pk=run_id)
    # the operator's trail of which worker took which run (a run killed with its host shows
    # here without its "done" line)
    logger.info("run %s: replaying (attempt %s)", run_id, run.attempts)
    loaded: list[str] = []
    later = LaterFindings()
    try:
        outcome = lifecycle.conclude(
            run,
            partial(_replay, run, summary, loaded, later),
            partial(_still_current, run, loaded),
            provisional=lambda: run.provisional,
        )
        if isinstance(outcome, lifecycle.Done):
            try:
                later.store()
            except Exception:
                # the result stands with its last version's findings; the next append's
                # update stores its own (a transient error is not worth the run's retry)
                logger.exception("run %s: its findings could not be stored", run_id)
        return outcome
    finally:
        later.close()


def _file_replaced(run: Run, loaded: list[str]) -> bool:
    """Whether the session's file is no longer the one this replay was to read
    (``loaded``: its sha256): it grew meanwhile."""
    return Transcript.objects.filter(pk=run.transcript_id).exclude(sha256__in=loaded).exists()


def _still_current(run: Run, loaded: list[str]) -> bool:
    """Whether the session still is the file the replay read (``loaded``: its sha256). Locks
    the session's row until the result is stored, so an append (``transcripts.live``, which
    locks it too) either comes first and is seen here, or comes after the run is done and
    replays it again. (A grown session's stored messages were maybe read from the old file:
    the replay again replaces them, ``_replay``; deleted here, in the transaction the
    growth rolls back, they would stay.)"""
    return (
        Transcript.objects.select_for_update()
        .filter(pk=run.transcript_id, sha256__in=loaded)
        .exists()
    )
