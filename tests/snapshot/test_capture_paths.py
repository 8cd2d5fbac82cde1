"""The capture fast paths: one-shot vs streamed compression, and the manifest memo."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import UnsafePath, UnstableWorkingTree
from probe_service.snapshot import CaptureLimits, load_snapshot, snapshot_capture
from probe_service.snapshot import capture as capture_module
from probe_service.snapshot import reader as reader_module
from probe_service.snapshot.blobs import decompress_blob, read_blob
from probe_service.snapshot.reader import CHUNK_BYTES, read_file_blob, stat_key
from probe_service.store import Store


@pytest.mark.parametrize(
    "size",
    [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES + 12345],
    ids=["empty", "one", "chunk-1", "chunk", "chunk+1", "multi"],
)
def test_blob_round_trips_on_both_paths(sqlite_store: Store, repo: Path, size: int) -> None:
    """Single-chunk (one-shot) and streamed blobs both hash the raw bytes and decode back."""
    data = os.urandom(size // 2) + b"a" * (size - size // 2)
    (repo / "f.bin").write_bytes(data)
    result = snapshot_capture(sqlite_store, repo)
    (entry,) = load_snapshot(sqlite_store, result.snapshot_id).entries
    assert entry.digest == hashlib.sha256(data).hexdigest()
    assert (entry.size, read_blob(sqlite_store, entry.digest)) == (size, data)


def test_manifest_memo_gives_the_encoded_manifest(
    sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memo hit yields exactly the id a fresh encoding of the same tree yields."""
    (repo / "a").write_bytes(b"1")
    (repo / "l").symlink_to("a")
    no_racy = CaptureLimits(racy_window_ns=0)
    encodings: list[int] = []
    real = capture_module.encode_tree

    def counting(files: list[Any], links: list[Any], gitlinks: list[Any]) -> tuple[str, bytes]:
        encodings.append(len(files) + len(links))
        return real(files, links, gitlinks)

    monkeypatch.setattr(capture_module, "encode_tree", counting)
    first = snapshot_capture(sqlite_store, repo, limits=no_racy)
    memo_hit = snapshot_capture(sqlite_store, repo, limits=no_racy)
    assert (memo_hit.read_files, len(encodings)) == (0, 1)
    capture_module._LAST_MANIFEST.clear()
    fresh = snapshot_capture(sqlite_store, repo, limits=no_racy)
    assert len(encodings) == 2
    assert first.snapshot_id == memo_hit.snapshot_id == fresh.snapshot_id


def test_manifest_memo_misses_on_a_retargeted_link(sqlite_store: Store, repo: Path) -> None:
    """A symlink retargeted between captures (no file stat moves) changes the id."""
    (repo / "a").write_bytes(b"1")
    (repo / "l").symlink_to("a")
    first = snapshot_capture(sqlite_store, repo).snapshot_id
    (repo / "l").unlink()
    (repo / "l").symlink_to("b")
    assert snapshot_capture(sqlite_store, repo).snapshot_id != first


def test_bulk_writer_restores_autocheckpoint(sqlite_store: Store, repo: Path) -> None:
    """The blob writer's connection goes back to the pool checkpointing as usual."""
    (repo / "a").write_bytes(b"1" * 5000)
    snapshot_capture(sqlite_store, repo)
    pooled = [sqlite_store.engine.connect() for _ in range(3)]  # every pooled one, and more
    try:
        for conn in pooled:
            raw = conn.connection.driver_connection
            assert raw is not None
            assert raw.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)
    finally:
        for conn in pooled:
            conn.close()


@pytest.mark.parametrize("grow", [True, False], ids=["grows", "shrinks"])
def test_streamed_file_changing_size_is_unstable(tmp_path: Path, grow: bool) -> None:
    """A multi-chunk file whose size moves after the stat is UnstableWorkingTree."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * (3 * CHUNK_BYTES))
    expected = stat_key(os.lstat(path))
    real_read = os.read
    calls = [0]

    def moving_read(fd: int, n: int) -> bytes:
        calls[0] += 1
        if calls[0] == 2:
            with open(path, "ab" if grow else "r+b") as handle:
                if grow:
                    handle.write(b"y" * 10)
                else:
                    handle.truncate(2 * CHUNK_BYTES)
        return real_read(fd, n)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader_module.os, "read", moving_read)
        with pytest.raises(UnstableWorkingTree, match="size changed"):
            read_file_blob(str(path), "f.bin", expected, 64 * CHUNK_BYTES)
    # The thread's reused compressor starts clean after the abandoned stream.
    good = tmp_path / "g.bin"
    data = os.urandom(CHUNK_BYTES) + b"z" * (CHUNK_BYTES + 7)
    good.write_bytes(data)
    blob = read_file_blob(str(good), "g.bin", stat_key(os.lstat(good)), 64 * CHUNK_BYTES)
    assert decompress_blob(blob.digest, blob.data) == data


#: A guard against a hang, never a timing assertion: how long the test waits at most.
_HANG_GUARD_S = 120


def test_a_file_swapped_for_a_fifo_before_reading_never_blocks(tmp_path: Path) -> None:
    """A hostile working tree replaces a scanned regular file with a FIFO before capture
    reads it: the read fails as an unstable tree instead of blocking the capture (and a
    machine face's long-operation slot) forever."""
    path = tmp_path / "a.txt"
    path.write_text("scanned as a regular file\n")
    scanned = stat_key(os.lstat(path))
    path.unlink()
    os.mkfifo(path)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_file_blob(str(path), "a.txt", scanned, 1 << 20)
            outcome.append(None)
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(_HANG_GUARD_S)
    if reader.is_alive():  # unblock the stuck open() so the thread can end, then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(_HANG_GUARD_S)
        pytest.fail("reading a FIFO blocked the capture")
    assert len(outcome) == 1
    assert isinstance(outcome[0], UnstableWorkingTree)


class TestSwappedDirectories:
    """A hostile working tree swaps a directory for a link during a capture."""

    def test_a_directory_swapped_for_a_link_is_never_read_through(self, tmp_path: Path) -> None:
        """The scan stat'ed ``dir/key`` through a link to a host directory (the swap came
        first); the read, beneath the root's descriptor, refuses the link."""
        host = tmp_path / "host"
        host.mkdir()
        (host / "key").write_text("host secret\n")
        root = tmp_path / "repo"
        root.mkdir()
        (root / "dir").symlink_to(host)
        scanned = stat_key(os.lstat(root / "dir" / "key"))  # what _scan would have seen
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(UnstableWorkingTree, match="dir/key: changed while capturing"):
                read_file_blob(str(root / "dir" / "key"), "dir/key", scanned, 1 << 20, root_fd)
        finally:
            os.close(root_fd)

    def test_a_checked_root_replaced_by_a_link_is_refused(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """A machine face checked ``work/a``; it is then replaced by a link to a host
        directory: the exact-root capture refuses it and stores nothing of the host's."""
        host = tmp_path / "host"
        host.mkdir()
        (host / "key").write_text("host secret\n")
        checked = tmp_path / "work" / "a"
        checked.mkdir(parents=True)
        (checked / "f").write_text("x")
        checked.rename(tmp_path / "work" / "a.orig")
        checked.symlink_to(host)
        with pytest.raises(UnsafePath, match="replaced after it was checked"):
            snapshot_capture(sqlite_store, checked, exact_root=True)
        # The CLI's capture follows a root that is a link, as before.
        assert snapshot_capture(sqlite_store, checked).files == 1
