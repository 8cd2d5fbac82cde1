"""The host checks behind ``byte-probe doctor``: one line per prerequisite, with its fix.

Checks what `make setup` installs and the sandbox needs (docs/ARCHITECTURE.md,
"Containment" and "Storage and deployment"). These look below the operation table — the
runtime install, system tools, the kernel mechanism, the policy and key files, Redis —
so they live at the service layer, and the CLI prints them (docs/ARCHITECTURE.md,
"Layers"). Each check imports the part it inspects when it runs, so a command imports only
what it touches ("Start-up"). A failing check is a line of the report, never an error.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ProbeServiceError
from ..settings import REDIS_URL_ENV, Settings

__all__ = ["Check", "CheckGroup", "check_groups", "worker_defaults"]

#: A named group of checks, run in order; a group that crashes is one failing line.
CheckGroup = tuple[str, Callable[[], list["Check"]]]


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, whether it holds, and the fix if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def _runtime(settings: Settings) -> list[Check]:
    from ..sandbox import PINNED_VERSION, locate_runtime

    try:
        runtime = locate_runtime(settings.sandbox_dir)
    except ProbeServiceError as exc:
        return [Check("runtime digest", False, str(exc), "run `make setup`")]
    return [Check("runtime digest", True, f"sandbox runtime {PINNED_VERSION}, {runtime.digest}")]


def _typescript_worker(settings: Settings) -> list[Check]:
    from ..typescript.install import PINNED_TYPESCRIPT, locate_worker

    try:
        worker = locate_worker(settings.tsboundary_dir)
    except ProbeServiceError as exc:
        return [Check("typescript worker", False, str(exc), "run `make setup`")]
    detail = f"typescript {PINNED_TYPESCRIPT}, {worker.digest}"
    return [Check("typescript worker", True, detail)]


def _tools() -> list[Check]:
    from ..sandbox.runtime import find_system_tool

    checks = []
    for name, tool, package in (
        ("bubblewrap", "bwrap", "bubblewrap"),
        ("socat", "socat", "socat"),
        ("ripgrep", "rg", "ripgrep"),
        # util-linux: every launch is nsenter + unshare + setpriv, every probe under prlimit.
        ("setpriv", "setpriv", "util-linux"),
        ("unshare", "unshare", "util-linux"),
        ("nsenter", "nsenter", "util-linux"),
        ("prlimit", "prlimit", "util-linux"),
    ):
        found = find_system_tool(tool)
        fix = f"install it: apt-get install {package} (or `make setup`)"
        checks.append(Check(name, found is not None, str(found or f"{tool} not found"), fix))
    return checks


def _privileges() -> list[Check]:
    from ..sandbox.requirements import REQUIRED_CAPABILITIES, missing_capabilities

    uid = os.geteuid()
    root = Check(
        "root",
        uid == 0,
        "running as root" if uid == 0 else f"running as uid {uid}",
        "run the worker as root: it starts each probe as its own unprivileged slot uid",
    )
    missing = missing_capabilities()
    if missing:
        detail = "missing " + "; ".join(f"{name} ({why})" for name, why in missing.items())
    else:
        detail = f"the {len(REQUIRED_CAPABILITIES)} the containment uses are held"
    fix = "grant them: cap_add in compose.yaml, CapabilityBoundingSet in the systemd unit"
    return [root, Check("capabilities", not missing, detail, fix)]


def _cgroups() -> list[Check]:
    from ..sandbox.requirements import cgroup_support

    support = cgroup_support()
    fix = (
        "run workers on a host with cgroup v1 memory and pids hierarchies, e.g. booted with "
        'systemd.unified_cgroup_hierarchy=0 (README, "A farm on several hosts")'
    )
    return [Check("cgroups", support.supported, support.detail, fix)]


def _identity() -> list[Check]:
    from ..sandbox.selfcheck import describe_mechanism

    fix = "run the worker as root on Linux with cgroup v1 (SECURITY.md, Deployment requirements)"
    return [
        Check("mechanism", "NOT verified" not in line, line, fix) for line in describe_mechanism()
    ]


def _launch(settings: Settings) -> list[Check]:
    from ..sandbox import locate_runtime
    from ..sandbox.requirements import check_sandboxed_launch

    try:
        detail = check_sandboxed_launch(locate_runtime(settings.sandbox_dir))
    except ProbeServiceError as exc:
        reason = getattr(exc, "reason", type(exc).__name__)
        fix = 'the reason names what is missing (README, "What doctor must say")'
        return [Check("sandboxed launch", False, f"{reason}: {exc}", fix)]
    return [Check("sandboxed launch", True, detail)]


def _policy(settings: Settings) -> list[Check]:
    from ..policies import check_policy_file

    path = settings.policy_file
    try:
        info = path.lstat()
    except OSError:
        return [Check("policy file", False, f"{path}: missing", f"create {path} (README)")]
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 or info.st_uid != os.geteuid():
        detail = f"{path}: mode {mode:o}, owner uid {info.st_uid}"
        return [Check("policy file", False, detail, f"chown $USER {path} && chmod 600 {path}")]
    try:
        policies = check_policy_file(path)
    except ProbeServiceError as exc:
        return [Check("policy file", False, str(exc), f"fix {path}: `byte-probe policy check`")]
    return [Check("policy file", True, f"{path}: mode {mode:o}, {len(policies)} policies")]


def _redis(settings: Settings) -> list[Check]:
    url = settings.redis_url
    if not url:
        return []
    import redis

    try:
        redis.Redis.from_url(url, socket_timeout=3).ping()
    except redis.RedisError as exc:
        return [Check("redis", False, str(exc), f"start Redis or correct {REDIS_URL_ENV}")]
    return [Check("redis", True, "answers PING")]


def _signing_key(settings: Settings) -> list[Check]:
    from ..plans.signing import configured_signing_key

    try:
        key = configured_signing_key(settings)
    except ProbeServiceError as exc:
        fix = "chmod 600 the key file, or create one with `byte-probe key create`"
        return [Check("signing key", False, str(exc), fix)]
    if key is None:
        detail = f"none at {settings.signing_key}: receipts are unsigned"
        return [Check("signing key", True, detail)]
    return [Check("signing key", True, f"fingerprint {key.fingerprint}")]


def worker_defaults() -> dict[str, int]:
    """The size a worker process started here takes by default (docs/ARCHITECTURE.md,
    "Pipelined worker"): usable and online cores, lanes, threads and prefetch."""
    from ..queue.sizing import worker_size

    return worker_size().as_json()


def _worker_size() -> list[Check]:
    from ..queue.sizing import worker_size

    return [Check("worker size", True, f"by default {worker_size().describe()}")]


def check_groups(settings: Settings, store: Callable[[], list[Check]]) -> list[CheckGroup]:
    """Every group of checks in the order ``doctor`` prints them; ``store`` is the face's
    own check of opening its session's store."""
    return [
        ("runtime digest", lambda: _runtime(settings)),
        ("typescript worker", lambda: _typescript_worker(settings)),
        ("tools", _tools),
        ("privileges", _privileges),
        ("cgroups", _cgroups),
        ("probe identity", _identity),
        ("sandboxed launch", lambda: _launch(settings)),
        ("policy file", lambda: _policy(settings)),
        ("signing key", lambda: _signing_key(settings)),
        ("store", store),
        ("redis", lambda: _redis(settings)),
        ("worker size", _worker_size),
    ]
