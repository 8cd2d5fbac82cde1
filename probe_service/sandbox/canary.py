"""The canary: before every probe, prove the exact settings hide a fresh host secret.

seed 000: "a canary launches through the exact generated settings and must
fail to read a fresh host-side secret outside HOME; this detects the runtime's
permissive invalid-settings fallback" (srt 0.0.55 given a missing or invalid
settings file prints a message and runs the command with no filesystem limit).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from probe_service.sandbox.launch import Launch
from probe_service.sandbox.limits import RunCgroup
from probe_service.sandbox.process import run_bounded

__all__ = ["CANARY_READER", "CANARY_TIMEOUT_SECONDS", "CanaryVerdict", "run_canary"]

#: A fixed system reader, launched exactly the way the probe will be.
CANARY_READER = "/bin/cat"
CANARY_TIMEOUT_SECONDS = 30
_BUDGET = 64 * 1024


@dataclass(frozen=True)
class CanaryVerdict:
    """``held`` is True only if the reader failed and printed none of the secret.

    Otherwise ``reason`` is ``canary_readable``, ``network_filter_failed`` when
    the runtime ran without our network guard, or ``sandbox_failed`` when the
    sandboxed shell never started (so nothing was proven either way).
    """

    held: bool
    reason: str | None
    detail: str


def _secret_dir(allowed_roots: Sequence[Path]) -> Path:
    # Outside HOME and outside every allowed path, in the host's temp dir.
    directory = Path(tempfile.mkdtemp(prefix="byte-probe-canary-"))
    # World-readable on purpose: only the sandbox, not file modes or the
    # probe's dropped uid, may be what stops the reader.
    directory.chmod(0o755)
    real = Path(os.path.realpath(directory))
    home = Path(os.path.realpath(Path.home()))
    for root in [home, *allowed_roots]:
        if real == root or root in real.parents:
            shutil.rmtree(directory)
            raise OSError(f"canary dir {real} falls inside {root}")
    return directory


def run_canary(
    launch: Launch, allowed_roots: Sequence[Path] = (), cgroup: RunCgroup | None = None
) -> CanaryVerdict:
    """Try to read a fresh secret through ``launch``; raises ``OSError`` if it cannot start."""
    directory = _secret_dir([Path(os.path.realpath(root)) for root in allowed_roots])
    try:
        secret = secrets.token_hex(32).encode("ascii")
        target = directory / "secret"
        target.write_bytes(secret)
        target.chmod(0o644)
        outcome = run_bounded(
            launch.argv(CANARY_READER, [str(target)]),
            env=launch.runtime_env,
            cwd=launch.cwd,
            timeout_seconds=CANARY_TIMEOUT_SECONDS,
            budget=_BUDGET,
            skip_stdout_prefix=len(launch.nonce),
            cgroup=cgroup,
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    leaked = secret in outcome.prefix + outcome.stdout + outcome.stderr
    if leaked:
        return CanaryVerdict(False, "canary_readable", "the canary read the host secret")
    if outcome.prefix == launch.unguarded_marker.encode("ascii"):
        detail = "the network guard was not active in the runtime"
        return CanaryVerdict(False, "network_filter_failed", detail)
    if outcome.prefix != launch.nonce.encode("ascii"):
        return CanaryVerdict(False, "sandbox_failed", "the sandboxed canary never started")
    if outcome.status != "ok" or outcome.exit_code == 0:
        detail = f"canary reader did not fail ({outcome.status}, exit {outcome.exit_code})"
        return CanaryVerdict(False, "canary_readable", detail)
    return CanaryVerdict(True, None, "")
