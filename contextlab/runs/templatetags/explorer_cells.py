"""``{% explorer_cell cell is_open %}``: one column cell of the request explorer
(``runs/_cell.html``), rendered once per process for each distinct cell and reused.

Stepping through a session's requests shows the same history blocks again and again (each
request's history holds the one before it); rendering their cells through the template was
most of an explorer page's time. The cell template is rendered from exactly the values the key
holds (never the page's whole context), so a cached cell is the cell the template would give.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import Any

from cachetools import LRUCache
from django import template
from django.template.loader import get_template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

CELL_TEMPLATE = "runs/_cell.html"
#: the cell's own keys the template reads (``fold`` as its head and rest)
_CELL_KEYS = ("role", "type", "tool_name", "is_error", "tokens")
#: the row's keys it reads
_ROW_KEYS = ("role", "synthetic", "message", "block")

#: rendered cells: a few thousand (each at most a folded head of text, ~4 KB of HTML)
_RENDERED: LRUCache[Hashable, SafeString] = LRUCache(maxsize=4096)
_LOCK = threading.Lock()


def _get(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, Mapping) else getattr(mapping, key, None)


def cell_inputs(
    context: template.Context, cell: Mapping[str, Any], is_open: bool
) -> dict[str, Any]:
    """Everything ``runs/_cell.html`` reads, and nothing else: its whole context."""
    fold = cell.get("fold") or {}
    row = context.get("row") or {}
    transcript = context.get("transcript")
    return {
        "cell": {
            **{key: cell.get(key) for key in _CELL_KEYS},
            "fold": {"head": fold.get("head") or "", "rest": fold.get("rest") or 0},
        },
        "row": {key: _get(row, key) for key in _ROW_KEYS},
        "is_open": bool(is_open),
        "thread": context.get("thread"),
        "block_prefix": context.get("block_prefix") or "",
        "transcript": {"pk": _get(transcript, "pk")},
    }


def _key(inputs: dict[str, Any]) -> tuple[Hashable, ...]:
    cell, row = inputs["cell"], inputs["row"]
    return (
        *(cell[key] for key in _CELL_KEYS),
        cell["fold"]["head"],
        cell["fold"]["rest"],
        *(row[key] for key in _ROW_KEYS),
        inputs["is_open"],
        inputs["thread"],
        inputs["block_prefix"],
        inputs["transcript"]["pk"],
    )


@register.simple_tag(takes_context=True)
def explorer_cell(context: template.Context, cell: Mapping[str, Any], is_open: bool) -> SafeString:
    """The cell's HTML (escaped by the template), from the per-process cache when seen."""
    inputs = cell_inputs(context, cell, is_open)
    key = _key(inputs)
    with _LOCK:
        found = _RENDERED.get(key)
    if found is not None:
        return found
    html = mark_safe(get_template(CELL_TEMPLATE).render(inputs))  # the template escaped it
    with _LOCK:
        _RENDERED[key] = html
    return html
