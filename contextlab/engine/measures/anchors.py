"""Anchors on the recorded usage: what a transcript cannot show of the prompt that was sent.

A thread's display count is ``prefix + ratio * raw`` (``tokens.Calibration``), fitted on the
recorded prompt sizes. Three things break that line, each at a point the records name:

* **earlier history** — the file continues a conversation written elsewhere (its first record's
  ``parentUuid`` is not in the file): the first prompt holds history the file does not have.
  Sized from the first recorded prompt minus the system/tools level; it lives until the first
  compaction, which summarizes it away. It is part of the view (``raw_tokens``).
* **restart segments** — ``/exit`` and a resume, a resume with no ``/exit`` written (its
  ``SessionStart:resume`` hook record), a change of Claude Code ``version``, or an
  MCP server reconnected by ``/mcp``: the system prompt and tools are rebuilt, so the unseen prefix is measured again on the first
  recorded request of the segment. Also part of the view. (A ``cwd`` change is not a restart:
  the records follow the shell's ``cd`` within one process; on the corpus it split a thread
  that the recorded cache reads show was one process.)
* **unrecorded input** — at a file start, restart, turn start or after a compaction the
  recorded prompt grows by more than the visible content explains (hook output, attachments or
  post-compaction restoration the version did not write down). Carried as its own span in
  recorded-token units (``unrecorded_tokens``); a compaction summarizes it away.

A jump is a candidate beyond the fit's per-request scatter (``anchor_margin_share`` of the
prompt, ``anchor_margin_tokens``), and an anchor only if the recording bears it out
(``anchor_selection``): the 2-parameter line through the thread's recorded prompts must fit
better with it, by more than an extra parameter is worth (Bayesian information criterion). A
margin alone had to be fitted per source (entireio/cli needed 2k, marot/spotter 8k, where a
4.4k level drift after a compaction was no input); the selection decides from each thread's
own usage, so anchors stay few: one per phenomenon, not one per request.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.input.model import Block
from contextlab.engine.input.session import RequestInfo, Thread

from .anchor_screen import (
    SCREEN_TOLERANCE,
    ZERO,
    StretchExtremes,
    Sums,
    TrialScreen,
    add_shifted_points,
)
from .tokens import (
    DEFAULT_CALIBRATION,
    Calibration,
    TokenCounter,
    block_tokens,
    fit_calibration,
    percentile,
    thinking_text_tokens,
)

EXIT_COMMANDS = ("<command-name>/exit</command-name>", "<command-name>/quit</command-name>")
#: ``/mcp`` output saying a server (re)connected: Claude Code rebuilt its tool list
#: and the servers' instructions in the system prompt, so the cache is written again after the
#: static prefix (marot/spotter tool_heavy: the read fell from 25.8k to the 18k static prefix
#: on the request after "Reconnected to tidewave.", 2 minutes after a full hit). ``/ide``'s
#: "Connected to …" is not one: entireio/cli fc_99 read its whole prompt from the cache after it.
MCP_COMMANDS = ("<command-name>/mcp</command-name>",)
MCP_RECONNECTED = ("<local-command-stdout>Reconnected to ",)


#: The walk's variables before a request: history, segment delta, unrecorded input, compacted.
Carry = tuple[float, float, float, bool]


class AnchorJson(TypedDict):
    """One anchor on the recorded usage (``Anchor.to_json``; part of the result JSON)."""

    request: int
    #: "earlier_history" | "segment" | "unrecorded"
    kind: str
    #: "file_start" | "restart" | "turn_start" | "after_compaction"
    point: str
    tokens: int
    reason: str


@dataclass
class Anchor:
    """One anchor: where, why and how many recorded tokens it stands for."""

    request: int
    kind: str  # "earlier_history" | "segment" | "unrecorded"
    point: str  # "file_start" | "restart" | "turn_start" | "after_compaction"
    tokens: int
    reason: str

    def to_json(self) -> AnchorJson:
        return {
            "request": self.request,
            "kind": self.kind,
            "point": self.point,
            "tokens": self.tokens,
            "reason": self.reason,
        }


@dataclass
class ThreadAnchors:
    """Per request of a thread: its segment, the extra view tokens and the unrecorded input."""

    segment: list[int]
    #: earlier-history span, raw (tiktoken) units, until the first compaction
    history_raw: list[int]
    #: the segment's unseen prefix minus the first segment's, raw units
    segment_raw: list[int]
    #: unrecorded input, recorded-token units
    unrecorded: list[int]
    anchors: list[Anchor] = field(default_factory=list)
    calibration: Calibration | None = None
    #: running maximum of ``history_raw`` (``history_peak``), grown with it
    peaks: list[int] | None = field(default=None, repr=False, compare=False)

    @staticmethod
    def empty(n: int) -> ThreadAnchors:
        return ThreadAnchors([0] * n, [0] * n, [0] * n, [0] * n)

    def history_peak(self, k: int) -> int:
        """The largest earlier-history span of requests ``0..k``: read per request, so kept
        as a running maximum rather than taken over the thread so far each time. The list is
        final once measured, a live replay only appends to it."""
        if self.peaks is None:
            self.peaks = []
        peaks, history = self.peaks, self.history_raw
        if len(peaks) < len(history):
            running = peaks[-1] if peaks else history[0]
            for value in history[len(peaks) :]:
                if value > running:  # (``max``, inline: a call per request)
                    running = value
                peaks.append(running)
        return peaks[k]


def restart_reason(thread: Thread, start: int, end: int, previous: RequestInfo | None) -> str:
    """Why messages ``start:end`` (between two requests) hold a process restart, or ""."""
    msgs = thread.messages
    mcp = False
    for m in msgs[start:end]:
        if m.kind != "command":
            continue
        text = "".join(b.text for b in m.blocks)
        if any(c in text for c in EXIT_COMMANDS):
            return "/exit, then the session was resumed"
        if any(c in text for c in MCP_COMMANDS):
            mcp = True
        elif mcp and any(text.lstrip().startswith(c) for c in MCP_RECONNECTED):
            return "/mcp reconnected a server: the tool list was rebuilt"
    if any(m.metadata.get("resumed") for m in msgs[start:end]):
        return "the session was resumed"
    if previous is None:
        return ""
    before = previous.message
    for m in msgs[start:end]:
        if m.version and before.version and m.version != before.version:
            return f"Claude Code {before.version} → {m.version}"
    return ""


def named_points(thread: Thread, requests: Sequence[RequestInfo]) -> list[dict[str, str]]:
    """Per request, the nameable points right before it (point → reason)."""
    out: list[dict[str, str]] = []
    prev_end = 0
    messages = thread.messages
    for k, req in enumerate(requests):
        points: dict[str, str] = {}
        if k == 0:
            # the first request's only point (the others are named from the second on)
            points["file_start"] = "first request of the file"
            out.append(points)
            prev_end = req.position
            continue
        # one look at the messages between the two requests; ``restart_reason`` reads them
        # again only where one of them could hold a restart (a command, a resume, another
        # version)
        compaction = turn = maybe_restart = False
        before = requests[k - 1].message.version
        for m in messages[prev_end : req.position]:
            kind = m.kind
            if kind == "compact_boundary" or kind == "summary":
                compaction = True
            elif kind == "command" or kind == "prompt":
                turn = turn or m.role == "user"
                maybe_restart = maybe_restart or kind == "command"
            if m.metadata.get("resumed") or (m.version and before and m.version != before):
                maybe_restart = True
        reason = (
            restart_reason(thread, prev_end, req.position, requests[k - 1]) if maybe_restart else ""
        )
        if reason:
            points["restart"] = reason
        if compaction:
            points["after_compaction"] = "first request after a compaction"
        if turn:
            points["turn_start"] = "a user turn starts"
        out.append(points)
        prev_end = req.position
    return out


def _within_slope(xs: Sequence[int], ys: Sequence[int], groups: Sequence[int]) -> float | None:
    """Least-squares slope with one intercept per group (jumps between groups do not bias it)."""
    sums: dict[int, list[float]] = {}
    for x, y, g in zip(xs, ys, groups, strict=True):
        acc = sums.setdefault(g, [0.0, 0.0, 0.0])
        acc[0] += x
        acc[1] += y
        acc[2] += 1
    sxx = sxy = 0.0
    for x, y, g in zip(xs, ys, groups, strict=True):
        sx, sy, n = sums[g]
        dx = x - sx / n
        sxx += dx * dx
        sxy += dx * (y - sy / n)
    if sxx <= 0 or sxy <= 0:
        return None
    return sxy / sxx


def _stretch_ratio(
    points: Sequence[dict[str, str]],
    recorded: Sequence[int],
    raw: Sequence[int],
    totals: Sequence[int],
) -> float | None:
    """The thread's ratio of recorded to raw tokens, fitted within the stretches between named
    points (a jump at a restart, turn start or compaction does not tilt it)."""
    groups: list[int] = []
    group = 0
    for k in recorded:
        if points[k] and k != recorded[0]:
            group += 1
        groups.append(group)
    return _within_slope([raw[k] for k in recorded], [totals[k] for k in recorded], groups)


#: A response's thinking text must hold this many tokens to measure what it costs sent back.
THINKING_SAMPLE_TEXT_TOKENS = 30
#: The fewest such responses that measure a thread's thinking factor.
THINKING_GROWTH_SAMPLES = 5


def thinking_growth_factor(
    thread: Thread,
    requests: Sequence[RequestInfo],
    raw: Sequence[int],
    totals: Sequence[int],
    counter: TokenCounter,
    points: Sequence[dict[str, str]] | None = None,
) -> float:
    """What a thread's thinking costs when it is sent back, per token of the text the file
    keeps, measured on the thread's own recording.

    Claude 4 models return summarized thinking, and the next request of the turn sends the
    whole of it back. A response whose final output count was written is sized from it; one
    with only a streaming snapshot has nothing but its text. Between two requests of one turn
    (no prompt, restart or compaction between them) the recorded prompt grows by the response
    plus the tool results; what the growth holds beyond the view's other new content (at the
    ratio of the stretches between named points), over the thinking text, is the factor. The
    median over the thread's responses with at least ``THINKING_SAMPLE_TEXT_TOKENS`` of
    thinking text; 1.0 (the text as it is) with fewer than ``THINKING_GROWTH_SAMPLES`` of
    them, never less. The ratio takes up part of the thinking when it is a large share of the
    growth, so the factor errs low. ``points``: ``named_points`` of the requests, when the
    caller has them.
    """
    points = named_points(thread, requests) if points is None else points
    # the responses that measure it first: with fewer than ``THINKING_GROWTH_SAMPLES`` the
    # factor is 1.0 whatever the ratio, which is then not fitted (a walk over the thread)
    measured: list[tuple[int, int, list[Block]]] = []
    for k in range(len(requests) - 1):
        if totals[k] <= 0 or totals[k + 1] <= 0 or points[k + 1]:
            continue
        thinking = [b for b in requests[k].message.blocks if b.type == "thinking"]
        text = sum(thinking_text_tokens(b, counter) for b in thinking)
        if text < THINKING_SAMPLE_TEXT_TOKENS:
            continue
        measured.append((k, text, thinking))
    if len(measured) < THINKING_GROWTH_SAMPLES:
        return 1.0
    recorded = [k for k in range(len(requests)) if totals[k] > 0]
    ratio = _stretch_ratio(points, recorded, raw, totals)
    if ratio is None:
        return 1.0
    samples: list[float] = []
    for k, text, thinking in measured:
        sized = sum(block_tokens(b, counter) for b in thinking)
        sent_back = (totals[k + 1] - totals[k]) / ratio - (raw[k + 1] - raw[k] - sized)
        samples.append(sent_back / text)
    return max(1.0, statistics.median(samples))


def thread_anchors(
    thread: Thread,
    requests: Sequence[RequestInfo],
    raw: Sequence[int],
    totals: Sequence[int],
    config: PipelineConfig,
    points: Sequence[dict[str, str]] | None = None,
) -> ThreadAnchors:
    """Segments, earlier history and unrecorded input of one thread, from pass 1's raw counts
    (``points``: ``named_points`` of the requests, when the caller has them)."""
    n = len(requests)
    result = ThreadAnchors.empty(n)
    points = named_points(thread, requests) if points is None else points
    segment = 0
    for k in range(n):
        if "restart" in points[k]:
            segment += 1
        result.segment[k] = segment
    recorded = [k for k in range(n) if totals[k] > 0]
    if not config.anchors_enabled or not recorded:
        return result
    if len(recorded) < 3:
        return _short_thread(thread, result, recorded[0], raw, totals, config)
    ratio = _stretch_ratio(points, recorded, raw, totals)
    if ratio is None or not config.anchor_ratio_min <= ratio <= config.anchor_ratio_max:
        return result

    def level(k: int) -> float:
        return totals[k] - ratio * raw[k]

    def margin(k: int) -> float:
        share, least = config.anchor_margin_share * totals[k], config.anchor_margin_tokens
        return share if share > least else least  # (``max``, inline: asked per request)

    first = recorded[0]
    base = level(first)
    history = 0.0
    if thread.starts_outside:
        after = next((k for k in recorded if k > first and "after_compaction" in points[k]), None)
        reference = float(config.unseen_prefix_prior_tokens)
        if after is not None:
            reference = min(reference, level(after))
        if base - reference > margin(first):
            history = base - reference
            base = reference
            result.anchors.append(
                Anchor(
                    first,
                    "earlier_history",
                    "file_start",
                    round(history),
                    "the first record's parent is not in this file: earlier history sized from "
                    "the recorded prompt minus the system/tools level",
                )
            )
    start_history = history

    def walk(take: Callable[[int], bool]) -> tuple[list[tuple[float, float, float]], list[Anchor]]:
        """Per request (history, segment delta, unrecorded input) and the anchors, taking a
        jump at a named point past the margin where ``take(k)`` says so."""
        state, found, _ = walk_span(0, n, (start_history, 0.0, 0.0, False), take)
        return state, found

    def walk_span(
        start: int,
        stop: int,
        carry: Carry,
        take: Callable[[int], bool],
        carries: list[Carry] | None = None,
    ) -> tuple[list[tuple[float, float, float]], list[Anchor], Carry]:
        """``walk`` over requests ``start:stop`` from the walk's variables at ``start``
        (``carries`` collects them before each request), and its variables at ``stop``."""
        history, seg_delta, unrecorded, compacted = carry
        state: list[tuple[float, float, float]] = []
        found: list[Anchor] = []
        for k in range(start, stop):
            if carries is not None:
                carries.append((history, seg_delta, unrecorded, compacted))
            named = points[k]
            has_usage = totals[k] > 0 and k != first
            if "after_compaction" in named:
                compacted = True
                history = 0.0
                unrecorded = 0.0
                if has_usage:
                    jump = level(k) - (base + seg_delta)
                    if jump > margin(k) and take(k):
                        unrecorded = jump
                        found.append(
                            Anchor(
                                k,
                                "unrecorded",
                                "after_compaction",
                                round(jump),
                                "the prompt after the compaction is larger than its summary and "
                                "kept messages: restored files, plan or todo list not in the "
                                "transcript",
                            )
                        )
            elif "restart" in named and has_usage:
                jump = level(k) - (base + seg_delta + history + unrecorded)
                if abs(jump) > margin(k) and take(k):
                    seg_delta += jump
                    found.append(
                        Anchor(
                            k,
                            "segment",
                            "restart",
                            round(jump),
                            f"{named['restart']}: the system prompt and tools were rebuilt",
                        )
                    )
            elif "turn_start" in named and has_usage:
                jump = level(k) - (base + seg_delta + history + unrecorded)
                if jump > margin(k) and take(k):
                    unrecorded += jump
                    found.append(
                        Anchor(
                            k,
                            "unrecorded",
                            "turn_start",
                            round(jump),
                            "the prompt grew more than the turn's visible content: hook output "
                            "or attachments the transcript does not record",
                        )
                    )
            state.append((0.0 if compacted else history, seg_delta, unrecorded))
        return state, found, (history, seg_delta, unrecorded, compacted)

    def misfit(state: Sequence[tuple[float, float, float]]) -> float:
        """Squared relative error of the 2-parameter line through the anchored view."""
        xs = [raw[k] + (state[k][0] + state[k][1]) / ratio for k in recorded]
        ys = [totals[k] - state[k][2] for k in recorded]
        line = fit_calibration([round(x) for x in xs], [round(y) for y in ys])
        if line is None:
            return math.inf
        return sum(
            ((line.prefix_tokens + line.ratio * x - y) / (y if y > 1.0 else 1.0)) ** 2
            for x, y in zip(xs, ys, strict=True)
        )

    # Each jump past the margin is an anchor only if the recording bears it out: the line
    # through the whole thread must fit better with it, by more than one more parameter is
    # worth (the Bayesian information criterion), so a level that drifts with the content
    # (a ratio off for one kind of text) or a jump that the next requests take back is not
    # carried to the end of the segment. Candidates are decided in time order.
    if config.anchor_selection:
        penalty = math.log(len(recorded)) / len(recorded)

        def score(state: Sequence[tuple[float, float, float]]) -> float:
            return math.log(max(misfit(state), 1e-300))

        taken: set[int] = set()
        decided = -1
        screen = TrialScreen(recorded, n, raw, totals, base, ratio)
        recorded_flags = [t > 0 for t in totals]
        recorded_raw = [raw[k] for k in recorded]
        recorded_totals = [totals[k] for k in recorded]
        extremes = StretchExtremes(recorded_totals)
        # the first compaction after each request (n: none), where a trial's offsets reset
        next_compaction = [n] * (n + 1)
        for k in range(n - 1, -1, -1):
            next_compaction[k] = k if "after_compaction" in points[k] else next_compaction[k + 1]

        def current() -> tuple[list[int], list[Carry], list[Sums]]:
            """The walk with the anchors taken: the undecided requests whose jump passes the
            margin (a jump depends only on the decisions before it), the walk's variables
            before each request and the screen's prefix sums."""
            seen: list[int] = []
            carries: list[Carry] = []

            def take(k: int) -> bool:
                seen.append(k)
                return k in taken

            state, _, _ = walk_span(0, n, (start_history, 0.0, 0.0, False), take, carries)
            sums_before = screen.prefix_sums(recorded_flags, raw, totals, state, ratio)
            return [k for k in seen if k > decided and k not in taken], carries, sums_before

        def estimate(
            c: int,
            trial: set[int],
            carries: list[Carry],
            sums_before: list[Sums],
        ) -> float:
            """The trial's score from the screen, or NaN where it cannot stand for it (NaN
            compares false: the candidate is decided exactly); a lower bound of it where that
            already rejects the candidate (the stretch is then not summed)."""
            if max(trial) != c:
                return math.nan
            stop = next_compaction[c + 1]
            # after the candidate the trial takes nothing more (it is the trial's last), so the
            # walk's offsets stay as they are at the candidate until the next compaction: one
            # step walked, the stretch summed at those offsets
            span, _, carry = walk_span(c, c + 1, carries[c], trial.__contains__)
            hist, seg, unrec = span[0]
            shift = (hist + seg) / ratio
            lo, hi = bisect_left(recorded, c), bisect_left(recorded, stop)
            # from the compaction on: no history, no unrecorded input, the segment delta
            rest = screen.shifted_suffix(stop, (0.0 + carry[1]) / ratio)
            if rest is None:
                return math.nan
            stretch = recorded_totals[lo:hi]
            if stretch:
                low_total, high_total = extremes.of(lo, hi)
                bound = screen.stretch_bound(c, stop, shift, unrec, low_total, high_total)
                low = None if bound is None else screen.misfit([sums_before[c], bound, rest])
                if low is not None and rejected(math.log(max(low, 1e-300))):
                    return math.log(max(low, 1e-300))
            piece: list[float] = list(ZERO)
            add_shifted_points(piece, recorded_raw[lo:hi], stretch, shift, unrec, base, ratio)
            value = screen.misfit([sums_before[c], piece, rest])
            return math.nan if value is None else math.log(max(value, 1e-300))

        def rejected(estimated: float) -> bool:
            """Whether a trial's estimated score is clearly worse than the anchors taken."""
            return estimated + penalty - best > SCREEN_TOLERANCE

        best = score(walk(taken.__contains__)[0])
        queue, carries, sums_before = current()
        while queue:
            c = queue.pop(0)
            decided = c
            trial = taken | {c}
            # most candidates fit clearly worse: the screen rejects them; the others are
            # decided by the exact walk and refit, as before
            if rejected(estimate(c, trial, carries, sums_before)):
                continue
            exact = score(walk(trial.__contains__)[0])
            if exact + penalty < best:
                taken, best = trial, exact
                queue, carries, sums_before = current()
        state, found = walk(taken.__contains__)
    else:
        state, found = walk(lambda k: True)
    result.anchors.extend(found)
    for k, (hist, seg, unrec) in enumerate(state):
        result.history_raw[k] = round(hist / ratio)
        result.segment_raw[k] = round(seg / ratio)
        result.unrecorded[k] = round(unrec)
    # the ratio from every request; the unseen prefix anchored on the first recorded request
    # (of the first segment: later segments carry their own delta), as Claude Code counted it
    xs = [raw[k] + result.history_raw[k] + result.segment_raw[k] for k in recorded]
    ys = [totals[k] - result.unrecorded[k] for k in recorded]
    refit = fit_calibration(xs, ys)
    if refit is not None:
        prefix = refit.prefix_tokens
        errors = sorted(
            abs(prefix + refit.ratio * x - y) / (y if y > 1 else 1)
            for x, y in zip(xs, ys, strict=True)
        )
        result.calibration = Calibration(
            prefix,
            refit.ratio,
            refit.requests_used,
            statistics.median(errors),
            percentile(errors, 0.9),
            "anchor",
        )
    return result


def _short_thread(
    thread: Thread,
    result: ThreadAnchors,
    first: int,
    raw: Sequence[int],
    totals: Sequence[int],
    config: PipelineConfig,
) -> ThreadAnchors:
    """Too few recorded requests to fit a line: the default ratio, and the unseen prefix
    anchored on the first recorded request (less the earlier history, when the file continues
    a conversation that is not in it)."""
    ratio = DEFAULT_CALIBRATION.ratio
    level = totals[first] - ratio * raw[first]
    prefix = level
    prior = float(config.unseen_prefix_prior_tokens)
    margin = max(config.anchor_margin_tokens, config.anchor_margin_share * totals[first])
    if thread.starts_outside and level - prior > margin:
        prefix = prior
        history = level - prior
        result.anchors.append(
            Anchor(
                first,
                "earlier_history",
                "file_start",
                round(history),
                "the first record's parent is not in this file: earlier history sized from the "
                "recorded prompt minus the system/tools level",
            )
        )
        for k in range(len(result.history_raw)):
            if k >= first:
                result.history_raw[k] = round(history / ratio)
    result.calibration = Calibration(
        max(0.0, prefix), ratio, sum(1 for t in totals if t > 0), None, None, "anchor"
    )
    return result
