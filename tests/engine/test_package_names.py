"""The engine package's names: what type checkers see equals what is loaded, and every name works."""

from __future__ import annotations

import ast
import importlib
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
