"""Search paths a probe may be given: every entry absolute, none empty.

docs/ARCHITECTURE.md, "Probe environment": the probe runs with the snapshot as its working
directory, so an empty or relative entry of a search path (``PATH=:/usr/bin:/bin``,
``PYTHONPATH=src``) makes a loader find repository files first: a repository file named
``cat`` would run wherever a command says ``cat``. The worker's value is meant for the
worker's own working directory and means something else in the sandbox, so such a value is
refused, never rewritten, and the run ends ``inconclusive`` (``unsafe_search_path``).

Like ``envnames``, it imports nothing of the package: the policy model judges the values a
policy fixes with it when the file is read, and the runner the whole probe environment.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

__all__ = ["SEARCH_PATH_VARIABLES", "unsafe_search_path"]

#: Variables a loader reads as a list of places to search, with the separators it splits on:
#: the shell and ``execvp`` (``PATH``), the dynamic loader and glibc (``LD_*``,
#: ``GCONV_PATH``), and the interpreters' module loaders.
SEARCH_PATH_VARIABLES: Mapping[str, str] = {
    "PATH": ":",
    "LD_LIBRARY_PATH": ":;",
    "LD_PRELOAD": ": ",
    "LD_AUDIT": ":",
    "GCONV_PATH": ":",
    "PYTHONPATH": ":",
    "NODE_PATH": ":",
    "PERL5LIB": ":",
    "PERLLIB": ":",
    "RUBYLIB": ":",
    "CLASSPATH": ":",
}


def unsafe_search_path(env: Mapping[str, str], exempt: Collection[str] = ()) -> str | None:
    """Return what is wrong with the first search path in ``env`` that has an empty or relative
    entry (naming the variable and the entry), or None when every one is absolute.

    ``exempt`` names are not judged: an interpreter's module path a plan set itself, whose
    relative entries name the repository directories it means to import (``envnames``).
    """
    for name, separators in SEARCH_PATH_VARIABLES.items():
        value = env.get(name)
        if value is None or name in exempt:
            continue
        for index, entry in enumerate(re.split(f"[{re.escape(separators)}]", value)):
            if entry == "":
                what = "is empty (the working directory, inside the snapshot)"
            elif not entry.startswith("/"):
                what = f"{entry!r} is relative (to the working directory, inside the snapshot)"
            else:
                continue
            return (
                f"{name}: entry {index} {what}; repository files would be found first. "
                f"Give the worker a {name} of absolute entries only, or stop passing it"
            )
    return None
