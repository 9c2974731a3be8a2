"""The per-request comparison's rows: configuration A's and B's views of one request, aligned.

Plain functions of the engine's side-by-side views (no request, no template), shaped for the
explorer's cell partial (``templates/runs/_cell.html``).
"""

from __future__ import annotations

from typing import Any

#: text longer than this is folded; the rest loads on demand (as in the explorer)
FOLD_CHARS = 1500


def _fold(text: str, loadable: bool) -> dict[str, Any]:
    if loadable and len(text) > FOLD_CHARS:
        return {"head": text[:FOLD_CHARS], "rest": len(text) - FOLD_CHARS}
    return {"head": text, "rest": 0}


def _side_cell(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """A row of one side, shaped for ``runs/_cell.html`` (the explorer's cell partial)."""
    if row is None:
        return None
    item = dict(row)
    item["synthetic"] = row.get("message") is None
    model = row.get("model")
    if isinstance(model, dict):
        cell = dict(model)
        cell.setdefault("role", row.get("role"))
        loadable = not item["synthetic"] and row.get("badge") == "intact"
        cell["fold"] = _fold(str(cell.get("text") or ""), loadable)
        item["cell"] = cell
    else:
        item["cell"] = None
    return item


def align_rows(view_a: dict[str, Any], view_b: dict[str, Any]) -> list[dict[str, Any]]:
    """A's and B's rows of one request side by side, matched by history block.

    Both views cover the same history (the request is the same), so real rows pair up by
    (message, block); synthetic rows (summaries, restored files) have no history block and
    are placed where each side put them, beside the other side's synthetic rows if any.
    """
    rows_a: list[dict[str, Any]] = view_a.get("rows") or []
    rows_b: list[dict[str, Any]] = view_b.get("rows") or []

    def split(
        rows: list[dict[str, Any]],
    ) -> tuple[dict[tuple[int, int], Any], dict[int, list[Any]]]:
        real: dict[tuple[int, int], Any] = {}
        synthetic: dict[int, list[Any]] = {}
        pending: list[Any] = []
        for row in rows:
            if row.get("message") is None:
                pending.append(row)
                continue
            key = (int(row["message"]), int(row.get("block") or 0))
            if pending:
                synthetic[key[0]] = pending
                pending = []
            real[key] = row
        if pending:
            synthetic[-1] = pending  # after the last message
        return real, synthetic

    real_a, syn_a = split(rows_a)
    real_b, syn_b = split(rows_b)
    out: list[dict[str, Any]] = []

    def add_synthetic(at: int) -> None:
        left, right = syn_a.get(at, []), syn_b.get(at, [])
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else None
            b = right[i] if i < len(right) else None
            out.append(
                {"key": f"s-{at}-{i}", "a": _side_cell(a), "b": _side_cell(b), "history": None}
            )

    seen_messages: set[int] = set()
    for key in sorted(set(real_a) | set(real_b)):
        if key[0] not in seen_messages:
            seen_messages.add(key[0])
            add_synthetic(key[0])
        a, b = real_a.get(key), real_b.get(key)
        out.append(
            {
                "key": f"{key[0]}-{key[1]}",
                "a": _side_cell(a),
                "b": _side_cell(b),
                "history": (a or b or {}).get("repl"),
            }
        )
    for at in sorted(set(syn_a) | set(syn_b)):
        if at not in seen_messages:
            add_synthetic(at)
    for row in out:
        a, b = row["a"], row["b"]
        text_a = (a or {}).get("model") or None
        text_b = (b or {}).get("model") or None
        row["sent"] = bool(text_a or text_b)
        row["differs"] = (a or {}).get("badge") != (b or {}).get("badge") or (text_a or {}).get(
            "text"
        ) != (text_b or {}).get("text")
    return out
