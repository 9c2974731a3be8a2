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
        ("contextlab/runs/services.py", "import celery", "Only the Celery app, the tasks modules"),
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


def module_import_cycles(package: str) -> list[list[str]]:
    """Every group of modules that import each other in a loop (run-time imports; imports under
    ``TYPE_CHECKING`` are left out), by Tarjan's strongly connected components."""
    import grimp

    graph = grimp.build_graph(package, exclude_type_checking_imports=True, cache_dir=None)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges.get(module, []):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return cycles


def test_no_module_of_contextlab_takes_part_in_an_import_cycle():
    assert module_import_cycles("contextlab") == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "loopdemo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from loopdemo import b\n")
    (pkg / "b.py").write_text("from loopdemo import c\n")
    (pkg / "c.py").write_text("from loopdemo import a\n")
    (pkg / "d.py").write_text("from loopdemo import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_import_cycles("loopdemo") == [["loopdemo.a", "loopdemo.b", "loopdemo.c"]]
