"""A live session's replay, continued from its last state when the session grows.

A whole replay fits each thread's calibration, anchors and thinking-size factor on all its
requests, so one appended request moves every earlier row. A live update instead keeps the
finished replay's state (``replay_live``: every thread's replay as it ended, pickled by
``checkpoints``) and, once the file grew, takes in the new messages and replays only the new
requests (``continue_live``), with the calibration, anchors and thinking factor FROZEN as
fitted on the requests known then: earlier rows stay as they were, new rows are estimates
under the old fit, hence provisional until a whole replay of the finished session replaces
them. Recorded usage and cost are recorded facts and exact either way.

``continue_live`` raises ``ValueError`` whenever the state does not fit the grown session (of
another engine version, threads added or reordered, an earlier message changed): the caller
then replays the session whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.input.disk_cache import gc_paused
from contextlab.engine.input.kept_cache import (
    KeptCache,
    Prefix,
    checking,
    leads,
    prefix_of,
    session_bytes,
    session_lineage,
)
from contextlab.engine.input.model import Message
from contextlab.engine.input.session import Session, Thread, thread_requests
from contextlab.engine.measures.anchors import ThreadAnchors
from contextlab.engine.measures.cost import PricingTable, load_pricing
from contextlab.engine.measures.tokens import (
    TiktokenCounter,
    TokenCounter,
    note_thinking_write,
    scale_unsized_thinking,
    size_thinking,
    thinking_writes,
)
from contextlab.engine.pipeline import DEFAULT_STEPS
from contextlab.engine.replay import checkpoints, kept_state
from contextlab.engine.summarizing import ExtractiveSummarizer

from .driver import MODES, ProgressCallback, SessionReplay
from .kept_state import runners as _runners
from .recording import read_recording
from .result import ReplayResult
from .state import ReplayInputs
from .thread import ThreadReplay


def _message_mark(message: Message) -> tuple[str, int, int]:
    """What must not change of a thread's last message for its replay to go on: an append
    that completes it (a response written block by block) means a whole replay."""
    output = message.usage.output if message.usage is not None else -1
    return message.uuid, len(message.blocks), output


#: A response's thinking as a replay sized it (``tokens.size_thinking``, then maybe
#: ``scale_unsized_thinking``): its thinking blocks' tokens, whether it was unsized, and the
#: thread that scaled it.
SizedThinking = tuple[tuple[int, ...], bool, str | None]


class LiveState:
    """A replay (finished, or of one thread stopped before its last request: ``rewind``) and
    what its continuation checks the grown session against.

    Its bytes (``_dump``) are the state's pickle followed by the rewind's (a state without a
    rewind of its own): an update that replays only the last request keeps the state it
    went on from as its rewind, as bytes, instead of pickling the replay a second time."""

    __slots__ = (
        "fitted",
        "marks",
        "replay",
        "rewind",
        "same",
        "sized",
        "thinking",
        "thread_ids",
    )

    def __init__(
        self,
        replay: SessionReplay,
        fitted: int,
        thinking: dict[str, float] | None = None,
        carried: dict[str, tuple[dict[int, SizedThinking], list[int]]] | None = None,
    ) -> None:
        session = replay.inputs.session
        self.replay = replay
        #: the session's requests when the calibration was fitted (its last whole replay)
        self.fitted = fitted
        #: a one-thread session: the same replay before its last request (an append that
        #: completes that response goes on from there); not part of the pickle
        self.rewind: bytes | memoryview | None = None
        #: per thread: how many of its first messages the grown session holds as the very
        #: objects the replay saw (``kept_state.rebind``, a state kept in this process); not pickled
        self.same: dict[str, int] = {}
        self.thread_ids = [t.id for t in session.threads]
        #: per replayed thread: the messages its requests saw (through its last response),
        #: and that response's mark; messages after it no request saw, and are read again
        self.marks: dict[str, tuple[int, tuple[str, int, int] | None]] = {}
        for thread_id, runner in _runners(replay).items():
            done = runner.replayed()
            last = runner.requests[done - 1] if done else None
            self.marks[thread_id] = (
                (last.position + 1, _message_mark(last.message)) if last else (0, None)
            )
        #: the thinking-size factor each thread's calibration measured (frozen for new ones;
        #: a continuation's session was read afresh, without the calibration's memo)
        self.thinking = thinking or {
            t.id: float(session.memo.get(("thinking_factor", t.id), 1.0)) for t in session.threads
        }
        #: per thread: how the responses its requests saw had their thinking sized (message
        #: index → sizes), so the next append sets them again instead of counting them again
        self.sized: dict[str, dict[int, SizedThinking]] = {}
        threads = {t.id: t for t in session.threads}
        for thread_id, (seen, _) in self.marks.items():
            messages = threads[thread_id].messages
            if carried is not None and thread_id in carried:
                # a continuation: the sizes it set again stand, and only the responses it
                # sized afresh are read (not every message of the session at every append)
                sized, fresh = carried[thread_id]
                for i in fresh:
                    if i < seen and messages[i].metadata.get("thinking_sized"):
                        sized[i] = _sized_thinking(messages[i])
                self.sized[thread_id] = sized
                continue
            self.sized[thread_id] = {
                i: _sized_thinking(message)
                for i, message in enumerate(messages[:seen])
                if message.metadata.get("thinking_sized")
            }

    def __getstate__(self) -> dict[str, object]:
        return {
            name: getattr(self, name) for name in self.__slots__ if name not in ("rewind", "same")
        }

    def __setstate__(self, state: dict[str, object]) -> None:
        self.rewind = None
        self.same = {}
        for name, value in state.items():
            setattr(self, name, value)


def _sized_thinking(message: Message) -> SizedThinking:
    metadata = message.metadata
    return (
        tuple(b.tok for b in message.blocks if b.type == "thinking"),
        bool(metadata.get("thinking_unsized")),
        metadata.get("thinking_scaled_by"),
    )


def _set_sized_thinking(message: Message, sized: SizedThinking) -> None:
    toks, unsized, scaled_by = sized
    thinking = [b for b in message.blocks if b.type == "thinking"]
    if len(thinking) != len(toks):
        raise ValueError(f"message {message.uuid}: its thinking blocks changed")
    note_thinking_write()
    for block, tok in zip(thinking, toks, strict=True):
        block.tok = tok
    message.metadata["thinking_sized"] = True
    if unsized:
        message.metadata["thinking_unsized"] = True
    if scaled_by is not None:
        message.metadata["thinking_scaled_by"] = scaled_by


def replay_live(
    session: Session,
    config: PipelineConfig,
    *,
    mode: str = "recorded",
    preset_name: str = "",
    progress: ProgressCallback | None = None,
    counter: TokenCounter | None = None,
    pricing: PricingTable | None = None,
) -> tuple[ReplayResult, bytes]:
    """A whole replay (``engine.replay``'s result, extractive summaries) and its state, which
    ``continue_live`` goes on from once the session grew."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    inputs = ReplayInputs(
        session,
        config,
        mode,
        ExtractiveSummarizer(),
        counter or TiktokenCounter(),
        pricing or load_pricing(),
        DEFAULT_STEPS,
    )
    state = SessionReplay(inputs, preset_name, progress)
    state.keep_runners = True
    state.fitted = _requests(session)
    rewind = _keep_rewind(state)
    result = state.run()
    state.on_pause = None
    return result, _dump(state, rewind[-1] if rewind else None, keep=True)


def _requests(session: Session) -> int:
    return sum(len(thread_requests(t)) for t in session.threads)


def _replayed(state: SessionReplay) -> int:
    return sum(runner.replayed() for runner in _runners(state).values())


def _keep_rewind(
    state: SessionReplay,
    loaded: bytes | memoryview | None = None,
    thinking: dict[str, float] | None = None,
) -> list[bytes | memoryview]:
    """Have ``state`` keep itself when it stands before its one thread's last request; the
    list gets the bytes. ``loaded``: the state's bytes as ``continue_live`` read them, which
    serve as they are when no request was replayed since (one request appended: the replay
    pauses where the last one ended), instead of a second pickle of the whole replay."""
    kept: list[bytes | memoryview] = []
    start = _replayed(state)

    def pause() -> None:
        if loaded is not None and _replayed(state) == start:
            kept.append(loaded)
            return
        # closures do not pickle: the hook and a caller's request counter stay out
        runners = _runners(state).values()
        ticks = [runner.progress for runner in runners]
        state.on_pause = None
        for runner in runners:
            runner.progress = state.progress.tick
        try:
            kept.append(_dump(state, None, thinking))
        finally:
            state.on_pause = pause
            for runner, tick in zip(runners, ticks, strict=True):
                runner.progress = tick

    state.on_pause = pause
    return kept


def _dump(
    state: SessionReplay,
    rewind: bytes | memoryview | None,
    thinking: dict[str, float] | None = None,
    carried: dict[str, tuple[dict[int, SizedThinking], list[int]]] | None = None,
    *,
    keep: bool = False,
) -> bytes:
    """The state's bytes, ``rewind``'s after them (``LiveState``; ``carried``: its thinking
    sizes as a continuation set them, ``_size_thinking``). ``keep``: the replay is done with
    (a finished update's state, not a rewind's that goes on): the process keeps the object
    with its bytes for the next append (``kept_state.KEPT_STATES``)."""
    _appended_lists(state)
    live = LiveState(state, state.fitted, thinking, carried)
    data = checkpoints.dump(
        live,
        state.inputs.session,
        state.inputs.summarizer,
        state.progress.callback,
        live=True,
        after=rewind,
    )
    if keep:
        kept_state.keep_state(live, data, rewind)
    return data


def _appended_lists(state: SessionReplay) -> None:
    """Make the state's lists that only grow by final items ``checkpoints.AppendedList``s, so
    each dump pickles only what was added since the last (each thread's result rows, which
    its ``ThreadResult`` shares, and the synthetic messages' log). A state read back has them
    already, with the chunks it was read from."""
    log = state.log
    if type(log.synthetic) is list:
        log.synthetic = checkpoints.AppendedList(log.synthetic)
    for thread_id, runner in _runners(state).items():
        at = runner.position
        if at is None or type(at.results) is not list:
            continue
        rows = checkpoints.AppendedList(at.results)
        finished = state.by_thread.get(thread_id)
        if finished is not None and finished.requests is at.results:
            finished.requests = rows
        at.results = rows


def continue_live(
    data: bytes,
    session: Session,
    *,
    progress: ProgressCallback | None = None,
    replayed: Callable[[int], None] | None = None,
    refit_share: float | None = None,
) -> tuple[ReplayResult, bytes]:
    """The replay ``data`` (a ``replay_live`` or ``continue_live`` state) kept, gone on over
    what ``session`` (the same file, grown) gained: earlier rows as they were, the new
    requests replayed from the saved state under the frozen calibration. Returns the result
    and the state for the next append. ``replayed(k)`` hears each request replayed (tests
    count them). ``ValueError`` when the state does not fit ``session``, or (``refit_share``)
    when the session has grown by more than that share of the requests the calibration was
    fitted on (the frozen fit would drift): replay it whole. The garbage collector is paused
    meanwhile (``disk_cache.gc_paused``: the state unpickled is a large graph)."""
    with gc_paused(), checking(session):
        return _continue(data, session, progress, replayed, refit_share)


def _continue(
    data: bytes,
    session: Session,
    progress: ProgressCallback | None,
    replayed: Callable[[int], None] | None,
    refit_share: float | None,
) -> tuple[ReplayResult, bytes]:
    live, loaded = kept_state.take_kept(data, session, LiveState) or _load(data, session, progress)
    if refit_share is not None and _requests(session) > live.fitted * (1 + refit_share):
        raise ValueError(
            f"the calibration was fitted on {live.fitted} requests, and the session grew past "
            f"{refit_share:.0%} more"
        )
    try:
        _check_grown(live, session)
    except ValueError as exc:
        # the append completed the last response: go on from before it, when kept
        if live.rewind is None or "last response changed" not in str(exc):
            raise
        live, loaded = _load(live.rewind, session, progress)
        _check_grown(live, session)
    state = live.replay
    runners = _runners(state)
    carried: dict[str, tuple[dict[int, SizedThinking], list[int]]] = {}
    added = {thread_id: _grow(runner, live, carried) for thread_id, runner in runners.items()}
    state.progress.total = sum(added.values())
    state.progress.done = 0
    state.progress.callback = progress
    for runner in runners.values():
        runner.progress = _counting(replayed, runner) if replayed else state.progress.tick
    rewind = _keep_rewind(state, loaded, live.thinking)
    if state.runner is not None:  # stopped before its thread's last request
        result = state.run()
    else:
        for thread in state.order:
            if added[thread.id]:
                state.finish_thread(runners[thread.id], state.by_thread[thread.id].calibration)
        result = state.result()
    state.on_pause = None
    for runner in runners.values():
        runner.progress = None
    return result, _dump(
        state, rewind[-1] if rewind else live.rewind, live.thinking, carried, keep=True
    )


def _load(
    data: bytes | memoryview, session: Session, progress: ProgressCallback | None
) -> tuple[LiveState, memoryview]:
    """The state ``data`` holds (its ``rewind`` the bytes after it), and its own bytes (views
    of ``data``: megabytes not copied at each append)."""
    data = bytes(data) if isinstance(data, memoryview) else data
    live, end = checkpoints.load_prefix(data, session, ExtractiveSummarizer(), progress, live=True)
    if not isinstance(live, LiveState):
        raise ValueError("not a live replay's state")
    view = memoryview(data)
    live.rewind = view[end:] if end < len(data) else None
    return live, view[:end]


def _counting(replayed: Callable[[int], None], runner: ThreadReplay) -> Callable[[int], None]:
    def tick(n: int) -> None:
        replayed(runner.replayed())

    return tick


def _check_grown(live: LiveState, session: Session) -> None:
    """``ValueError`` unless ``session`` is the state's session with messages appended."""
    if [t.id for t in session.threads] != live.thread_ids:
        raise ValueError("the session's threads changed")
    for thread in session.threads:
        seen, mark = live.marks.get(thread.id, (0, None))
        if len(thread.messages) < seen:
            raise ValueError(f"thread {thread.id} lost messages")
        if mark is not None and _message_mark(thread.messages[seen - 1]) != mark:
            raise ValueError(f"thread {thread.id}: its last response changed")


def _grow(
    runner: ThreadReplay,
    live: LiveState,
    carried: dict[str, tuple[dict[int, SizedThinking], list[int]]],
) -> int:
    """Take the messages ``runner``'s thread gained into its replay; the requests added.
    ``carried`` gets the thread's thinking sizes set again and the responses sized afresh."""
    thread = runner.thread
    seen = live.marks[thread.id][0]
    old = runner.requests
    requests = kept_state.grown_requests(thread, old, live.same.get(thread.id, 0))
    if requests is None:
        requests = thread_requests(thread)
        if len(requests) < len(old) or any(
            a.position != b.position for a, b in zip(old, requests, strict=False)
        ):
            raise ValueError(f"thread {thread.id}: its requests changed")
    sized = live.sized.get(thread.id, {})
    fresh = _size_thinking(thread, runner, live.thinking.get(thread.id, 1.0), sized)
    carried[thread.id] = (sized, fresh)
    recording = read_recording(runner.inputs.session, thread, requests, runner.inputs.mode)
    kept = runner.recording
    if {i for i in recording.hidden if i < seen} != {i for i in kept.hidden if i < seen}:
        raise ValueError(f"thread {thread.id}: what its recording hides changed")
    # in place: the view, the decision count and the steps hold these very objects
    for mine, theirs in (
        (kept.hidden, recording.hidden),
        (kept.restored, recording.restored),
        (kept.summaries, recording.summaries),
        (kept.pre_tokens, recording.pre_tokens),
        (kept.preserved, recording.preserved),
        (kept.kept_after, recording.kept_after),
    ):
        mine.clear()
        mine.update(theirs)  # type: ignore[arg-type]
    old[:] = requests  # the decision count holds the same list
    if kept.restored:  # (a view made when its recording restored nothing skips the look-ups)
        runner.view.restores = True
    runner.view.grow(seen)
    if runner.anchors is not None:
        _extend_anchors(runner.anchors, len(requests))
    return len(requests) - runner.replayed()


def _size_thinking(
    thread: Thread, runner: ThreadReplay, factor: float, sized: dict[int, SizedThinking]
) -> list[int]:
    """Size every response's thinking as the whole replay did (``View`` sizes it from the
    recorded output; pass 1's factor scales what has no final count): the grown session was
    read afresh, and a step may read an earlier block's size again. The responses the last
    replay sized (``sized``) get its sizes back, uncounted; the others are sized here (their
    indices returned). The responses this process sized last for the thread and that still
    hold what it set (``_SIZED``) are not walked again."""
    counter = runner.inputs.counter
    messages = thread.messages
    key = _sized_key(thread.id, messages)
    start, indices, before = _sized_before(key, messages, factor, sized)
    fresh: list[Message] = []
    for i in range(start, len(messages)):
        message = messages[i]
        if message.role != "assistant":
            continue
        kept = sized.get(i)
        if kept is not None:
            _set_sized_thinking(message, kept)
        else:
            size_thinking(message, counter)
            fresh.append(message)
            indices.append(i)
    if factor > 1.0:
        scale_unsized_thinking(fresh, factor, counter, thread.id)
    _keep_sized(key, messages, factor, sized, indices, before, runner.inputs.session)
    return indices


@dataclass
class _Sized:
    """A thread's messages (but the last: a grown session's next read may hold a longer copy
    of it) as ``_size_thinking`` left them: each one's number of blocks, the thinking factor,
    the stored sizes it set back (``sized``, by message index), the other responses' indices
    (sized, or scaled, by the factor), and ``thinking_writes()`` when it was done. The
    messages are a ``kept_cache.Prefix`` (each one's blocks too)."""

    prefix: Prefix
    factor: float
    sized: dict[int, SizedThinking]
    fresh: list[int]
    writes: int


#: by (thread id, its first message's id): the threads whose thinking this process sized last
#: in a live continuation. A warm worker's next version holds the same message objects first,
#: sized as it left them unless some sizing ran since (a what-if replay of the same cached
#: session can size them again: ``thinking_writes`` counts every write); a walk of every
#: response of a 64 MB session is about 3 ms an append.
_SIZED: KeptCache[tuple[str, int], _Sized] = KeptCache(4)  # bounded by session size


def _sized_key(thread_id: str, messages: list[Message]) -> tuple[str, int]:
    return thread_id, id(messages[0]) if messages else 0


def _sized_before(
    key: tuple[str, int], messages: list[Message], factor: float, sized: dict[int, SizedThinking]
) -> tuple[int, list[int], _Sized | None]:
    """How many of ``messages`` hold the thinking sizes this replay would set (``_SIZED``:
    the very objects with as many blocks, no sizing since, the same factor, and the state's
    sizes of those messages the ones set then, or read then from a response sized afresh),
    and those messages' responses not in the state's sizes (and what was kept, when used)."""
    kept = _SIZED.get(key)
    if kept is None or kept.writes != thinking_writes() or kept.factor != factor:
        return 0, [], None
    n = len(kept.prefix)
    if n > len(messages) or not leads(kept.prefix, messages):
        return 0, [], None
    below = _sized_below(sized, n)
    # the state's sizes of the responses sized afresh then, read from them as they were left
    added = below.keys() - kept.sized.keys()
    if added - set(kept.fresh) or {**kept.sized, **{i: below[i] for i in added}} != below:
        return 0, [], None
    if any(below[i] != _sized_thinking(messages[i]) for i in added):
        return 0, [], None
    fresh = [i for i in kept.fresh if i not in added] if added else list(kept.fresh)
    return n, fresh, kept


def _sized_below(sized: dict[int, SizedThinking], n: int) -> dict[int, SizedThinking]:
    """``sized``'s entries of the first ``n`` messages, a copy (a ``LiveState`` adds to it)."""
    if not sized or max(sized) < n:
        return dict(sized)
    return {i: value for i, value in sized.items() if i < n}


def _keep_sized(
    key: tuple[str, int],
    messages: list[Message],
    factor: float,
    sized: dict[int, SizedThinking],
    indices: list[int],
    before: _Sized | None,
    session: Session,
) -> None:
    """Keep how ``_size_thinking`` left ``messages`` (on from ``before``, what it went on
    from: its messages checked, their numbers of blocks and responses not read again)."""
    n = len(messages) - 1
    if n <= 0:
        return
    size, lineage = session_bytes(session), session_lineage(session)
    on = before.prefix if before is not None else None
    fresh = [i for i in indices if i < n] if indices and indices[-1] >= n else list(indices)
    kept = _Sized(
        prefix_of(messages, on=on),
        factor,
        _sized_below(sized, n),
        fresh,
        thinking_writes(),
    )
    _SIZED.keep(key, kept, size=size, lineage=lineage)


def _extend_anchors(anchors: ThreadAnchors, requests: int) -> None:
    """New requests carry the last request's anchored spans (its segment, its segment's prefix
    change, its unrecorded input: each is carried from request to request until the next
    anchor) and get no anchor of their own (frozen). Earlier history needs no entry: the
    largest so far holds until the replay's first compaction."""
    grow = requests - len(anchors.segment)
    if grow <= 0:
        return
    for values in (anchors.segment, anchors.segment_raw, anchors.unrecorded):
        values.extend([values[-1] if values else 0] * grow)
    anchors.history_raw.extend([0] * grow)
