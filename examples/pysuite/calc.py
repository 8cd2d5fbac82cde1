"""A tiny calculator: the project the toolchain walkthrough runs as a probe."""


def add(a: float, b: float) -> float:
    """Return a + b."""
    return a + b


def safe_divide(a: float, b: float) -> float | None:
    """Return a / b, or None when b is zero (as the docstring promises).

    The bug the failing test finds: division by zero is not caught.
    """
    return a / b
