"""The import-linter contracts in pyproject.toml hold, and they would catch a breach."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"}  # one line per contract
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_contract_is_kept():
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("contextlab/engine/tokens.py", "import django", "The engine is framework-free"),
        (
            "contextlab/engine/cost.py",
            "from contextlab.runs import models",
            "The engine knows nothing of the web apps",
        ),
        ("contextlab/celery.py", "import contextlab.runs.tasks", "The Celery app imports no app"),
        (
            "contextlab/summaries/services.py",
            "from contextlab.runs import runner",
            "The job wing is layered",
        ),
        (
            "contextlab/runs/views.py",
            "from contextlab.runs import lifecycle",
            "Pages and the API parse and render",
        ),
    ],
)
def test_a_breach_of_each_contract_is_reported(tmp_path, module, line, contract):
    shutil.copytree(
        ROOT / "contextlab", tmp_path / "contextlab", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    proc = lint_imports(tmp_path)
    assert proc.returncode != 0
    broken = [text for text in proc.stdout.splitlines() if text.endswith("BROKEN")]
    assert any(text.startswith(contract) for text in broken), proc.stdout
