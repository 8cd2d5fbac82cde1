"""Verification of the pinned runtime install."""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox import (
    PINNED_VERSION,
    SandboxResult,
    SandboxRuntime,
    locate_runtime,
    run_sandboxed,
)
from probe_service.sandbox import runtime as runtime_module
from probe_service.sandbox.runtime import check_pinned_package
from probe_service.sandbox.slots import RunSlot

from .conftest import make_policy

pytestmark = pytest.mark.sandbox

CLI = Path("node_modules/@anthropic-ai/sandbox-runtime/dist/cli.js")


def _copy_install(runtime: SandboxRuntime, target: Path) -> Path:
    shutil.copytree(runtime.install_dir, target, symlinks=True)
    return target


def test_installed_runtime_verifies(runtime: SandboxRuntime) -> None:
    """The repository's install matches the recorded digest and pinned version."""
    recorded = (runtime.install_dir / "runtime.sha256").read_text().split()[0]
    assert runtime.digest == recorded
    assert PINNED_VERSION == "0.0.55"


def test_altered_file_is_unverified(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """Changing one byte of a copied install makes verification fail with sandbox_unverified."""
    copy = _copy_install(runtime, tmp_path / "sandbox")
    with (copy / CLI).open("a") as handle:
        handle.write("\n// altered\n")
    with pytest.raises(SandboxUnavailable) as caught:
        locate_runtime(copy)
    assert caught.value.reason == "sandbox_unverified"


@pytest.mark.parametrize("change", ["altered", "missing", "not-executable"])
@pytest.mark.parametrize("name", [runtime_module.LAUNCHER, runtime_module.BWRAP_GUARD])
def test_the_launcher_and_the_bwrap_guard_are_part_of_the_digest(
    runtime: SandboxRuntime, tmp_path: Path, change: str, name: str
) -> None:
    """An altered, missing or no longer executable launcher.mjs or bwrap-guard.sh fails
    verification before any helper starts or any bubblewrap runs."""
    copy = _copy_install(runtime, tmp_path / "sandbox")
    own = copy / name
    if change == "missing":
        own.unlink()
    elif change == "altered":
        with own.open("a") as handle:
            handle.write("\n// altered\n" if name.endswith(".mjs") else "\n# altered\n")
    else:
        own.chmod(own.stat().st_mode ^ (0o111 if name.endswith(".sh") else 0o100))
    with pytest.raises(SandboxUnavailable) as caught:
        locate_runtime(copy)
    assert caught.value.reason == "sandbox_unverified"


def test_wrong_version_is_unverified(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """An install reporting another version is refused as sandbox_unverified."""
    copy = _copy_install(runtime, tmp_path / "sandbox")
    manifest = copy / "node_modules/@anthropic-ai/sandbox-runtime/package.json"
    manifest.write_text(manifest.read_text().replace('"0.0.55"', '"0.0.56"', 1))
    with pytest.raises(SandboxUnavailable) as caught:
        locate_runtime(copy)
    assert caught.value.reason == "sandbox_unverified"


def test_missing_install_is_a_missing_prerequisite(tmp_path: Path) -> None:
    """An empty install dir is sandbox_prerequisite_missing and says how to fix it."""
    with pytest.raises(SandboxUnavailable) as caught:
        locate_runtime(tmp_path)
    assert caught.value.reason == "sandbox_prerequisite_missing"
    assert "make setup" in str(caught.value)


def test_change_after_verification_ends_inconclusive(
    runtime: SandboxRuntime, tmp_path: Path
) -> None:
    """A runtime file altered after locate_runtime makes run_sandboxed return sandbox_unverified."""
    copy = _copy_install(runtime, tmp_path / "sandbox")
    verified = locate_runtime(copy)
    with (copy / CLI).open("a") as handle:
        handle.write("\n// altered\n")
    (tmp_path / "snap").mkdir()
    (tmp_path / "scratch").mkdir()
    result = run_sandboxed(
        environment=os.environ,
        policy=make_policy(),
        executable="true",
        args=[],
        snapshot_dir=tmp_path / "snap",
        scratch_dir=tmp_path / "scratch",
        runtime=verified,
    )
    assert (result.status, result.reason) == ("inconclusive", "sandbox_unverified")


def test_default_install_dir_honours_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BYTE_PROBE_SANDBOX_DIR overrides the repository's sandbox/ directory."""
    from probe_service.sandbox import default_install_dir

    monkeypatch.setenv("BYTE_PROBE_SANDBOX_DIR", str(tmp_path))
    assert default_install_dir() == tmp_path


class TestStaging:
    """A checkout the probe uids cannot reach (e.g. under /root) is staged and re-verified."""

    @pytest.fixture
    def private_install(self, runtime: SandboxRuntime, tmp_path: Path) -> Path:
        private = tmp_path / "private"
        private.mkdir(mode=0o700)
        shutil.copytree(runtime.install_dir, private / "sandbox", symlinks=True)
        return private / "sandbox"

    @pytest.mark.skipif(os.geteuid() != 0, reason="staging is a root worker's")
    def test_unreachable_install_is_staged_and_verified(
        self, private_install: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The staged copy is outside the private dir and has the same digest."""
        monkeypatch.setattr(runtime_module, "STAGING_DIR", tmp_path / "staging")
        staged = locate_runtime(private_install)
        assert staged.install_dir.parent == tmp_path / "staging"
        assert staged.digest == locate_runtime().digest

    @pytest.mark.skipif(os.geteuid() != 0, reason="staging is a root worker's")
    def test_tampered_staged_copy_is_refused(
        self, private_install: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A staged copy changed after staging fails verification, never runs."""
        monkeypatch.setattr(runtime_module, "STAGING_DIR", tmp_path / "staging")
        staged = locate_runtime(private_install)
        (staged.install_dir / runtime_module.NET_GUARD).write_text("// tampered\n")
        with pytest.raises(SandboxUnavailable) as caught:
            locate_runtime(private_install)
        assert caught.value.reason == "sandbox_unverified"


GUARD = Path(runtime_module.BWRAP_GUARD)
DIST = CLI.parent


def _rewrite_same_size(path: Path) -> None:
    """One byte changed in place, the size kept and the old atime and mtime restored."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[-2] = ord("x") if data[-2] != ord("x") else ord("y")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _replace_by_link(path: Path) -> None:
    """The same bytes, now behind a link to a copy beside the install."""
    copy = path.parent.parent / f".{path.name}.copy"
    shutil.copy2(path, copy)
    path.unlink()
    path.symlink_to(copy)


def _replace_dir_by_link(path: Path) -> None:
    """A whole directory renamed away and a link to it put in its place: same files."""
    moved = path.with_name(f".{path.name}.moved")
    path.rename(moved)
    path.symlink_to(moved.name)


#: A change to the runtime between two runs: where, and how.
CHANGES: dict[str, tuple[Path, Callable[[Path], object]]] = {
    "content": (CLI, lambda p: p.write_bytes(p.read_bytes() + b"\n// altered\n")),
    "same-size-restored-mtime": (CLI, _rewrite_same_size),
    "chmod": (GUARD, lambda p: p.chmod(p.stat().st_mode ^ 0o100)),
    "chmod-world-writable": (CLI, lambda p: p.chmod(p.stat().st_mode | 0o002)),
    "file-replaced-by-link": (CLI, _replace_by_link),
    "directory-replaced-by-link": (DIST / "sandbox", _replace_dir_by_link),
    "file-added": (DIST / "utils" / "extra.js", lambda p: p.write_text("// added\n")),
    "file-added-at-the-top": (Path("node_modules/zz-added.js"), lambda p: p.write_text("")),
    "file-removed": (DIST / "cli.d.ts", lambda p: p.unlink()),
}


class TestChangedBetweenRuns:
    """SECURITY.md, "The runtime between runs": a runtime file changed after the runtime
    was verified (and one run went through it) stops the next run before anything launches,
    with the reason every other unverified runtime gets."""

    @pytest.fixture
    def verified_copy(self, runtime: SandboxRuntime, tmp_path: Path) -> SandboxRuntime:
        return locate_runtime(_copy_install(runtime, tmp_path / "sandbox"))

    def _run(
        self, runtime: SandboxRuntime, snapshot: Path, scratch: Path, slot: RunSlot
    ) -> SandboxResult:
        return run_sandboxed(
            environment=os.environ,
            policy=make_policy(),
            executable="true",
            args=[],
            snapshot_dir=snapshot,
            scratch_dir=scratch,
            runtime=runtime,
            slot=slot,
        )

    @pytest.mark.parametrize("change", sorted(CHANGES))
    def test_the_next_run_ends_sandbox_unverified(
        self,
        verified_copy: SandboxRuntime,
        snapshot: Path,
        scratch: Path,
        slot: RunSlot,
        change: str,
    ) -> None:
        """The first run passes; after the change the second ends ``sandbox_unverified``."""
        first = self._run(verified_copy, snapshot, scratch, slot)
        assert (first.status, first.exit_code) == ("ok", 0), first.detail
        where, how = CHANGES[change]
        how(verified_copy.install_dir / where)
        second = self._run(verified_copy, snapshot, scratch, slot)
        assert (second.status, second.reason) == ("inconclusive", "sandbox_unverified")
        assert "changed since it was verified" in (second.detail or "")

    def test_an_unchanged_runtime_keeps_running(
        self, verified_copy: SandboxRuntime, snapshot: Path, scratch: Path, slot: RunSlot
    ) -> None:
        """Runs, reads and listings by the runtime itself change nothing the check compares."""
        for _ in range(2):
            result = self._run(verified_copy, snapshot, scratch, slot)
            assert (result.status, result.exit_code) == ("ok", 0), result.detail
        runtime_module.verify_unchanged(verified_copy)


def test_a_directory_swapped_while_listed_is_refused(
    runtime: SandboxRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory replaced between its lstat and its opening is never listed in its place:
    the walk refuses it (``sandbox_unverified``) instead of reading the impostor."""
    copy = _copy_install(runtime, tmp_path / "sandbox")
    target = copy / DIST / "sandbox"
    impostor = tmp_path / "impostor"
    shutil.copytree(target, impostor, symlinks=True)
    (impostor / "extra.js").write_text("// the impostor's\n")
    real_open = os.open

    def swapping_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "sandbox" and target.is_dir() and not target.is_symlink() and impostor.exists():
            target.rename(tmp_path / "original")
            impostor.rename(target)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)
    with pytest.raises(SandboxUnavailable) as caught:
        runtime_module.runtime_tree_digest(copy)
    assert caught.value.reason == "sandbox_unverified"
    assert "replaced while listed" in str(caught.value)


def test_a_wide_tree_is_walked_with_few_descriptors(tmp_path: Path) -> None:
    """Three hundred sibling packages are walked under a descriptor limit barely above what
    the process holds: only a directory and its ancestors are open at once, so a wide
    ``node_modules`` never ends in ``EMFILE``, and nothing is left open after the walk."""
    modules = tmp_path / "install" / "node_modules"
    for index in range(300):
        (modules / f"pkg{index:03}" / "lib").mkdir(parents=True)
        (modules / f"pkg{index:03}" / "lib" / "index.js").write_text("")
    held = len(os.listdir("/proc/self/fd"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (held + 16, hard))
    try:
        _, prints = runtime_module.runtime_tree_digest(modules.parent, ())
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(prints) == 1 + 300 * 3
    assert len(os.listdir("/proc/self/fd")) == held


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"version": "1.2.3"}', None),
        ('{"version": "1.2.4"}', "sandbox_unverified"),
        ("{}", "sandbox_unverified"),
        ('["1.2.3"]', "sandbox_prerequisite_missing"),
        ("{not json", "sandbox_prerequisite_missing"),
        (None, "sandbox_prerequisite_missing"),
    ],
)
def test_a_pinned_package_is_its_pinned_version_or_refused(
    tmp_path: Path, text: str | None, reason: str | None
) -> None:
    """The one check the runtime and the TypeScript worker share: a manifest that says
    the pinned version passes; another version, none, a non-object, bad JSON or no file
    is refused with its reason, naming the place given."""
    manifest = tmp_path / "package.json"
    if text is not None:
        manifest.write_text(text, encoding="utf-8")
    if reason is None:
        check_pinned_package(manifest, "1.2.3", "Thing", named=tmp_path)
        return
    with pytest.raises(SandboxUnavailable) as caught:
        check_pinned_package(manifest, "1.2.3", "Thing", named=tmp_path)
    assert caught.value.reason == reason
    assert str(caught.value).startswith(f"{tmp_path}: ")
