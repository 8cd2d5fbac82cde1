"""Environment names the runner owns, and the ones nobody but the runner may ever set.

docs/ARCHITECTURE.md, "Probe environment": a probe's environment is layered, lowest first,
runner defaults, the policy's values (passed from the worker or fixed in the file), then
the values a plan sets for names its policy lists under ``plan_environment``; the names
the runner owns are set last and win over all of them. A plan is hostile input, so the
names below are refused wherever a plan or a policy's ``plan_environment`` names them,
compared case-insensitively (``home``, ``Ld_Preload``): a shell or a tool that folds case
must not find a second spelling of a runner-owned name either.

This module imports nothing of the package: the plan model, the policy model, the runner
and the action key all read the same rules from it.
"""

from __future__ import annotations

__all__ = [
    "ENV_NAME_PATTERN",
    "MAX_ENV_VALUE_BYTES",
    "MAX_PLAN_ENVIRONMENT",
    "PLAN_MODULE_PATHS",
    "RUNNER_OWNED",
    "reserved_name",
]

#: A portable environment name: no ``=``, no NUL, nothing a shell would split or expand.
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
#: Longest value a policy may fix or a plan may set (one launch argument's worth).
MAX_ENV_VALUE_BYTES = 4096
#: Most variables one plan may set.
MAX_PLAN_ENVIRONMENT = 32

#: Names the runner sets for every run, pointing into its scratch directory or fixing a
#: tool's behaviour on the read-only source (docs/ARCHITECTURE.md, "Probe environment").
RUNNER_OWNED: frozenset[str] = frozenset(
    {"BYTE_PROBE_SCRATCH", "HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE"}
    | {"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"}
    | {"PIP_CACHE_DIR", "npm_config_cache", "MYPY_CACHE_DIR", "RUFF_CACHE_DIR"}
)
#: Prefixes of the runner's and the settings' own names (docs/ARCHITECTURE.md, "Settings").
_OWNED_PREFIXES = ("BYTE_PROBE_", "ZYTE_AGENT_")
#: What the dynamic linker and the C library read before any program code runs: glibc's
#: list of variables it drops for set-uid programs (``UNSECURE_ENVVARS``) and macOS's
#: ``DYLD_*``. No plan may set one, whatever a policy lists.
_LOADER_NAMES = frozenset(
    {
        "GCONV_PATH",
        "GETCONF_DIR",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "LOCPATH",
        "MALLOC_TRACE",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TZDIR",
    }
)
_LOADER_PREFIXES = ("LD_", "DYLD_", "MALLOC_")

#: Interpreters' module search paths. A relative entry in a value a *plan* sets names a
#: directory of the repository the plan means to import (``PYTHONPATH=src`` for a
#: src-layout project), so it is the plan's stated intent, not a worker's value meant for
#: another directory: the runner's search-path rule passes such entries over (and still
#: refuses them in ``PATH``, where they would make every command a repository file).
PLAN_MODULE_PATHS: frozenset[str] = frozenset(
    {"PYTHONPATH", "NODE_PATH", "PERL5LIB", "PERLLIB", "RUBYLIB", "CLASSPATH"}
)

_OWNED_FOLDED = frozenset(name.upper() for name in RUNNER_OWNED)


def reserved_name(name: str) -> str | None:
    """Why ``name`` (in any case) may never be set by a plan, or None when it may be.

    Runner-owned names, the runner's and settings' prefixes, proxy variables (the
    runtime's, carrying its token) and the dynamic linker's and C library's variables.
    """
    folded = name.upper()
    if folded in _OWNED_FOLDED or folded.startswith(_OWNED_PREFIXES):
        return "the runner sets it for every run"
    if folded.endswith("_PROXY"):
        return "proxy variables belong to the sandbox runtime and carry its token"
    if folded in _LOADER_NAMES or folded.startswith(_LOADER_PREFIXES):
        return "the dynamic linker or C library reads it before any program code runs"
    return None
