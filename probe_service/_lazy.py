"""Package exports imported on first use (PEP 562), so that a command imports only what it
touches (docs/ARCHITECTURE.md, "Start-up").

A package lists its exports once, as imports under ``if TYPE_CHECKING:`` in its
``__init__``: the type checker reads them as ordinary imports, and ``lazy_exports`` reads
the same block from the source to learn which submodule defines each name. This is the
"attach stub" pattern of Scientific Python's SPEC 1, with the package's own ``__init__`` as
the stub. An exported name must not also be the name of one of the package's submodules:
importing that submodule would set the package attribute to the module and hide the export
(``tests/test_lazy_exports.py`` checks every package).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["lazy_exports"]


def _exports(module_name: str, init_file: str) -> dict[str, str]:
    """Exported name → absolute module name, from the ``if TYPE_CHECKING:`` block."""
    # Relative imports are anchored at the module's package (itself, for an ``__init__``).
    anchor = sys.modules[module_name].__package__ or module_name
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"), init_file)
    found: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                raise TypeError(f"{init_file}: only 'from … import …' belongs in the block")
            if statement.level:
                module = importlib.util.resolve_name(
                    "." * statement.level + (statement.module or ""), anchor
                )
            else:
                module = statement.module or ""
            for alias in statement.names:
                found[alias.asname or alias.name] = module
    return found


def lazy_exports(
    package: str, init_file: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package (or module) whose exports load on
    first use: ``__getattr__, __dir__ = lazy_exports(__name__, __file__)``."""
    table: dict[str, str] | None = None

    def getattr_(name: str) -> Any:
        nonlocal table
        if table is None:
            table = _exports(package, init_file)
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        nonlocal table
        if table is None:
            table = _exports(package, init_file)
        return sorted(set(vars(sys.modules[package])) | set(table))

    return getattr_, dir_
