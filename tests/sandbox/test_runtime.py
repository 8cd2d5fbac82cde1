"""Verification of the pinned runtime install."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox import PINNED_VERSION, SandboxRuntime, locate_runtime, run_sandboxed
from probe_service.sandbox import runtime as runtime_module

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
