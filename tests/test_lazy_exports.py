"""Exports imported on first use (docs/ARCHITECTURE.md, "Start-up").

Every module that builds its ``__getattr__`` with ``lazy_exports`` is checked here: what it
lists in ``__all__`` is exactly what its ``if TYPE_CHECKING:`` block imports, every name
resolves to the object its defining module holds, and no export is hidden behind a
submodule of the same name.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import probe_service
from probe_service._lazy import _exports

_ROOT = Path(probe_service.__file__).parent


def _lazy_modules() -> list[str]:
    found = []
    for path in sorted(_ROOT.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if "__getattr__, __dir__ = lazy_exports(__name__, __file__)" in lines:
            parts = path.relative_to(_ROOT.parent).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


LAZY = _lazy_modules()


def test_the_packages_that_should_be_lazy_are() -> None:
    """Each part's package defers its exports; a new eager one would slow every command."""
    expected = {
        "probe_service.claims",
        "probe_service.plans",
        "probe_service.policies",
        "probe_service.queue",
        "probe_service.sandbox",
        "probe_service.service",
        "probe_service.service.adapters",
        "probe_service.snapshot",
        "probe_service.store",
        "probe_service.toolchains",
        "probe_service.web",
    }
    assert expected <= set(LAZY)


@pytest.mark.parametrize("name", LAZY)
def test_all_lists_exactly_the_deferred_imports(name: str) -> None:
    module = importlib.import_module(name)
    table = _exports(name, str(module.__file__))
    assert table, f"{name}: no imports under 'if TYPE_CHECKING:'"
    assert sorted(table) == sorted(module.__all__)


@pytest.mark.parametrize("name", LAZY)
def test_every_export_resolves_to_its_definition(name: str) -> None:
    module = importlib.import_module(name)
    for export, source in _exports(name, str(module.__file__)).items():
        value = getattr(module, export)
        assert value is getattr(importlib.import_module(source), export), export
        assert export in dir(module)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018 (the attribute access is the test)


@pytest.mark.parametrize("name", [n for n in LAZY if n != "probe_service.service.adapters"])
def test_no_export_shares_a_submodule_name(name: str) -> None:
    """Importing ``pkg.x`` sets ``pkg.x`` to the module: an export named ``x`` would vanish."""
    module = importlib.import_module(name)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert submodules & set(module.__all__) == set()


def test_importing_a_package_imports_none_of_its_parts() -> None:
    """A fresh interpreter importing every lazy package loads none of their submodules."""
    code = (
        "import sys\n"
        f"for name in {LAZY!r}:\n"
        "    __import__(name)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('probe_service.'))\n"
        "print('\\n'.join(loaded))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    parts = set(done.stdout.split()) - set(LAZY) - {"probe_service._lazy"}
    assert parts == set()
