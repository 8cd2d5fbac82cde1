"""Compare dotted version strings ("1.10" is newer than "1.9")."""


def parse(version: str) -> tuple[int, ...]:
    """The numeric parts of ``version``; raises ValueError for anything else."""
    return tuple(int(part) for part in version.split("."))


def newer(a: str, b: str) -> bool:
    """Whether ``a`` is a later version than ``b``."""
    return parse(a) > parse(b)
