"""Fuzz the transcript loader with hypothesis for longer than the test suite does.

    PYTHONPATH=. python bench/fuzz_loader.py --examples 3000

Runs the properties of tests/hardening/test_loader_properties.py (any bytes, record-like lines
with hostile fragments, whole and cut gzips, whole and corrupted zips) with ``--examples``
examples each, and prints the CPU-minutes spent and every falsifying example found. Exits 1
when a property failed.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


class _TmpFactory:
    """What the properties take from pytest's ``tmp_path_factory``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0

    def mktemp(self, name: str) -> Path:
        self.count += 1
        path = self.root / f"{name}{self.count % 50}"
        path.mkdir(exist_ok=True)
        return path


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="examples per property")
    args = parser.parse_args()
    from hypothesis import HealthCheck, settings

    from tests.hardening import test_loader_properties as props

    long_run = settings(
        max_examples=args.examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    properties: list[Any] = [
        props.test_any_bytes_as_jsonl,
        props.test_record_like_lines,
        props.test_gzip_whole_or_cut,
        props.test_zip_whole_or_corrupted,
    ]
    failures = 0
    start_cpu, start_wall = cpu_seconds(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="contextlab-fuzz-") as root:
        factory = _TmpFactory(Path(root))
        for prop in properties:
            inner = prop.hypothesis.inner_test
            from hypothesis import given

            strategies = prop.hypothesis._given_kwargs
            test = long_run(given(**strategies)(inner))
            before = cpu_seconds()
            try:
                test(factory)
                verdict = "no failure"
            except Exception:
                failures += 1
                verdict = "FAILED:\n" + traceback.format_exc(limit=3)
            print(
                f"{prop.__name__}: {args.examples} examples, "
                f"{(cpu_seconds() - before) / 60:.2f} CPU-min, {verdict}"
            )
    print(
        f"total: {(cpu_seconds() - start_cpu) / 60:.2f} CPU-minutes "
        f"({time.monotonic() - start_wall:.0f} s wall), {failures} failing properties"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
