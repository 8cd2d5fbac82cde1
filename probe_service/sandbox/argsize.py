"""What a probe's arguments cost on the launch path, and the most that path can carry.

srt 0.0.55 receives our whole command as ONE ``-c`` string (see ``launch.py``), quotes
it with shell-quote up to three more times (the seccomp wrapper, the proxy script, the
bwrap command line) and hands the result to ``/bin/sh -c`` as ONE argument. Linux caps a
single argument at MAX_ARG_STRLEN = 32 pages = 131,072 bytes; past it the launch fails
with E2BIG and the run would end ``sandbox_failed``. So a plan's arguments are bounded
by their size *after* that quoting, counted per character as the worst the three
levels can make of it (docs/ARCHITECTURE.md, "Launch size"):

* plain bytes (letters, digits, ``-./_%+``, space, non-ASCII) cost 1 each;
* a character shell-quote escapes with a backslash (``#!"$&()*,:;<=>?@[\\]^`{|}~``)
  costs 8 (each level may double it);
* a single quote costs 65 (``'`` becomes ``'"'"'`` at each level);

all counted on the ``shlex.quote`` form we build, plus one separator per argument.
Measured on this machine by bisecting real launches of ``true`` (4 KiB arguments, no
allowed domains) through the runner as of the probe-identity and network-guard launch:
plain arguments of 98,240 bytes in all still launched (so the fixed part of the launch,
prefix, guard, environment and mounts, took about 32 KiB), as did 448 single quotes
(about 219 bytes each once the fixed part's own quotes grow with them) and 448 ``'!``
pairs. The limit, 64 KiB, stays under every one of those by more than 29 KiB, room for a
longer fixed part; ``tests/security/test_launch_size.py`` launches plans at the limit
with plain, quote and ``'!`` content through the real sandbox.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

__all__ = ["MAX_LAUNCH_ARG_BYTES", "launch_arg_bytes"]

#: Most launch bytes (see above) all arguments of one probe may take together.
MAX_LAUNCH_ARG_BYTES = 64 * 1024

#: Quoting levels srt 0.0.55 applies to our command string (network and seccomp on).
_LEVELS = 3
#: What shell-quote escapes with a backslash (its last branch), besides the quotes.
_ESCAPED = frozenset('#!"$&()*,:;<=>?@[\\]^`{|}~')


def _costs(levels: int) -> dict[str, int]:
    """Worst-case bytes one character becomes after ``levels`` shell-quote passes."""
    plain, escaped, quote = 1, 1, 1
    for _ in range(levels):
        # ' -> '"'"' (three quotes, two escaped-class quotes); x -> \x (two escaped-class).
        plain, escaped, quote = plain, 2 * escaped, 3 * quote + 2 * escaped
    return {"plain": plain, "escaped": escaped, "quote": quote}


_COST = _costs(_LEVELS)


def launch_arg_bytes(args: Sequence[str]) -> int:
    """Return the worst-case bytes ``args`` take in the single string srt hands the shell."""
    total = 0
    for arg in args:
        quoted = shlex.quote(arg)
        quotes = quoted.count("'")
        escaped = sum(quoted.count(char) for char in _ESCAPED)
        plain = len(quoted.encode("utf-8", "surrogatepass")) - quotes - escaped
        total += (
            plain * _COST["plain"]
            + escaped * _COST["escaped"]
            + quotes * _COST["quote"]
            + 1  # the separating space
        )
    return total
