"""The engine package's names: what type checkers see equals what is loaded, and every name works."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

from contextlab import engine

INIT = Path(engine.__file__)


def type_checking_names() -> set[str]:
    tree = ast.parse(INIT.read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            names: set[str] = set()
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                names.update(alias.asname or alias.name for alias in statement.names)
            return names
    raise AssertionError("no TYPE_CHECKING block in contextlab/engine/__init__.py")


def test_the_lazily_loaded_names_are_the_ones_type_checkers_see():
    assert set(engine._LAZY) == type_checking_names()


def test_every_exported_name_resolves_and_lazy_ones_come_from_their_module():
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    for name, (module, attribute) in engine._LAZY.items():
        source = importlib.import_module(f"contextlab.engine{module}")
        expected = source if attribute is None else getattr(source, attribute)
        assert getattr(engine, name) is expected, name


def test_lazy_names_are_exported():
    assert set(engine._LAZY) <= set(engine.__all__)


def test_preloading_imports_every_lazily_loaded_module_in_a_fresh_process():
    """A worker at start-up: what the engine loads on first use, loaded at once."""
    modules = sorted({f"contextlab.engine{module}" for module, _ in engine._LAZY.values()})
    code = (
        "import sys\n"
        "from contextlab import engine\n"
        f"modules = {modules!r}\n"
        "before = [m for m in modules if m in sys.modules]\n"
        "engine.preload_lazy_modules()\n"
        "print(len(before), sum(m in sys.modules for m in modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=INIT.parents[2], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split())
    assert before < len(modules)  # importing the engine leaves some for their first use
    assert after == len(modules)
