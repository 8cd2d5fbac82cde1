"""snapshot_materialize: byte-identical rebuilds and refusal of unsafe manifests."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, update

from probe_service.errors import NotFound, UnsafePath
from probe_service.snapshot import Entry, snapshot_capture, snapshot_materialize
from probe_service.snapshot.enumerate import SKIPPED_DIRS
from probe_service.snapshot.manifest import encode_manifest
from probe_service.store import Store, open_store
from probe_service.store.schema import blobs, snapshots

from .conftest import describe_tree, write_tree


def _store_manifest(store: Store, entries: list[Entry]) -> str:
    """Insert a hand-made manifest, as a tampered or hostile store would hold it."""
    snapshot_id, blob = encode_manifest(entries)
    with store.transaction() as conn:
        conn.execute(
            insert(snapshots).values(
                snapshot_id=snapshot_id, manifest=blob, files=0, bytes=0, created_at="x"
            )
        )
    return snapshot_id


class TestRoundTrip:
    def test_tree_rebuilt_byte_for_byte(self, any_store: Store, repo: Path, tmp_path: Path) -> None:
        """Files, empty files, executable bits, unicode names and links survive the trip."""
        write_tree(
            repo,
            {"a.txt": b"alpha", "empty": b"", "bin/run.sh": b"#!/bin/sh\n", "ünï/çødé.txt": b"u"},
            executable=frozenset({"bin/run.sh"}),
        )
        (repo / "link").symlink_to("a.txt")
        (repo / "dangling").symlink_to("bin/missing")
        result = snapshot_capture(any_store, repo)
        dest = tmp_path / "out"
        snapshot_materialize(any_store, result.snapshot_id, dest)
        assert describe_tree(dest) == describe_tree(repo)

    def test_postgres_snapshot_materializes_elsewhere(
        self, pg_url: str, repo: Path, tmp_path: Path
    ) -> None:
        """A snapshot captured into PostgreSQL rebuilds identically from another store handle."""
        write_tree(repo, {"src/m.py": b"print(1)\n", "data.bin": os.urandom(300_000)})
        (tmp_path / "w").mkdir()
        writer = open_store(tmp_path / "w", pg_url)
        snapshot_id = snapshot_capture(writer, repo).snapshot_id
        writer.close()
        reader = open_store(tmp_path, pg_url)
        try:
            snapshot_materialize(reader, snapshot_id, tmp_path / "other")
        finally:
            reader.close()
        assert describe_tree(tmp_path / "other") == describe_tree(repo)

    @settings(
        max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        files=st.dictionaries(
            st.lists(
                st.text(alphabet=string.ascii_letters + "äß€中 -_.", min_size=1, max_size=8).filter(
                    # Dependency and VCS directories are never embedded (tested elsewhere).
                    lambda s: s not in (".", "..") and s.strip() == s and s not in SKIPPED_DIRS
                ),
                min_size=1,
                max_size=3,
            ).map("/".join),
            st.tuples(st.binary(max_size=2000), st.booleans()),
            max_size=12,
        ),
        # Internal targets only (escaping links are refused, see TestLinks).
        links=st.lists(
            st.text(alphabet=string.ascii_letters + "./", min_size=1, max_size=12).filter(
                lambda t: not t.startswith("/") and ".." not in t
            ),
            max_size=3,
        ),
    )
    def test_random_trees_round_trip(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        sqlite_store: Store,
        files: dict[str, tuple[bytes, bool]],
        links: list[str],
    ) -> None:
        """Any tree of files, exec bits, empty files, unicode names and links round-trips."""
        base = tmp_path_factory.mktemp("rt")
        repo = base / "repo"
        repo.mkdir()
        written: dict[str, bytes] = {}
        for rel, (data, _) in sorted(files.items()):
            parts = rel.split("/")
            # A path cannot be both a file and a directory; keep the first one written.
            if any("/".join(parts[:i]) in written for i in range(1, len(parts))):
                continue
            if any(w.startswith(rel + "/") for w in written):
                continue
            written[rel] = data
        write_tree(repo, written, frozenset(r for r in written if files[r][1]))
        for i, target in enumerate(links):
            if not os.path.lexists(repo / f"link{i}"):
                os.symlink(target, repo / f"link{i}")
        # One store for all examples (a fresh one each cost a migration, ~0.2 s): every
        # example captures its own snapshot and materializes it by its own id.
        result = snapshot_capture(sqlite_store, repo)
        snapshot_materialize(sqlite_store, result.snapshot_id, base / "out")
        assert describe_tree(base / "out") == describe_tree(repo)


class TestRefusals:
    @pytest.mark.parametrize(
        "bad", ["/etc/passwd", "../escape", "a/../../b", "a\x00b", "a//b", "./a", "a\\b"]
    )
    def test_unsafe_manifest_path_refused(
        self, sqlite_store: Store, tmp_path: Path, bad: str
    ) -> None:
        """An absolute, '..', NUL or malformed path in a stored manifest writes nothing."""
        snapshot_id = _store_manifest(sqlite_store, [Entry(path=bad, kind="symlink", target="x")])
        with pytest.raises(UnsafePath):
            snapshot_materialize(sqlite_store, snapshot_id, tmp_path / "out")
        assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")

    def test_path_through_symlink_refused(self, sqlite_store: Store, tmp_path: Path) -> None:
        """A manifest writing below one of its own links is refused before any write."""
        outside = tmp_path / "outside"
        outside.mkdir()
        entries = [
            Entry(path="link", kind="symlink", target=str(outside)),
            Entry(path="link/pwned", kind="symlink", target="x"),
        ]
        snapshot_id = _store_manifest(sqlite_store, entries)
        with pytest.raises(UnsafePath, match="pass through 'link'"):
            snapshot_materialize(sqlite_store, snapshot_id, tmp_path / "out")
        assert os.listdir(outside) == []

    def test_existing_link_in_destination_never_followed(
        self, sqlite_store: Store, repo: Path, tmp_path: Path
    ) -> None:
        """A destination that is not empty is refused, so no planted link is written through."""
        write_tree(repo, {"d/f": b"x"})
        snapshot_id = snapshot_capture(sqlite_store, repo).snapshot_id
        dest = tmp_path / "out"
        dest.mkdir()
        (dest / "d").symlink_to(tmp_path)
        with pytest.raises(UnsafePath, match="not empty"):
            snapshot_materialize(sqlite_store, snapshot_id, dest)

    def test_tampered_manifest_refused(
        self, sqlite_store: Store, repo: Path, tmp_path: Path
    ) -> None:
        """A manifest row whose bytes no longer hash to its id is refused."""
        write_tree(repo, {"a": b"a"})
        good = snapshot_capture(sqlite_store, repo).snapshot_id
        _, other = encode_manifest([Entry(path="b", kind="symlink", target="a")])
        with sqlite_store.transaction() as conn:
            conn.execute(
                update(snapshots).where(snapshots.c.snapshot_id == good).values(manifest=other)
            )
        with pytest.raises(UnsafePath, match="does not match its id"):
            snapshot_materialize(sqlite_store, good, tmp_path / "out")

    def test_tampered_blob_refused(self, sqlite_store: Store, repo: Path, tmp_path: Path) -> None:
        """A blob whose bytes no longer hash to its digest is refused."""
        import zstandard

        write_tree(repo, {"a": b"a"})
        snapshot_id = snapshot_capture(sqlite_store, repo).snapshot_id
        with sqlite_store.transaction() as conn:
            conn.execute(update(blobs).values(data=zstandard.ZstdCompressor().compress(b"evil")))
        with pytest.raises(UnsafePath, match="does not match its digest"):
            snapshot_materialize(sqlite_store, snapshot_id, tmp_path / "out")

    def test_unknown_snapshot_not_found(self, sqlite_store: Store, tmp_path: Path) -> None:
        """An id the store does not hold raises NotFound."""
        with pytest.raises(NotFound, match="not stored"):
            snapshot_materialize(sqlite_store, "0" * 64, tmp_path / "out")
