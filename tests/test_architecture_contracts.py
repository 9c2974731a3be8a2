"""The import-linter contracts in pyproject.toml hold, and they would catch a breach."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

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
        (
            "contextlab/workspaces/services.py",
            "from contextlab.transcripts import services",
            "The apps are layered",
        ),
        ("contextlab/summaries/services.py", "import contextlab.tuning.verdicts", "The apps are"),
        ("contextlab/workspaces/models.py", "from contextlab.runs import models", "The models are"),
        ("contextlab/engine/measures/tokens.py", "import django", "The engine is framework-free"),
        (
            "contextlab/engine/measures/cost.py",
            "from contextlab.runs import models",
            "The engine knows nothing of the web apps",
        ),
        ("contextlab/celery.py", "import contextlab.jobs.tasks", "The Celery app imports no app"),
        ("contextlab/runs/services.py", "import celery", "Only the Celery app, the tasks module"),
        (
            "contextlab/summaries/services.py",
            "from contextlab.jobs import replay",
            "The job wing is layered",
        ),
        (
            "contextlab/runs/views.py",
            "from contextlab.jobs import lifecycle",
            "Pages and the API parse and render",
        ),
        (
            "contextlab/engine/measures/tokens.py",
            "from contextlab.engine.replay import driver",
            "The engine is laid out as its pipeline",
        ),
        (
            "contextlab/engine/input/session.py",
            "from contextlab.engine.input.sources.claude_code import records",
            "Input: the session cache above the source adapters",
        ),
        (
            "contextlab/engine/input/sources/claude_code/records.py",
            "from contextlab.engine.input.sources import registry",
            "Source adapters: the registry above them",
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
    # a contract with ignored imports says how many after its verdict
    broken = [text for text in proc.stdout.splitlines() if re.search(r" BROKEN( \(.*\))?$", text)]
    assert any(text.startswith(contract) for text in broken), proc.stdout


CONTEXTLAB = ROOT / "contextlab"


def import_graph() -> dict[str, set[str]]:
    """``{module: modules of contextlab it imports}``, function-level imports included (they
    are edges too: only the order of execution hides a cycle they close)."""
    modules: dict[str, Path] = {}
    for path in CONTEXTLAB.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_anywhere_in_contextlab():
    graph = import_graph()
    assert graph["contextlab.jobs.tasks"]  # the graph does hold edges
    assert cycles(graph) == []


def engine_submodule_imports(root: Path) -> list[str]:
    """``path: module`` for each import, outside the engine, of one of the engine's submodules
    (the apps, the CLI and the tests of the web side use ``contextlab.engine`` only)."""
    found = []
    for path in sorted((root / "contextlab").rglob("*.py")):
        if (root / "contextlab" / "engine") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"{path.relative_to(root)}: {name}"
                for name in names
                if name.startswith("contextlab.engine.")
            ]
    return found


def test_the_apps_use_the_engine_only_through_its_public_interface(tmp_path):
    assert engine_submodule_imports(ROOT) == []
    # and the check sees a breach
    (tmp_path / "contextlab" / "runs").mkdir(parents=True)
    (tmp_path / "contextlab" / "runs" / "views.py").write_text(
        "from contextlab.engine.results import as_result\n"
    )
    assert engine_submodule_imports(tmp_path) == [
        "contextlab/runs/views.py: contextlab.engine.results"
    ]
