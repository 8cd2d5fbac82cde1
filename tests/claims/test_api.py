"""The public surface of probe_service.claims."""

from __future__ import annotations

import inspect

import probe_service.claims as claims


def test_every_exported_name_exists() -> None:
    """``__all__`` names only what the package really exports, once each."""
    assert len(set(claims.__all__)) == len(claims.__all__)
    assert [name for name in claims.__all__ if not hasattr(claims, name)] == []


def test_every_operation_is_documented() -> None:
    """Each exported function has a docstring."""
    functions = [
        getattr(claims, n) for n in claims.__all__ if inspect.isfunction(getattr(claims, n))
    ]
    assert [f for f in functions if not (f.__doc__ or "").strip()] == []
