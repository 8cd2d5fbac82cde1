"""Run slots' private mount namespaces (docs/ARCHITECTURE.md, "Mount namespaces")."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.mounts import NAMESPACE_REASON, HostMounts
from probe_service.sandbox.namespace import SlotNamespace
from probe_service.sandbox.runtime import find_system_tool
from probe_service.sandbox.scratch import ScratchLimits, mount_scratch
from probe_service.sandbox.slots import SlotPool

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="slot namespaces are a root worker's")

LIMITS = ScratchLimits(size_bytes=1 << 20, inodes=64)


def _tool(name: str) -> Path:
    found = find_system_tool(name)
    assert found is not None
    return found


@pytest.fixture
def namespace() -> Iterator[SlotNamespace]:
    made = SlotNamespace(250, _tool("unshare"), _tool("nsenter"))
    yield made
    made.close()


def _host_points() -> set[str]:
    return {entry.point for entry in HostMounts().mountinfo()}


class TestNamespace:
    def test_a_new_namespace_is_private_and_entered_by_the_launch_prefix(
        self, namespace: SlotNamespace
    ) -> None:
        """Not the worker's, no shared mount, and the launch prefix lands in it."""
        assert namespace.inode != os.stat("/proc/self/ns/mnt").st_ino
        assert all(
            not any(field.startswith("shared:") for field in entry.propagation)
            for entry in namespace.mountinfo()
        )
        entered = subprocess.run(
            [
                *namespace.enter_argv(Path("/tmp")),
                "/bin/sh",
                "-c",
                "readlink /proc/self/ns/mnt; pwd",
            ],
            capture_output=True,
            check=True,
        )
        assert entered.stdout.split() == [f"mnt:[{namespace.inode}]".encode(), b"/tmp"]

    def test_a_mount_made_in_it_is_in_no_other_table(
        self, namespace: SlotNamespace, tmp_path: Path
    ) -> None:
        """A scratch mounted in the namespace is reached through its view only; the host's
        table and tree never show it; it is gone once unmounted."""
        target = tmp_path / "scratch"
        target.mkdir()
        mount_scratch(target, LIMITS, mounts=namespace)
        assert str(target) in {entry.point for entry in namespace.added_mounts()}
        assert str(target) not in _host_points()
        (namespace.view(target) / "file").write_text("inside")
        assert not (target / "file").exists()
        assert namespace.realpath(target / "file") == target / "file"
        namespace.unmount(target)
        assert namespace.added_mounts() == []
        assert not (namespace.view(target) / "file").exists()

    def test_copies_of_run_mounts_are_detached_from_a_new_namespace(self, tmp_path: Path) -> None:
        """A run mount in the host's table when a namespace is made (a worker of an older
        version) is not in the new namespace, and stays where it was."""
        target = tmp_path / "legacy"
        target.mkdir()
        mount_scratch(target, LIMITS)
        try:
            made = SlotNamespace(251, _tool("unshare"), _tool("nsenter"))
            try:
                points = {entry.point for entry in made.mountinfo()}
                assert str(target) not in points
                assert str(target) in _host_points()
            finally:
                made.close()
        finally:
            HostMounts().unmount(target)

    def test_a_namespace_whose_holder_is_gone_refuses_every_request(
        self, namespace: SlotNamespace, tmp_path: Path
    ) -> None:
        """No mount, no table, and the reason names the slot namespace."""
        os.kill(namespace.holder_pid, signal.SIGKILL)
        namespace._holder.wait()
        with pytest.raises(SandboxUnavailable, match="run slot 250") as raised:
            namespace.mount("x", tmp_path, "tmpfs", 0, "size=4096")
        assert raised.value.reason == NAMESPACE_REASON
        with pytest.raises(SandboxUnavailable):
            namespace.mountinfo()

    def test_the_holder_exits_when_let_go(self, namespace: SlotNamespace) -> None:
        """Closing the pipe ends the holder by itself (exit status 0, never a kill); the
        namespace is no longer offered."""
        namespace.close()
        assert not namespace.alive
        assert namespace._holder.returncode == 0


class TestPool:
    def test_a_slot_keeps_its_namespace_between_clean_runs(self) -> None:
        """The next run of the same slot enters the same namespace."""
        pool = SlotPool()
        try:
            with pool.acquire() as first:
                inode, slot = first.namespace.inode, first.identity.slot
            with pool.acquire() as second:
                assert second.identity.slot == slot  # its own slot is preferred
                assert second.namespace.inode == inode
        finally:
            pool.close()

    def test_a_namespace_left_with_a_mount_is_dropped(self, tmp_path: Path) -> None:
        """A run that left a mount in its namespace: the slot's next run gets a new one."""
        pool = SlotPool()
        target = tmp_path / "left"
        target.mkdir()
        try:
            with pool.acquire() as first:
                mount_scratch(target, LIMITS, mounts=first.namespace)
                dropped = first.namespace
            assert dropped.closed
            with pool.acquire() as second:
                assert second.namespace is not dropped
                assert second.namespace.added_mounts() == []
        finally:
            pool.close()
