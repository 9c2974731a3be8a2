"""The request rows' CSV: header, 1-based numbers, no formula from a transcript's text."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from contextlab.runs.request_csv import COLUMNS, request_csv
from tests.engine.invariants import replay_json


def test_rows_are_numbered_from_one_and_formulas_are_defused(short_jsonl: Path) -> None:
    requests = json.loads(json.dumps(replay_json(short_jsonl, "recorded")))["requests"]
    assert requests
    requests[0]["thread"] = '=HYPERLINK("http://x")'
    rows = list(csv.reader(request_csv(requests).splitlines()))
    assert tuple(rows[0]) == COLUMNS
    assert [int(r[0]) for r in rows[1:]] == [r["index"] + 1 for r in requests]
    assert rows[1][2] == '\'=HYPERLINK("http://x")'
    # the events column reads as the explorer's sentences
    events = {e["step"] for r in requests for e in r["events"]}
    assert events or all(r[-1] == "" for r in rows[1:])
