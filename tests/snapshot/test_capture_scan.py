"""The capture's fast paths keep its rules: pinned ids, byte-identical manifests, the
bulk path check, the packed stat cache and the second pass over directories."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from probe_service.errors import UnsafePath, UnstableWorkingTree
from probe_service.snapshot import CaptureLimits, load_snapshot, snapshot_capture
from probe_service.snapshot import capture as capture_module
from probe_service.snapshot import scan as scan_module
from probe_service.snapshot.manifest import (
    check_snapshot_path,
    check_snapshot_paths,
    encode_records,
    encode_tree,
    file_record,
    symlink_record,
)
from probe_service.snapshot.statcache import decode_pack, encode_pack
from probe_service.store import Store
from probe_service.store.schema import blobs

from .conftest import start_later, write_tree

#: A tree with every kind of entry and name the manifest encodes: executable bit, empty
#: and multi-chunk files, names JSON escapes (quote, tab), non-ASCII and non-BMP names,
#: links inside, dangling and climbing.
PINNED_FILES = {
    "a.txt": b"alpha\n",
    "bin/run.sh": b"#!/bin/sh\necho hi\n",
    "src/\u00fc-\u00f1ame.py": b"print('unicode')\n",
    'q"uote.txt': b"quote\n",
    "tab\tname.txt": b"tab\n",
    "emoji-\U0001f600.txt": b"smile\n",
    "empty": b"",
    "big.bin": bytes(range(256)) * 5000,
    "d/e/f/deep.txt": b"deep\n",
}
#: The id of that tree, computed before the capture's fast paths existed: it must never move.
PINNED_ID = "05c440ecdc375cd31b3e6b28ed246bdeb6bd7bee75b53e591c5fb5fb69cf3c99"


def _pinned_tree(root: Path) -> None:
    write_tree(root, PINNED_FILES, executable=frozenset({"bin/run.sh"}))
    (root / "link").symlink_to("a.txt")
    (root / "dangling").symlink_to("nowhere")
    (root / "d" / "up").symlink_to("../a.txt")


class TestPinnedIds:
    def test_walked_tree_keeps_its_id(self, sqlite_store: Store, repo: Path) -> None:
        """A tree outside git captures to the id pinned before the fast paths."""
        _pinned_tree(repo)
        first = snapshot_capture(sqlite_store, repo)
        again = snapshot_capture(sqlite_store, repo)  # from the stat cache and the memo
        capture_module._LAST_MANIFEST.clear()
        fresh = snapshot_capture(sqlite_store, repo, limits=CaptureLimits(racy_window_ns=0))
        assert first.snapshot_id == again.snapshot_id == fresh.snapshot_id == PINNED_ID

    def test_git_listed_tree_keeps_its_id(self, sqlite_store: Store, repo: Path) -> None:
        """The same tree listed by git (tracked and untracked files) has the same id."""
        _pinned_tree(repo)
        subprocess.run(["/usr/bin/git", "init", "-q", str(repo)], check=True)
        subprocess.run(["/usr/bin/git", "-C", str(repo), "add", "a.txt", "link"], check=True)
        assert snapshot_capture(sqlite_store, repo).snapshot_id == PINNED_ID


_NAME = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
    min_size=1,
    max_size=8,
)
_PATH = st.lists(_NAME, min_size=1, max_size=3).map("/".join)


class TestManifestEncoding:
    @given(
        files=st.dictionaries(
            _PATH,
            st.tuples(
                st.booleans(),
                st.text("0123456789abcdef", min_size=64, max_size=64),
                st.integers(0, 2**63 - 1),
            ),
            max_size=12,
        ),
        links=st.dictionaries(_PATH, st.text(max_size=12)),
    )
    def test_direct_encoding_is_the_canonical_one(
        self, files: dict[str, tuple[bool, str, int]], links: dict[str, str]
    ) -> None:
        """encode_tree gives byte for byte what canonical JSON of the records gives."""
        links = {p: t for p, t in links.items() if p not in files and _encodable(t)}
        records = [file_record(p, e, d, s) for p, (e, d, s) in files.items()]
        records += [symlink_record(p, t) for p, t in links.items()]
        direct = encode_tree([(p, e, d, s) for p, (e, d, s) in files.items()], list(links.items()))
        assert direct == encode_records(records)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refusal(paths: list[str]) -> str | None:
    for path in paths:
        try:
            check_snapshot_path(path)
        except UnsafePath as exc:
            return str(exc)
    return None


class TestBulkPathCheck:
    @given(
        st.lists(
            st.text(alphabet="ab./\\\x00\U0001f600", max_size=12)
            | st.just("a" * 600)
            | st.just("a/" * 300 + "b"),
            max_size=6,
        )
    )
    def test_bulk_check_refuses_what_the_per_path_check_refuses(self, paths: list[str]) -> None:
        """The same verdict and the same message as checking path by path, in order."""
        expected = _refusal(paths)
        if expected is None:
            check_snapshot_paths(paths)
        else:
            with pytest.raises(UnsafePath) as caught:
                check_snapshot_paths(paths)
            assert str(caught.value) == expected


class TestStatPack:
    @given(
        st.dictionaries(
            _PATH.filter(_encodable),
            st.tuples(
                st.tuples(
                    st.integers(0, 2**63 - 1),
                    st.integers(-(2**63), 2**63 - 1),
                    st.integers(-(2**63), 2**63 - 1),
                    st.integers(0, 2**64 - 1),
                    st.integers(0, 0o177777),
                ),
                st.text("0123456789abcdef", min_size=64, max_size=64),
            ),
            max_size=10,
        )
    )
    def test_pack_round_trips(self, entries: dict[str, Any]) -> None:
        """Every stat field (a 64-bit inode included) and digest comes back as written."""
        assert decode_pack(encode_pack(entries)) == entries

    @pytest.mark.parametrize("cut", [0, 3, 11, 12, 20, -1])
    def test_a_broken_pack_is_an_empty_cache(self, cut: int) -> None:
        """A pack cut anywhere, or with a byte too many, vouches for nothing."""
        data = encode_pack({"a": ((1, 2, 3, 4, 0o100644), "0" * 64)})
        assert decode_pack(data[:cut]) == {}
        assert decode_pack(data + b"\0") == {}

    def test_a_removed_file_leaves_the_cache(self, sqlite_store: Store, repo: Path) -> None:
        """The cache is replaced whole: a deleted file's entry does not linger."""
        write_tree(repo, {"a": b"1", "b": b"2"})
        no_racy = CaptureLimits(racy_window_ns=0)
        snapshot_capture(sqlite_store, repo, limits=no_racy)
        (repo / "b").unlink()
        snapshot_capture(sqlite_store, repo, limits=no_racy)
        with sqlite_store.reading() as conn:
            cached = capture_module.load_stat_cache(conn, capture_module.cache_key_for(str(repo)))
        assert set(cached.stats) == set(cached.digests) == {"a"}


def _count_listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every directory a capture lists, in the list returned."""
    listed: list[str] = []
    real = scan_module._list_dir

    def counting(root: str, rel_dir: str, *rest: Any) -> Any:
        listed.append(rel_dir)
        return real(root, rel_dir, *rest)

    monkeypatch.setattr(scan_module, "_list_dir", counting)
    return listed


class TestSecondPass:
    """With the capture started well after the tree was written, every directory's stat
    vouches for its listing: what moves during the capture must still be caught."""

    def test_an_old_unchanged_tree_is_not_listed_twice(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The shortcut is real: directories whose stat held are not listed again."""
        write_tree(repo, {"a": b"1", "d/b": b"2", "d/e/c": b"3"})
        start_later(monkeypatch)
        listed = _count_listings(monkeypatch)
        snapshot_capture(sqlite_store, repo)
        assert sorted(listed) == ["", "d", "d/e"]

    def test_a_recent_directory_is_listed_again(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A directory changed within the racy window cannot vouch for its listing."""
        write_tree(repo, {"a": b"1", "d/b": b"2"})
        listed = _count_listings(monkeypatch)
        snapshot_capture(sqlite_store, repo)
        assert sorted(listed) == ["", "", "d", "d"]

    @pytest.mark.parametrize(
        "change",
        [
            lambda r, n: (r / "d" / f"new{n}.txt").write_bytes(b"n"),
            lambda r, n: (r / "d" / f"sub{n}").mkdir(),
            lambda r, n: (r / "d" / f"b{n}").unlink(),
            lambda r, n: os.replace(r / "d" / f"b{n}", r / "d" / f"c{n}"),
            lambda r, n: (r / "d" / f"link{n}").symlink_to("b1"),
            lambda r, n: (r / "d" / f"b{n}").write_bytes(b"rewritten"),
        ],
        ids=["file-added", "dir-added", "file-removed", "file-renamed", "link-added", "rewritten"],
    )
    def test_a_move_in_an_old_directory_is_caught(
        self, sqlite_store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch, change: Any
    ) -> None:
        """Every attempt sees the tree move under an old directory: the capture is refused."""
        write_tree(repo, {"a": b"1", **{f"d/b{n}": b"2" for n in range(1, 6)}})
        start_later(monkeypatch)
        calls = {"n": 0}
        real = capture_module.read_file_blob

        def read_then_move(*args: Any, **kwargs: Any) -> Any:
            blob = real(*args, **kwargs)
            if args[1] == "a":  # read once an attempt (nothing is cached before success)
                calls["n"] += 1
                change(repo, calls["n"])
            return blob

        monkeypatch.setattr(capture_module, "read_file_blob", read_then_move)
        with pytest.raises(UnstableWorkingTree, match=r"d"):
            snapshot_capture(sqlite_store, repo)
        assert calls["n"] == 3  # three attempts, each refused

    def test_a_directory_swapped_for_a_link_is_caught_and_never_read_through(
        self, sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The walk saw ``d/key``; ``d`` becomes a link to a host directory before the
        read: the read beneath the root refuses the link and nothing of the host's is
        stored."""
        host = tmp_path / "host"
        host.mkdir()
        (host / "key").write_bytes(b"host secret\n")
        root = tmp_path / "repo"
        root.mkdir()
        write_tree(root, {"d/key": b"the tree's own key\n"})
        real = capture_module.first_pass

        def swap_after_walk(*args: Any, **kwargs: Any) -> Any:
            scan = real(*args, **kwargs)
            if (root / "d").is_dir() and not (root / "d").is_symlink():
                (root / "d").rename(tmp_path / "moved")
                (root / "d").symlink_to(host)
            return scan

        monkeypatch.setattr(capture_module, "first_pass", swap_after_walk)
        result = snapshot_capture(sqlite_store, root)  # settles: the link is data
        snapshot = load_snapshot(sqlite_store, result.snapshot_id)
        assert [(e.path, e.kind) for e in snapshot.entries] == [("d", "symlink")]
        with sqlite_store.reading() as conn:
            stored = {row[0] for row in conn.execute(select(blobs.c.digest))}
        assert hashlib.sha256(b"host secret\n").hexdigest() not in stored
