"""Every operation of the table as a method of ``ProbeService``.

At run time each method forwards its keyword parameters to ``invoke``; the types mypy and
an IDE see (each operation's request fields and response) are in ``methods.pyi``,
generated from the table by ``python -m probe_service.service.stubs --write`` and checked
against it by tests/service/test_typed_face.py (docs/ARCHITECTURE.md, "The operation
table"). Defining the methods imports no row: a row's module loads when it is called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .rows import INDEX

__all__ = ["OperationMethods"]


class OperationMethods:
    """The operations as methods; ``invoke`` runs one (``ProbeService`` defines it)."""

    def invoke(self, name: str, /, **params: Any) -> Any:
        """Run operation ``name``; a subclass defines it."""
        raise NotImplementedError


def _method(name: str) -> Callable[..., Any]:
    def method(self: OperationMethods, /, **params: Any) -> Any:
        return self.invoke(name, **params)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Run the ``{name}`` operation (its description: ``capabilities``)."
    return method


for _name in INDEX:
    setattr(OperationMethods, _name, _method(_name))
