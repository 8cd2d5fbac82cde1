"""What a worker host must grant: the cgroup version switch and the capability check."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.sandbox.requirements import (
    LAUNCH_NEEDS,
    REQUIRED_CAPABILITIES,
    cgroup_support,
    check_sandboxed_launch,
    missing_capabilities,
)
from probe_service.sandbox.runtime import SandboxRuntime


def _v1_tree(root: Path, controllers: tuple[str, ...], own: str = "farm/worker") -> Path:
    """A fake cgroup v1 mount below ``root`` and a /proc/self/cgroup naming ``own``."""
    for name in controllers:
        (root / name / own).mkdir(parents=True)
    lines = [f"{i}:{name}:/{own}" for i, name in enumerate(controllers, start=1)]
    proc = root.parent / "cgroup"
    proc.write_text("\n".join([*lines, "0::/"]) + "\n")
    return proc


class TestCgroupSupport:
    def test_v2_is_named_and_refused_plainly(self, tmp_path: Path) -> None:
        """A unified hierarchy is cgroup v2, and the detail says limits are not supported
        there yet."""
        root = tmp_path / "cgroup"
        root.mkdir()
        (root / "cgroup.controllers").write_text("cpu memory pids\n")
        proc = tmp_path / "self-cgroup"
        proc.write_text("0::/user.slice\n")
        support = cgroup_support(root, proc)
        assert (support.version, support.supported) == ("v2", False)
        assert "not supported on cgroup v2 yet" in support.detail

    def test_v1_names_the_groups_it_would_use(self, tmp_path: Path) -> None:
        """cgroup v1 with memory and pids holding the process is supported; the detail
        names both groups."""
        root = tmp_path / "sys"
        proc = _v1_tree(root, ("memory", "pids"))
        support = cgroup_support(root, proc)
        assert (support.version, support.supported) == ("v1", True)
        assert str(root / "memory" / "farm/worker") in support.detail
        assert str(root / "pids" / "farm/worker") in support.detail

    def test_hybrid_is_still_v1(self, tmp_path: Path) -> None:
        """A hybrid layout (v2 at unified/, controllers on v1) is v1 for the limits."""
        root = tmp_path / "sys"
        proc = _v1_tree(root, ("memory", "pids"))
        (root / "unified").mkdir()
        (root / "unified" / "cgroup.controllers").write_text("")
        support = cgroup_support(root, proc)
        assert (support.version, support.supported) == ("v1 (hybrid)", True)

    def test_a_missing_controller_is_named(self, tmp_path: Path) -> None:
        """v1 without a pids hierarchy is refused, naming pids."""
        root = tmp_path / "sys"
        proc = _v1_tree(root, ("memory",))
        support = cgroup_support(root, proc)
        assert support.supported is False
        assert "no pids hierarchy" in support.detail

    def test_a_group_the_mount_does_not_show_is_missing(self, tmp_path: Path) -> None:
        """A group /proc names but the mounted hierarchy lacks (a container's private
        view) counts as missing: the limits could not create groups under it."""
        root = tmp_path / "sys"
        proc = _v1_tree(root, ("memory", "pids"))
        proc.write_text("5:memory:/elsewhere\n4:pids:/farm/worker\n")
        support = cgroup_support(root, proc)
        assert (support.supported, "no memory hierarchy" in support.detail) == (False, True)

    def test_this_machine_is_supported(self) -> None:
        """The machine the suite runs on has the v1 hierarchies the limits need."""
        support = cgroup_support()
        assert support.supported, support.detail
        assert support.version.startswith("v1")


class TestCapabilities:
    def _status(self, tmp_path: Path, mask: int) -> Path:
        path = tmp_path / "status"
        path.write_text(f"Name:\tx\nCapInh:\t0\nCapEff:\t{mask:016x}\nCapBnd:\t0\n")
        return path

    def test_a_full_set_misses_nothing(self, tmp_path: Path) -> None:
        """Every capability held: nothing is missing."""
        assert missing_capabilities(self._status(tmp_path, (1 << 41) - 1)) == {}

    def test_each_missing_capability_is_named_with_its_reason(self, tmp_path: Path) -> None:
        """With only CAP_SYS_ADMIN (bit 21) held, every other required one is reported."""
        missing = missing_capabilities(self._status(tmp_path, 1 << 21))
        assert set(missing) == set(REQUIRED_CAPABILITIES) - {"CAP_SYS_ADMIN"}
        assert missing["CAP_SYS_PTRACE"] == REQUIRED_CAPABILITIES["CAP_SYS_PTRACE"]

    def test_launch_needs_are_required(self) -> None:
        """The capabilities a launch needs are a subset of the documented ones."""
        assert set(LAUNCH_NEEDS) <= set(REQUIRED_CAPABILITIES)
        assert len(LAUNCH_NEEDS) == len(REQUIRED_CAPABILITIES) - 2


@pytest.mark.sandbox
def test_the_sandboxed_launch_runs_true(runtime: SandboxRuntime) -> None:
    """On this (root) machine, `true` runs in the sandbox as a slot uid."""
    assert "ran as a slot uid" in check_sandboxed_launch(runtime)
