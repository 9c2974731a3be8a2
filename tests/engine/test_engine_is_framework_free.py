"""The engine is a plain library: importing it must not load any web or queue framework."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("django", "celery", "ninja", "plotly", "kombu", "redis")


def test_importing_the_engine_loads_no_framework():
    code = "import sys, contextlab.engine, contextlab.engine.cli; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = [m for m in out.split() if m.split(".")[0] in FORBIDDEN]
    assert loaded == []


def test_engine_sources_do_not_import_frameworks():
    from pathlib import Path

    import contextlab.engine as engine

    root = Path(engine.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")):
                module = stripped.split()[1].lstrip(".")
                if module.split(".")[0] in FORBIDDEN:
                    offenders.append(f"{path.name}: {stripped}")
    assert offenders == []
