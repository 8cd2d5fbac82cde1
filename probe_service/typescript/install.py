"""Locate and verify the TypeScript boundary worker install (``tsboundary/``).

docs/ARCHITECTURE.md, "TypeScript boundary": the worker and the pinned compiler are
verified like the Sandbox Runtime: the installed ``typescript`` says the pinned version,
and one SHA-256 over the worker's own files (``boundary.cjs``, ``routes.cjs``,
``positions.cjs``) and the whole ``node_modules`` tree equals
``tsboundary/worker.sha256``. A root caller whose checkout the probe uids cannot reach
gets a staged, root-owned, world-readable copy, verified again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from probe_service.sandbox.runtime import (
    Fingerprint,
    check_pinned_package,
    runtime_tree_digest,
    verified_install,
    verify_fingerprints,
    write_digest_file,
)
from probe_service.settings import WORKER_DIR_ENV, read_settings

__all__ = [
    "PINNED_TYPESCRIPT",
    "WORKER_DIR_ENV",
    "WORKER_FILE",
    "WorkerInstall",
    "default_worker_dir",
    "locate_worker",
    "verify_worker_unchanged",
    "worker_tree_digest",
]

PINNED_TYPESCRIPT = "5.9.3"
WORKER_FILE = "boundary.cjs"
DIGEST_FILE = "worker.sha256"
#: The worker's own files beside ``node_modules`` (the entry point first).
_OWN_FILES = (WORKER_FILE, "routes.cjs", "positions.cjs")
#: Where a root caller keeps copies of the verified worker that probe uids can read.
STAGING_DIR = Path("/var/lib/byte-probe/tsboundary")


@dataclass(frozen=True)
class WorkerInstall:
    """A verified worker install: its directory, entry file and digest."""

    install_dir: Path
    worker_path: Path
    digest: str
    fingerprints: tuple[Fingerprint, ...]


def default_worker_dir() -> Path:
    """Return ``$BYTE_PROBE_TSBOUNDARY_DIR`` or ``<repo>/tsboundary`` beside the package,
    read like ``default_install_dir`` (docs/ARCHITECTURE.md, "Settings"). Raises
    SettingsError."""
    return read_settings().tsboundary_dir


def worker_tree_digest(install_dir: Path) -> tuple[str, tuple[Fingerprint, ...]]:
    """Digest of the worker's own files and every file and link under ``node_modules``.

    Raises ``SandboxUnavailable`` (``sandbox_unverified``) like the runtime digest.
    """
    return runtime_tree_digest(install_dir, _OWN_FILES)


def _check_version(install_dir: Path) -> None:
    manifest = install_dir / "node_modules" / "typescript" / "package.json"
    check_pinned_package(manifest, PINNED_TYPESCRIPT, "TypeScript", named=manifest)


def locate_worker(install_dir: Path | None = None) -> WorkerInstall:
    """Verify the worker in ``install_dir``; raises ``SandboxUnavailable`` (with reason)."""
    root = Path(os.path.realpath(install_dir or default_worker_dir()))
    _check_version(root)
    root, digest, prints = verified_install(root, _OWN_FILES, DIGEST_FILE, STAGING_DIR, "worker")
    return WorkerInstall(root, root / WORKER_FILE, digest, prints)


def verify_worker_unchanged(worker: WorkerInstall) -> None:
    """Cheaply confirm no worker file changed since verification; raises ``SandboxUnavailable``."""
    verify_fingerprints(worker.install_dir, worker.fingerprints, _OWN_FILES)


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    # Regenerates tsboundary/worker.sha256 after a change to the worker's own files:
    # `python -m probe_service.typescript.install [DIR]`.
    import sys

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else default_worker_dir()
    write_digest_file(target, _OWN_FILES, DIGEST_FILE)
