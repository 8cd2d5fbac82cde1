"""Warm snapshots: a run's tree is linked from the worker's cache and can never change it.

The probes here are real: the slot uid through the real sandbox, and the slot uid with no
sandbox at all (``setpriv``), so the cache's protection does not rest on the sandbox's
read-only mount alone.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.plans.models import Intervention
from probe_service.plans.overlay import apply_interventions
from probe_service.plans.warm import SnapshotCache, link_tree
from probe_service.sandbox import SandboxRuntime, run_sandboxed
from probe_service.sandbox.identity import PROBE_UID_BASE
from probe_service.sandbox.limits import scratch_limits
from probe_service.sandbox.scratch import scratch_filesystem
from probe_service.sandbox.slots import RunSlot, default_slots
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store, open_store

from ..sandbox.conftest import make_policy
from ..snapshot.conftest import describe_tree, write_tree

FILES = {
    "src/main.txt": b"original\n",
    "src/lib/util.sh": b"echo util\n",
    "README": b"read me\n",
}
#: Every way a probe might try to change a file it sees, then the result of each.
TAMPER = (
    "for f in src/main.txt src/lib/util.sh README; do "
    'echo pwned >> "$f" 2>/dev/null && echo "APPENDED $f"; '
    'chmod 777 "$f" 2>/dev/null && echo "CHMOD $f"; '
    'rm -f "$f" 2>/dev/null; [ -e "$f" ] || echo "REMOVED $f"; '
    "done; echo tried"
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    repo = tmp_path / "repo"
    write_tree(repo, FILES, executable=frozenset({"src/lib/util.sh"}))
    (tmp_path / "state").mkdir()
    opened = open_store(tmp_path / "state")
    yield opened
    opened.close()


@pytest.fixture(params=["overlay", "links"] if os.geteuid() == 0 else ["links"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SnapshotCache]:
    """A cache laying runs' trees as overlays (root) and as hard-linked trees."""
    warm = SnapshotCache(max_bytes=1 << 20, root=tmp_path / "cache")
    warm.use_overlay = request.param == "overlay"
    yield warm
    warm.close()


def _snapshot(store: Store, tmp_path: Path) -> str:
    return snapshot_capture(store, tmp_path / "repo").snapshot_id


def _probe(runtime: SandboxRuntime, tree: Path, scratch: Path, script: str, slot: RunSlot) -> bytes:
    scratch.mkdir()
    policy = make_policy()
    with scratch_filesystem(scratch, scratch_limits(policy), slot.namespace):
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="sh",
            args=["-c", script],
            snapshot_dir=tree,
            scratch_dir=scratch,
            runtime=runtime,
            slot=slot,
        )
    assert result.status == "ok", result.detail
    return result.stdout


class TestWarmTree:
    def test_a_warm_tree_equals_a_cold_one(
        self, store: Store, cache: SnapshotCache, tmp_path: Path
    ) -> None:
        """Cold (filling the cache) and warm materializations give the captured tree."""
        snapshot_id = _snapshot(store, tmp_path)
        cache.materialize(store, snapshot_id, tmp_path / "cold")
        cache.materialize(store, snapshot_id, tmp_path / "warm")
        expected = describe_tree(tmp_path / "repo")
        assert describe_tree(tmp_path / "cold") == expected
        assert describe_tree(tmp_path / "warm") == expected
        for run in ("cold", "warm"):
            cache.release(tmp_path / run)
            assert not os.path.ismount(tmp_path / run)

    def test_warm_files_are_the_cached_inodes(self, store: Store, tmp_path: Path) -> None:
        """A hard-linked tree links the cached files (no copy), with its own directories."""
        snapshot_id = _snapshot(store, tmp_path)
        cache = SnapshotCache(max_bytes=1 << 20, root=tmp_path / "cache")
        cache.use_overlay = False
        cache.materialize(store, snapshot_id, tmp_path / "run")
        (cached,) = (p for p in (tmp_path / "cache").iterdir() if not p.name.startswith("."))
        run_file, cache_file = tmp_path / "run/src/main.txt", cached / "src/main.txt"
        assert os.stat(run_file).st_ino == os.stat(cache_file).st_ino
        assert os.stat(tmp_path / "run/src").st_ino != os.stat(cached / "src").st_ino
        cache.close()

    @pytest.mark.skipif(os.geteuid() != 0, reason="overlay mounts need the root worker")
    def test_a_tree_evicted_while_in_use_stays_until_released(
        self, store: Store, tmp_path: Path
    ) -> None:
        """Evicting a cached tree a run is mounted on keeps it until that run releases it."""
        first = _snapshot(store, tmp_path)
        write_tree(tmp_path / "repo", {"more.txt": b"x" * 20})
        second = _snapshot(store, tmp_path)
        size = sum(len(v) for v in FILES.values())
        small = SnapshotCache(max_bytes=size + 25, root=tmp_path / "small")
        try:
            small.materialize(store, first, tmp_path / "a")
            small.materialize(store, second, tmp_path / "b")  # evicts the first
            assert (store.url, first) not in small
            assert (tmp_path / "a/src/main.txt").read_bytes() == b"original\n"
            cached = [p for p in (tmp_path / "small").iterdir() if p.name.startswith(first)]
            assert len(cached) == 1
            small.release(tmp_path / "a")
            assert not cached[0].exists()
            small.release(tmp_path / "b")
        finally:
            small.close()

    def test_lru_eviction_keeps_the_byte_bound(self, store: Store, tmp_path: Path) -> None:
        """Past its byte bound, the least recently used snapshot leaves the cache."""
        first = _snapshot(store, tmp_path)
        write_tree(tmp_path / "repo", {"more.txt": b"x" * 20})
        second = _snapshot(store, tmp_path)
        size = sum(len(v) for v in FILES.values())
        small = SnapshotCache(max_bytes=size + 25, root=tmp_path / "small")
        try:
            small.materialize(store, first, tmp_path / "a")
            small.release(tmp_path / "a")
            small.materialize(store, second, tmp_path / "b")
            small.release(tmp_path / "b")
            assert (store.url, first) not in small
            assert (store.url, second) in small
            assert small.cached_bytes <= small.max_bytes
        finally:
            small.close()

    def test_link_tree_never_follows_links(self, tmp_path: Path) -> None:
        """A link in the cached tree is copied as a link, its target untouched."""
        source = tmp_path / "source"
        source.mkdir()
        (source / "out").symlink_to("/etc")
        link_tree(source, tmp_path / "dest")
        assert os.readlink(tmp_path / "dest" / "out") == "/etc"


@pytest.mark.sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="probes run as slot uids of a root worker")
class TestProbeCannotReachTheCache:
    def test_a_probe_changes_neither_the_cache_nor_the_next_run(
        self, store: Store, cache: SnapshotCache, runtime: SandboxRuntime, tmp_path: Path
    ) -> None:
        """Run A's intervention and tampering stay in run A; run B and the cache see the
        captured tree."""
        snapshot_id = _snapshot(store, tmp_path)
        run_a, run_b = tmp_path / "a", tmp_path / "b"
        for run in (run_a, run_b):
            run.mkdir()
            run.chmod(0o711)
        # Each run in a slot's namespace, as the plan runner lays it (a slot is reused).
        with default_slots().acquire() as slot:
            cache.materialize(store, snapshot_id, run_a / "snapshot", slot.namespace)
            apply_interventions(
                slot.view(run_a / "snapshot"),
                (
                    Intervention(path="src/main.txt", content="intervened by A\n"),
                    Intervention(path="src/new.txt", content="new in A\n"),
                ),
            )
            script = f"{TAMPER}; cat src/*.txt"
            seen_a = _probe(runtime, run_a / "snapshot", run_a / "scratch", script, slot)
            cache.release(run_a / "snapshot")
        assert b"APPENDED" not in seen_a
        assert b"CHMOD" not in seen_a
        assert b"REMOVED" not in seen_a
        assert b"intervened by A" in seen_a

        with default_slots().acquire() as slot:
            cache.materialize(store, snapshot_id, run_b / "snapshot", slot.namespace)
            seen_b = _probe(runtime, run_b / "snapshot", run_b / "scratch", "cat src/*.txt", slot)
            cache.release(run_b / "snapshot")
        assert seen_b == b"original\n"
        (cached,) = (p for p in (tmp_path / "cache").iterdir() if not p.name.startswith("."))
        assert describe_tree(cached) == describe_tree(tmp_path / "repo")

    def test_the_slot_uid_without_a_sandbox_cannot_write_a_cached_inode(
        self, store: Store, cache: SnapshotCache, tmp_path: Path
    ) -> None:
        """Even outside bubblewrap, the probe's uid cannot write, chmod or unlink the
        cached files through a run's links: they are root-owned in root-owned dirs."""
        snapshot_id = _snapshot(store, tmp_path)
        run = tmp_path / "run"
        run.mkdir()
        run.chmod(0o711)
        cache.materialize(store, snapshot_id, run / "snapshot")
        uid = str(PROBE_UID_BASE + 999)
        attempt = subprocess.run(
            [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "sh",
                "-c",
                TAMPER,
            ],
            cwd=run / "snapshot",
            capture_output=True,
            check=False,
        )
        assert attempt.stdout.endswith(b"tried\n")
        assert b"APPENDED" not in attempt.stdout
        assert b"CHMOD" not in attempt.stdout
        assert b"REMOVED" not in attempt.stdout
        cache.release(run / "snapshot")
        (cached,) = (p for p in (tmp_path / "cache").iterdir() if not p.name.startswith("."))
        assert describe_tree(cached) == describe_tree(tmp_path / "repo")
