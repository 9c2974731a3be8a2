"""The request explorer's page, built from a finished result and its session's messages: the
one builder behind the owner's explorer, a share link's read-only explorer (on its redacted
snapshot) and the HTML export. It knows nothing of who asks: the callers pass the data they
may show, the URL of each request and a key under which the per-run parts are kept.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from cachetools import LRUCache
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import get_template
from django.utils.safestring import SafeString, mark_safe

from contextlab import engine
from contextlab.engine import (
    HistoryIndex,
    NavigatorEvent,
    RequestRow,
    ResultJson,
    TiktokenCounter,
    as_result,
)
from contextlab.runs import charts

T = TypeVar("T")

#: text longer than this is folded server-side; the rest loads on demand
FOLD_CHARS = 1500
#: the longest tool name the explorer's filter takes
MAX_TOOL_CHARS = 200
#: a block's anchor as a search hit names it
_BLOCK_ID = re.compile(r"b-\d{1,9}-\d{1,6}")

#: What is derived from a finished result (and its session's messages), kept per process:
#: neither ever changes, and rebuilding it on every explorer step was most of the step's time.
#: Keyed by the caller's key (a run and its finish, a share link) and the kind of part.
_DERIVED: LRUCache[Hashable, Any] = LRUCache(maxsize=32)
_DERIVED_LOCK = threading.Lock()


def _derived(key: tuple[Hashable, ...] | None, build: Callable[[], T]) -> T:
    """``build()``, remembered under ``key`` (None: a value not worth keeping)."""
    if key is None:
        return build()
    with _DERIVED_LOCK:
        found: T | None = _DERIVED.get(key)
    if found is not None:
        return found
    value = build()
    with _DERIVED_LOCK:
        _DERIVED[key] = value
    return value


class MemoCounter(TiktokenCounter):
    """A tiktoken counter that remembers its last few thousand texts' counts (a summary is
    counted again on every request it heads otherwise)."""

    LIMIT = 4096

    def __init__(self) -> None:
        super().__init__()
        self._memo: LRUCache[str, int] = LRUCache(maxsize=self.LIMIT)
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        with self._lock:
            found = self._memo.get(text)
        if found is not None:
            return found
        value = int(super().count(text))
        with self._lock:
            self._memo[text] = value
        return value


@dataclass(frozen=True)
class Flags:
    """What the reader asked to see: history a summary replaced, changed rows only, a page."""

    show_replaced: bool = False
    changed_only: bool = False
    page: int = 1
    #: a block to open the page at and mark (a search hit's ``b-<message>-<block>``)
    block: str | None = None
    #: only the rows of this tool's calls and results (``?tool=Bash``)
    tool: str | None = None

    @classmethod
    def of(cls, query: Any) -> Flags:
        """From a request's ``GET`` (``replaced=1``, ``changed=1``, ``page=N``, ``block=b-M-B``)."""
        try:
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            page = 1
        block = str(query.get("block", ""))
        tool = str(query.get("tool", ""))[:MAX_TOOL_CHARS]
        return cls(
            query.get("replaced") == "1",
            query.get("changed") == "1",
            page,
            block if _BLOCK_ID.fullmatch(block) else None,
            tool or None,
        )

    @property
    def query(self) -> str:
        """The flags as they follow a request's URL (``&replaced=1&changed=1``)."""
        return (
            ("&replaced=1" if self.show_replaced else "")
            + ("&changed=1" if self.changed_only else "")
            + (f"&tool={quote(self.tool, safe='')}" if self.tool else "")
        )


def request_view(
    data: dict[str, Any],
    messages: dict[str, list[dict[str, Any]]],
    index: int,
    *,
    show_replaced: bool = True,
    thread_cache: tuple[Hashable, ...] | None = None,
) -> dict[str, Any]:
    """One request's side-by-side view with its composition: ``req``, ``thread``,
    ``previous`` (the thread's request before it), ``compacted``, ``view``, ``rows`` (each
    with its ``tokens`` and ``anchor``), ``omitted``, ``replaced_from`` and ``composition``.
    ``show_replaced=False`` only counts the rows a summary replaced (a long session's history
    is mostly replaced). ``thread_cache`` keys the thread's indexes, kept per process."""
    result = as_result(data)
    requests = result["requests"]
    req = requests[index]
    thread = req["thread"]
    thread_messages = messages.get(thread) or []
    previous = _previous_in_thread(requests, index)
    compacted = any(
        e["step"] == "autocompact" and e["action"] == "compacted" for e in req["events"]
    )
    replaced_from = (
        int(previous["view"]["start"] or 0) if compacted and previous is not None else None
    )
    transforms, history, counter, block_tools = _derived(
        # an empty list is the messages not stored yet: not worth keeping
        (*thread_cache, "thread", thread) if thread_cache and thread_messages else None,
        lambda: (
            engine.TransformIndex(result["views"]["transforms"], thread),
            HistoryIndex(thread_messages),
            MemoCounter(),
            _block_tools(thread_messages),
        ),
    )
    view = engine.side_by_side(
        thread_messages,
        data,
        req["index"],
        transforms=transforms,
        history=None if show_replaced else history,
        list_replaced_from=replaced_from,
    )
    rows: list[dict[str, Any]] = view.get("rows") or []
    omitted = view.get("omitted") or {"rows": 0, "tokens": 0}
    prefix_tokens, ratio = _calibration(result, req)
    composition = engine.compose(
        rows,
        thread_messages,
        model_tokens=req["model_tokens"],
        prefix_tokens=prefix_tokens,
        ratio=ratio,
        replaced_from=replaced_from,
        counter=counter,
        omitted_tokens=int(omitted["tokens"]),
    )
    for position, row in enumerate(rows):
        row["tokens"] = composition["row_tokens"][position]
        row["anchor"] = _anchor(row, position)
        row["tool"] = block_tools.get((row.get("message"), row.get("block")))
    return {
        "req": req,
        "thread": thread,
        "previous": previous,
        "compacted": compacted,
        "view": view,
        "rows": rows,
        "omitted": omitted,
        "replaced_from": replaced_from,
        "composition": composition,
    }


def _block_tools(messages: list[dict[str, Any]]) -> dict[tuple[Any, Any], str]:
    """(message, block) -> the tool of each tool call and result of a thread."""
    names = engine.tool_names(messages)
    keys = [(mi, bj) for mi, msg in enumerate(messages) for bj in range(len(msg["blocks"]))]
    return {key: name for key, name in zip(keys, names, strict=True) if name is not None}


def build(
    data: dict[str, Any],
    messages: dict[str, list[dict[str, Any]]],
    index: int,
    *,
    flags: Flags,
    request_url: charts.RequestUrl,
    cache_key: tuple[Hashable, ...] | None,
) -> dict[str, Any]:
    """The explorer page's context for request ``index``: the request's facts, the navigator
    (mini chart, event strip and list), the breakdown of its prompt and the page of rows.
    ``request_url(i)`` is request i's page (the flags are added to it); ``cache_key`` keys
    what every request of the same result shares (None: nothing is kept)."""
    requests = as_result(data)["requests"]
    shown = request_view(
        data,
        messages,
        index,
        # a block asked for may be one a summary replaced: list them all to find it
        show_replaced=flags.show_replaced or flags.block is not None,
        thread_cache=(*cache_key, "messages") if cache_key else None,
    )
    req, rows, view = shown["req"], shown["rows"], shown["view"]
    composition = shown["composition"]
    flags = _opening_at_block(flags, rows, view)
    page = explorer_page(rows, view, flags)
    recorded_total = charts.recorded_prompt(req)
    model_tokens = req["model_tokens"]

    def url(i: int) -> str:
        return with_query(request_url(i), flags.query)

    count = len(requests)
    overview = _derived(
        (*cache_key, "overview") if cache_key else None, lambda: _overview(requests)
    )
    events: list[NavigatorEvent] = overview["events"]
    gap = _gap_before(requests, index)
    unchanged = Flags(flags.show_replaced, not flags.changed_only, tool=flags.tool)
    return {
        "index": index,
        "number": index + 1,
        "count": count,
        "req": req,
        "view": view,
        **page,
        "prev_url": url(index - 1) if index > 0 else None,
        "next_url": url(index + 1) if index + 1 < count else None,
        "self_url": url(index),
        "url_flags": flags.query,
        "thread": shown["thread"],
        "summary_start": view.get("start", 0),
        "replaced_count": len(page["replaced"]) + int(shown["omitted"]["rows"]),
        "recorded_total": recorded_total,
        "rel_error": (model_tokens - recorded_total) / recorded_total if recorded_total else None,
        "show_replaced": flags.show_replaced,
        "changed_only": flags.changed_only,
        "tool_filter": flags.tool,
        "changed_url": with_query(request_url(index), unchanged.query),
        "event_count": len(events),
        **_event_navigator(events, index, count, url, (*cache_key, flags) if cache_key else None),
        "event_kinds": overview["event_kinds"],
        "request_events": [engine.describe_event(e) for e in req["events"]],
        "cache_text": engine.cache_sentence(req, shown["previous"], gap),
        # a model priced on assumed rates says so wherever its cost shows
        "price_note": engine.load_pricing().pricing_note(req.get("model")),
        "gap": engine.format_duration(gap) if gap is not None else None,
        "mini": charts.mark_request(overview["mini"], index, requests),
        "composition": composition,
        "parts": styled_parts(composition["parts"]),
        "heaviest": [
            {
                "anchor": rows[h["position"]]["anchor"],
                "kind": h["kind"],
                "tokens": h["tokens"],
                "preview": _preview(rows[h["position"]]),
            }
            for h in composition["heaviest"]
        ],
        "compacted": shown["compacted"],
    }


def with_query(url: str, query: str) -> str:
    """``url`` with ``query`` (``&a=1&b=2``) added after its own query, or as its query."""
    if not query:
        return url
    return url + ("&" if "?" in url else "?") + query.removeprefix("&")


def explorer_page(rows: list[dict[str, Any]], view: dict[str, Any], flags: Flags) -> dict[str, Any]:
    """The rows one explorer page shows: history a summary replaced hidden unless asked for,
    unchanged rows hidden for "changed rows only", then the page's slice, prepared with its
    cache gutter. Also ``replaced`` (positions of the replaced rows), ``row_count`` (rows left
    after hiding), ``page`` and ``next_page``."""
    # the engine marks each sent block read / write / uncached from its cache model
    gutter = [str(row.get("cache") or "none") for row in rows]
    replaced = [i for i, row in enumerate(rows) if _is_replaced(row, view)]
    hidden = set(replaced) if not flags.show_replaced else set()
    if flags.changed_only:
        # only rows the pipeline changed: what the model saw differs from the history
        hidden |= {i for i, row in enumerate(rows) if row.get("badge") == "intact"}
    if flags.tool:
        # only the calls and results of the tool asked for
        hidden |= {i for i, row in enumerate(rows) if row.get("tool") != flags.tool}
    if hidden:
        gutter = [g for i, g in enumerate(gutter) if i not in hidden]
        rows = [row for i, row in enumerate(rows) if i not in hidden]
    per_page = settings.EXPLORER_ROWS_PER_PAGE
    page = flags.page
    if flags.block is not None:
        # the page holding the block asked for
        found = next((i for i, row in enumerate(rows) if row.get("anchor") == flags.block), None)
        page = found // per_page + 1 if found is not None else 1
    start = (page - 1) * per_page
    prepared = _prepare_rows(rows[start : start + per_page], gutter, start)
    for item in prepared:
        item["hit"] = item["anchor"] == flags.block
    return {
        "rows": prepared,
        "replaced": replaced,
        "row_count": len(rows),
        "page": page,
        "next_page": page + 1 if start + per_page < len(rows) else None,
    }


def _opening_at_block(flags: Flags, rows: list[dict[str, Any]], view: dict[str, Any]) -> Flags:
    """The flags that show the block asked for: replaced history shown when it is one of
    those rows, "changed rows only" off."""
    if flags.block is None:
        return flags
    row = next((r for r in rows if r.get("anchor") == flags.block), None)
    replaced = flags.show_replaced or (row is not None and _is_replaced(row, view))
    return Flags(replaced, False, flags.page, flags.block, flags.tool)


def _fold(text: str | None) -> dict[str, Any]:
    text = text or ""
    if len(text) <= FOLD_CHARS:
        return {"head": text, "rest": 0}
    return {"head": text[:FOLD_CHARS], "rest": len(text) - FOLD_CHARS}


def _prepare_rows(
    rows: list[dict[str, Any]], gutter: list[str], first: int
) -> list[dict[str, Any]]:
    prepared = []
    for offset, row in enumerate(rows):
        item = dict(row)
        synthetic = row.get("message") is None
        item.setdefault("anchor", _anchor(row, first + offset))
        item["cache"] = gutter[first + offset] if first + offset < len(gutter) else "none"
        item["synthetic"] = synthetic
        # history the model did not see starts folded, so what it did see stands out
        item["repl_open"] = bool(row.get("model"))
        for side in ("repl", "model"):
            cell = row.get(side)
            if isinstance(cell, dict):
                # every key the cell template reads: a missing key costs the template a dir()
                cell = {"role": None, "tool_name": None, "is_error": False, **cell}
                if cell["tool_name"] is None and side == "repl":
                    cell["tool_name"] = row.get("tool")  # a result named by its call
                # synthetic text (summaries) has no stored block to load the rest from;
                # only text identical to a stored block can load its rest on demand
                loadable = not synthetic and (side == "repl" or row.get("badge") == "intact")
                cell["fold"] = (
                    _fold(cell.get("text"))
                    if loadable
                    else {"head": cell.get("text") or "", "rest": 0}
                )
                # display tokens of this side's block (engine.compose), shown in its head
                cell["tokens"] = (row.get("tokens") or {}).get(side)
                item[side] = cell
        item["has_original"] = bool(item.pop("original", None))  # loaded on demand, never inlined
        prepared.append(item)
    return prepared


def _is_replaced(row: dict[str, Any], view: dict[str, Any]) -> bool:
    """A history row the model did not see because a summary replaced it."""
    message = row.get("message")
    return (
        row.get("badge") == "summarized"
        and not row.get("model")
        and message is not None
        and message < int(view.get("start") or 0)
    )


def _calibration(data: ResultJson, req: RequestRow) -> tuple[int, float]:
    """(fitted prefix tokens, ratio) of the request's thread and model: display tokens are
    ``prefix + ratio * tiktoken count``, the prefix standing for the system prompt and tools."""
    session = data["session"]
    info = next((t for t in session["threads"] if t["id"] == req["thread"]), None)
    fit = None
    if info is not None:
        # a thread that switched models has a fit per model
        fit = info.get("model_calibrations", {}).get(req["model"] or "") or info.get("calibration")
    fit = fit or session["calibration"]
    if fit is None:
        return 0, 1.0
    return int(fit["prefix_tokens"] or 0), float(fit["ratio"] or 1.0)


def _overview(requests: list[RequestRow]) -> dict[str, Any]:
    """What every request page of a result shares (its events, the mini chart's lines)."""
    events = engine.request_events(requests)
    return {
        "events": events,
        "event_kinds": engine.event_counts(events),
        "mini": charts.mini_chart(requests, 0),
    }


def _event_navigator(
    events: list[NavigatorEvent],
    index: int,
    count: int,
    url: charts.RequestUrl,
    cache_key: tuple[Hashable, ...] | None,
) -> dict[str, SafeString]:
    """The event strip's ticks and the navigator's list, as HTML: each event is rendered once
    per result (and flags) and reused by every request page; only the current request's
    events are rendered again, marked."""
    tick = get_template("runs/_navigator.html#event-tick")
    item = get_template("runs/_navigator.html#event-item")

    def context(e: NavigatorEvent, current: bool) -> dict[str, Any]:
        return {
            "e": {
                **e,
                "number": e["request"] + 1,
                "url": url(e["request"]),
                "left": round(e["request"] / max(1, count - 1) * 100, 2),
                "current": current,
            }
        }

    def render_all() -> tuple[list[str], list[str]]:
        contexts = [context(e, False) for e in events]
        return [tick.render(c) for c in contexts], [item.render(c) for c in contexts]

    cached = _derived((*cache_key, "events") if cache_key else None, render_all)
    ticks, items = list(cached[0]), list(cached[1])
    for position, e in enumerate(events):
        if e["request"] == index:
            ticks[position] = tick.render(context(e, True))
            items[position] = item.render(context(e, True))
    # rendered by the template engine (escaped there), joined here
    return {"event_ticks": mark_safe("".join(ticks)), "event_items": mark_safe("".join(items))}


def _gap_before(requests: list[RequestRow], index: int) -> float | None:
    """Seconds since the previous request of the same thread, None for a thread's first."""
    previous = _previous_in_thread(requests, index)
    if previous is None:
        return None
    return engine.gaps([previous, requests[index]])[1]


def _previous_in_thread(requests: list[RequestRow], index: int) -> RequestRow | None:
    thread = requests[index]["thread"]
    for i in range(index - 1, -1, -1):
        if requests[i]["thread"] == thread:
            return requests[i]
    return None


def styled_parts(parts: list[Any]) -> list[dict[str, Any]]:
    """The composition's parts with a colour class (``static/css/app.css``): one per kind,
    tool results in shades."""
    out = []
    tools = 0
    for part in parts:
        kind = str(part["kind"])
        if kind.startswith("tool results"):
            css = f"part-tool t{tools % 4}"
            tools += 1
        else:
            css = "part-" + "".join(c if c.isalnum() else "-" for c in kind.split(" (")[0].lower())
        out.append({**part, "css": css})
    return out


def _preview(row: dict[str, Any], chars: int = 90) -> str:
    """The block's first ``chars`` characters, whitespace collapsed (a heavy block is a long
    text: only its head is split, unless the head collapses to too little)."""
    text = str((row.get("model") or row.get("repl") or {}).get("text") or "")
    head = text[: chars * 20]
    words = head.split()
    if len(head) < len(text):
        words = words[:-1]  # the cut may end inside a word
    flat = " ".join(words)
    if len(head) < len(text) and len(flat) <= chars:
        flat = " ".join(text.split())  # mostly whitespace at the head: the whole text
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def _anchor(row: dict[str, Any], position: int) -> str:
    if row.get("message") is None:
        return f"b-s-{position}"
    return f"b-{row['message']}-{row['block']}"


def block_text_response(
    request: HttpRequest, messages: list[dict[str, Any]] | None, message: int, block: int
) -> HttpResponse:
    """One block's whole text from a thread's stored messages (``?original=1``: the full tool
    output behind a persisted preview); 404 for a message or block that does not exist.
    Shared by the explorer and the read-only explorer of a share link."""
    if not messages or not 0 <= message < len(messages):
        raise Http404("no such message")
    msg = messages[message]
    if request.GET.get("original") == "1":
        text = msg.get("original_output")
        if text is None:
            raise Http404("the transcript does not hold the original output")
        return render(request, "runs/block_text.html", {"text": text})
    blocks = msg.get("blocks") or []
    if not 0 <= block < len(blocks):
        raise Http404("no such block")
    return render(request, "runs/block_text.html", {"text": blocks[block].get("text") or ""})
