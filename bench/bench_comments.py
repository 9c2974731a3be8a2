"""Comment hooks benchmark: the request explorer with N comments on the request (its panel, and
a gutter mark on every row) against the same page with the comment hooks stubbed out, in the
same run, alternating, the median of ``--runs`` loads each.

The page is served by Django's test client in this process (its per-template context copies,
which a server does not make, switched off), on a fresh test database (created and dropped
here) holding the demo session ``marot__spotter__tool_heavy`` replayed. Target: the hooks of a
request without comments cost nothing measurable; each comment costs a small, bounded share.

    python bench/bench_comments.py [--runs 30] [--comments 0,5,50]

Results are printed and written to bench/out/comments.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
OUT_FILE = BENCH_DIR / "out" / "comments.json"
DEMO = ROOT / "contextlab" / "demo" / "marot__spotter__tool_heavy.jsonl"

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django  # noqa: E402  (after the path set-up)

django.setup()

import django.test.client as test_client  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils.safestring import mark_safe  # noqa: E402


def measure(runs: int, counts: list[int]) -> list[dict[str, Any]]:
    from django.contrib.auth.models import User
    from django.test import Client

    from contextlab.comments import services
    from contextlab.comments.models import Comment
    from contextlab.comments.templatetags import comment_tags
    from contextlab.jobs import replay as runner
    from contextlab.transcripts import services as transcripts
    from contextlab.workspaces import access

    user = User.objects.create_user(username="bench", password="pw-bench-123")
    with DEMO.open("rb") as fh:
        session, _ = transcripts.create_transcript(owner=user, name="bench.jsonl", content=fh)
    runner.execute_run(session.runs.get().pk)
    client = Client()
    client.force_login(user)
    index = services.request_count(session) - 1
    url = f"/sessions/{session.pk}/requests/{index}/"

    def median_ms(stubbed: bool) -> float:
        times = []
        for _ in range(runs):
            with (
                mock.patch.object(comment_tags, "_mark", return_value=mark_safe(""))
                if stubbed
                else nullcontext(),
                mock.patch(
                    "contextlab.comments.presenting.panel_context",
                    return_value={"comments": [], "can_comment": False},
                )
                if stubbed
                else nullcontext(),
            ):
                started = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - started)
            assert response.status_code == 200
        return statistics.median(times) * 1000

    out = []
    gated = access.session_for(user, session.pk)
    for count in counts:
        Comment.objects.all().delete()
        for i in range(count):
            services.create_comment(
                user=user,
                transcript=gated,
                request_index=index,
                body=f"**Note {i}**: this block is `heavy`; see [the docs](https://example.com/{i}).",
                block=f"b-{i}-0" if i % 2 else "",
            )
        client.get(url)  # warm the explorer's caches
        pairs = [(median_ms(False), median_ms(True)) for _ in range(3)]
        hooks = statistics.median(p[0] for p in pairs)
        base = statistics.median(p[1] for p in pairs)
        out.append(
            {"comments": count, "with_ms": round(hooks, 2), "stubbed_ms": round(base, 2),
             "ratio": round(hooks / base, 3)}
        )  # fmt: skip
        print(f"{count:>4} comments: {hooks:7.1f} ms with the hooks, {base:7.1f} ms stubbed, "
              f"ratio {hooks / base:.3f}")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--comments", default="0,5,50")
    args = parser.parse_args()
    counts = [int(c) for c in args.comments.split(",")]
    # the test client copies every template's context for assertions: a server does not
    test_client.store_rendered_templates = lambda *a, **k: None
    setup_test_environment()
    name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    try:
        results = measure(args.runs, counts)
    finally:
        connection.creation.destroy_test_db(name, verbosity=0)
    OUT_FILE.parent.mkdir(exist_ok=True)
    OUT_FILE.write_text(json.dumps({"runs": args.runs, "results": results}, indent=2))


if __name__ == "__main__":
    main()
