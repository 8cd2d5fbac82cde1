"""Filesystem isolation: what a probe can and cannot read or write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service.sandbox.settings import runtime_default_write_paths
from probe_service.sandbox.slots import RunSlot

from .conftest import Runner

pytestmark = pytest.mark.sandbox


class TestReads:
    def test_reads_the_snapshot(self, run: Runner) -> None:
        """A probe reads files of the materialized snapshot."""
        result = run("cat", ["src/main.txt"])
        assert (result.status, result.stdout) == ("ok", b"snapshot content\n")

    def test_cannot_read_etc_shadow(self, run: Runner) -> None:
        """/etc/shadow is not readable inside the sandbox."""
        result = run("cat", ["/etc/shadow"])
        assert result.status == "ok"
        assert result.exit_code != 0
        assert result.stdout == b""

    def test_cannot_see_the_home_directory(self, run: Runner) -> None:
        """The worker's HOME (and its .ssh) is hidden from the probe."""
        home = str(Path.home())
        assert os.listdir(home), "the host HOME must hold something for this test to mean much"
        result = run("sh", ["-c", 'ls -A "$1/.ssh"; ls -A "$1"', "sh", home])
        assert result.status == "ok"
        assert result.stdout == b""

    def test_cannot_read_a_store_like_file(self, run: Runner, tmp_path: Path) -> None:
        """A database file outside the allowed paths cannot be read."""
        store = tmp_path / ".zyte" / "repository-intelligence.sqlite3"
        store.parent.mkdir()
        store.write_bytes(b"STORE-SECRET-1234")
        result = run("cat", [str(store)])
        assert result.exit_code != 0
        assert b"STORE-SECRET-1234" not in result.stdout + result.stderr

    def test_cannot_read_the_policy_file(
        self, run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The administrator's policy file is not readable by a probe."""
        policy_file = tmp_path / "admin" / "probe-policies.json"
        policy_file.parent.mkdir()
        policy_file.write_text('{"schema": 1, "policies": [], "marker": "POLICY-SECRET"}')
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(policy_file))
        result = run("cat", [str(policy_file)])
        assert result.exit_code != 0
        assert b"POLICY-SECRET" not in result.stdout + result.stderr

    def test_cannot_read_another_runs_scratch(
        self, run: Runner, tmp_path: Path, snapshot: Path
    ) -> None:
        """A second run cannot read what the first run left in its own scratch."""
        first = run("sh", ["-c", 'echo OTHER-RUN-SECRET > "$BYTE_PROBE_SCRATCH/s"'])
        assert first.exit_code == 0
        other = tmp_path / "scratch-b"
        other.mkdir()
        second = run("cat", [str(tmp_path / "scratch" / "s")], scratch_dir=other)
        assert second.exit_code != 0
        assert b"OTHER-RUN-SECRET" not in second.stdout + second.stderr


class TestWrites:
    def test_cannot_write_the_snapshot(self, run: Runner, snapshot: Path) -> None:
        """Writing into the snapshot fails and leaves it unchanged."""
        result = run("sh", ["-c", "echo changed > src/main.txt; echo new > src/new.txt"])
        assert result.status == "ok"
        assert (snapshot / "src" / "main.txt").read_text() == "snapshot content\n"
        assert not (snapshot / "src" / "new.txt").exists()

    def test_writes_its_scratch(self, run: Runner, scratch: Path, slot: RunSlot) -> None:
        """A probe writes under BYTE_PROBE_SCRATCH and the file reaches the worker (in the
        run slot's namespace, where scratch is mounted)."""
        result = run("sh", ["-c", 'echo out > "$BYTE_PROBE_SCRATCH/result.txt"'])
        assert result.exit_code == 0
        assert (slot.view(scratch) / "result.txt").read_text() == "out\n"
        assert not (scratch / "result.txt").exists()  # not in the host's namespace

    def test_cannot_write_runtime_default_paths_even_when_present(
        self, run: Runner, tmp_path: Path
    ) -> None:
        """/tmp/claude, writable by default in 0.0.55 when it exists, stays read-only."""
        target = Path("/tmp/claude")
        created = not target.exists()
        target.mkdir(exist_ok=True)
        try:
            result = run("sh", ["-c", "echo pwn > /tmp/claude/byte-probe-test && echo WROTE"])
            assert b"WROTE" not in result.stdout
            assert not (target / "byte-probe-test").exists()
        finally:
            if created:
                target.rmdir()

    def test_writes_leave_nothing_for_a_later_run(self, run: Runner, tmp_path: Path) -> None:
        """Writes anywhere but scratch are refused or vanish with the sandbox."""
        home = str(Path.home())
        targets = [
            "/tmp/byte-probe-leak",
            "/var/tmp/byte-probe-leak",
            "/dev/shm/byte-probe-leak",
            f"{home}/byte-probe-leak",
            *(f"{path}/byte-probe-leak" for path in runtime_default_write_paths(Path(home))),
        ]
        script = 'for p in "$@"; do mkdir -p "${p%/*}" 2>/dev/null; echo x > "$p"; done; true'
        run("sh", ["-c", script, "sh", *targets])
        later = tmp_path / "scratch-later"
        later.mkdir()
        check = run(
            "sh",
            ["-c", 'for p in "$@"; do [ -e "$p" ] && echo "SEEN $p"; done; true', "sh", *targets],
            scratch_dir=later,
        )
        assert check.stdout == b""
        assert [t for t in targets if os.path.lexists(t)] == []
