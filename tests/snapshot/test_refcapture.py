"""snapshot_capture_ref: a ref's tree from git objects, equal to a clean checkout's capture,
with git confined to the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import func, select

from probe_service.errors import InvalidInput, LimitExceeded, NotFound, UnsafePath
from probe_service.snapshot import (
    CaptureLimits,
    load_snapshot,
    snapshot_capture,
    snapshot_capture_ref,
    snapshot_capture_refs,
)
from probe_service.snapshot import gitobjects as gitobjects_module
from probe_service.snapshot.attributes import attribute_notes
from probe_service.snapshot.gitcache import decode_blob_pack, encode_blob_pack
from probe_service.store import Store
from probe_service.store.schema import blobs, snapshots

from .gitrepos import clean_checkout, commit_all, git, init_repo, link, write


def _count(store: Store, table: object) -> int:
    with store.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository with four commits: executables, links (inside, dangling, escaping),
    a skipped directory, a nested tree, an executable bit flipped, a link retargeted."""
    repo = init_repo(tmp_path / "src")
    write(repo, "README.md", b"hello\n")
    write(repo, "bin/run.sh", b"#!/bin/sh\necho hi\n", executable=True)
    link(repo, "docs", "README.md")
    write(repo, "node_modules/dep/index.js", b"skipped\n")
    commits = [commit_all(repo, "one")]
    write(repo, "src/a/b/c.py", b"print(1)\n")
    link(repo, "dangling", "nowhere/at/all")
    link(repo, "escape", "../../etc/passwd")
    commits.append(commit_all(repo, "two"))
    write(repo, "README.md", b"hello again\n", executable=True)
    link(repo, "docs", "src/a")
    commits.append(commit_all(repo, "three"))
    (repo / "bin/run.sh").unlink()
    write(repo, "same1.txt", b"dup\n")
    write(repo, "same2.txt", b"dup\n")
    commits.append(commit_all(repo, "four"))
    return repo, commits


class TestEqualsCheckout:
    def test_each_commit_matches_a_clean_checkout(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """On every commit the ref capture's id equals a work-tree capture of a clean
        checkout of it (executables, links, a skipped directory)."""
        repo, commits = history
        roots = (str(tmp_path),)
        ids = set()
        for n, commit in enumerate(commits):
            from_ref = snapshot_capture_ref(sqlite_store, repo, commit, roots)
            checkout = clean_checkout(repo, commit, tmp_path / f"co{n}")
            from_tree = snapshot_capture(sqlite_store, checkout)
            assert from_ref.snapshot_id == from_tree.snapshot_id, commit
            assert (from_ref.files, from_ref.symlinks) == (from_tree.files, from_tree.symlinks)
            ids.add(from_ref.snapshot_id)
        assert len(ids) == len(commits)

    def test_executable_and_link_recorded_as_git_stores_them(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A 100755 blob is an executable file; a 120000 blob a link whose target is its bytes."""
        repo, commits = history
        result = snapshot_capture_ref(sqlite_store, repo, commits[1], (str(tmp_path),))
        entries = load_snapshot(sqlite_store, result.snapshot_id).by_path()
        assert entries["bin/run.sh"].executable
        assert not entries["README.md"].executable
        assert entries["docs"].kind == "symlink"
        assert entries["docs"].target == "README.md"
        assert entries["escape"].target == "../../etc/passwd"
        assert "node_modules/dep/index.js" not in entries
        assert result.escaping_links
        assert "escape" in result.escaping_links[0]

    def test_branch_tag_and_navigation_name_the_same_tree(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A branch, an annotated tag and ``main~1`` resolve to their commits' trees."""
        repo, commits = history
        git(repo, "tag", "-a", "-m", "t", "v3", commits[2])
        roots = (str(tmp_path),)
        by_tag, by_nav, by_id = snapshot_capture_refs(
            sqlite_store, repo, ["v3", "main~1", commits[2]], roots
        )
        assert by_tag.snapshot_id == by_nav.snapshot_id == by_id.snapshot_id
        head = snapshot_capture_ref(sqlite_store, repo, "main", roots)
        assert head.snapshot_id != by_id.snapshot_id


class TestNothingRuns:
    def test_no_filter_hook_or_checkout(self, sqlite_store: Store, tmp_path: Path) -> None:
        """A smudge filter and a hook the repository configures never run, the index and
        work tree are untouched, and the blob is recorded as stored (no eol rewrite)."""
        repo = init_repo(tmp_path / "r")
        write(repo, "a.txt", b"line\n")
        write(repo, ".gitattributes", b"*.txt filter=evil eol=crlf\n")
        commit = commit_all(repo)
        marker = tmp_path / "ran"
        git(repo, "config", "filter.evil.smudge", f"touch {marker}; cat")
        git(repo, "config", "core.hooksPath", "hooks")
        write(repo, "hooks/post-checkout", f"#!/bin/sh\ntouch {marker}\n".encode(), executable=True)
        index = (repo / ".git" / "index").read_bytes()
        write(repo, "a.txt", b"dirty work tree\n")
        result = snapshot_capture_ref(sqlite_store, repo, commit, (str(tmp_path),))
        assert not marker.exists()
        assert (repo / ".git" / "index").read_bytes() == index
        assert (repo / "a.txt").read_bytes() == b"dirty work tree\n"
        entry = load_snapshot(sqlite_store, result.snapshot_id).by_path()["a.txt"]
        assert entry.size == len(b"line\n")

    def test_replace_refs_are_ignored(self, sqlite_store: Store, tmp_path: Path) -> None:
        """A replace ref swapping the commit for another never changes what is captured."""
        repo = init_repo(tmp_path / "r")
        write(repo, "a.txt", b"real\n")
        real = commit_all(repo, "real")
        write(repo, "a.txt", b"a fake, longer\n")
        fake = commit_all(repo, "fake")
        git(repo, "replace", real, fake)
        assert git(repo, "show", f"{real}:a.txt") == "a fake, longer"  # git follows it
        result = snapshot_capture_ref(sqlite_store, repo, real, (str(tmp_path),))
        entry = load_snapshot(sqlite_store, result.snapshot_id).by_path()["a.txt"]
        assert entry.size == len(b"real\n")

    def test_grafts_are_ignored(self, sqlite_store: Store, tmp_path: Path) -> None:
        """A graft giving the head another parent never changes what ``main~1`` names."""
        repo = init_repo(tmp_path / "r")
        commits = []
        for text in ("a\n", "bb\n", "ccc\n"):
            write(repo, "f", text.encode())
            commits.append(commit_all(repo, text))
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "grafts").write_text(f"{commits[2]} {commits[0]}\n")
        assert git(repo, "rev-parse", "main~1") == commits[0]  # git itself follows it
        result = snapshot_capture_ref(sqlite_store, repo, "main~1", (str(tmp_path),))
        assert load_snapshot(sqlite_store, result.snapshot_id).by_path()["f"].size == 3

    def test_repository_git_shim_never_runs(
        self, sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A ``git`` in the repository or on PATH is never the git that runs."""
        repo = init_repo(tmp_path / "r")
        write(repo, "a", b"a")
        commit = commit_all(repo)
        marker = tmp_path / "shim-ran"
        write(repo, "git", f"#!/bin/sh\ntouch {marker}\n".encode(), executable=True)
        monkeypatch.setenv("PATH", f"{repo}:{os.environ['PATH']}")
        snapshot_capture_ref(sqlite_store, repo, commit, (str(tmp_path),))
        assert not marker.exists()


class TestTreeCache:
    def test_unchanged_tree_costs_one_lookup(
        self,
        sqlite_store: Store,
        history: tuple[Path, list[str]],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Recapturing a tree already captured asks git one question and reads no blob,
        even through another ref naming the same tree."""
        repo, _commits = history
        roots = (str(tmp_path),)
        first = snapshot_capture_ref(sqlite_store, repo, "main", roots)
        git(repo, "commit", "-q", "--allow-empty", "-m", "same tree")
        asked: list[str] = []
        real_info, real_contents = (
            gitobjects_module.GitObjects.info,
            gitobjects_module.GitObjects.contents,
        )

        def info(self: object, names: list[str]) -> object:
            asked.extend(names)
            return real_info(self, names)  # type: ignore[arg-type]

        def contents(self: object, oids: list[str]) -> object:
            asked.extend(oids)
            return real_contents(self, oids)  # type: ignore[arg-type]

        monkeypatch.setattr(gitobjects_module.GitObjects, "info", info)
        monkeypatch.setattr(gitobjects_module.GitObjects, "contents", contents)
        again = snapshot_capture_ref(sqlite_store, repo, "main", roots)
        assert asked == ["main^{tree}"]
        assert again.snapshot_id == first.snapshot_id
        assert again.git is not None
        assert again.git.tree_cached
        assert (again.read_files, again.created) == (0, False)

    def test_head_after_base_reads_only_new_blobs(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """After a base is captured, its child's capture reads only the blobs the base did
        not hold (the blob-id cache), and gives the id a cold store gives."""
        repo, commits = history
        roots = (str(tmp_path),)
        snapshot_capture_ref(sqlite_store, repo, commits[1], roots)
        head = snapshot_capture_ref(sqlite_store, repo, commits[2], roots)
        assert head.read_files == 1  # README.md's new bytes; the rest came from the cache
        assert head.cached_files == head.files - 1
        checkout = clean_checkout(repo, commits[2], tmp_path / "co")
        assert head.snapshot_id == snapshot_capture(sqlite_store, checkout).snapshot_id

    def test_undecodable_blob_pack_is_an_empty_cache(self) -> None:
        """A pack that does not decode reads as no cache; a good one round-trips."""
        cache = {"ab" * 20: ("cd" * 32, 7), "ef" * 20: ("01" * 32, 0)}
        assert decode_blob_pack(encode_blob_pack(cache)) == cache
        assert decode_blob_pack(encode_blob_pack(cache)[:-1]) == {}
        assert decode_blob_pack(b"junk") == {}

    def test_cache_entry_without_its_snapshot_is_ignored(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A cached tree whose snapshot row is gone is captured again, not trusted."""
        repo, _ = history
        roots = (str(tmp_path),)
        first = snapshot_capture_ref(sqlite_store, repo, "main", roots)
        with sqlite_store.transaction() as conn:
            conn.execute(snapshots.delete().where(snapshots.c.snapshot_id == first.snapshot_id))
        again = snapshot_capture_ref(sqlite_store, repo, "main", roots)
        assert again.created
        assert again.snapshot_id == first.snapshot_id


class TestForgedObjects:
    def test_loose_object_whose_bytes_do_not_hash_to_its_id_refused(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """A loose object file holding other bytes than its name says (cat-file does not
        check) is refused naming it; nothing is stored or cached."""
        repo = init_repo(tmp_path / "r")
        write(repo, "a.txt", b"the real bytes\n")
        commit = commit_all(repo)
        blob = git(repo, "rev-parse", "HEAD:a.txt")
        forged = git(repo, "hash-object", "-w", "--stdin", input_text="forged bytes!!\n")
        path = repo / ".git" / "objects" / blob[:2] / blob[2:]
        path.chmod(0o644)
        path.write_bytes((repo / ".git" / "objects" / forged[:2] / forged[2:]).read_bytes())
        with pytest.raises(UnsafePath, match=f"object {blob}: its bytes do not hash to its id"):
            snapshot_capture_ref(sqlite_store, repo, commit, (str(tmp_path),))
        assert _count(sqlite_store, snapshots) == 0

    def test_cache_of_one_repository_never_answers_for_another(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """The same tree in another repository is read there, not taken from the cache."""
        repo, _ = history
        clone = tmp_path / "clone"
        git(tmp_path, "clone", "-q", str(repo), str(clone))
        roots = (str(tmp_path),)
        first = snapshot_capture_ref(sqlite_store, repo, "main", roots)
        other = snapshot_capture_ref(sqlite_store, clone, "main", roots)
        assert other.snapshot_id == first.snapshot_id
        assert other.git is not None
        assert not other.git.tree_cached
        assert other.read_files > 0


class TestBadInput:
    @pytest.mark.parametrize(
        ("ref", "error", "words"),
        [
            ("no-such-branch", NotFound, "no-such-branch"),
            ("main~40", NotFound, "main~40"),
            ("main:README.md", InvalidInput, "not a plain revision"),
            ("--output=/tmp/x", InvalidInput, "not a plain revision"),
            ("main\ninfo HEAD", InvalidInput, "not a plain revision"),
            ("main..HEAD", InvalidInput, "not a plain revision"),
        ],
    )
    def test_bad_ref_refused_writing_nothing(
        self,
        sqlite_store: Store,
        history: tuple[Path, list[str]],
        tmp_path: Path,
        ref: str,
        error: type[Exception],
        words: str,
    ) -> None:
        """A ref that does not exist or is not a plain revision is refused naming it."""
        repo, _ = history
        with pytest.raises(error, match=words.replace("~", ".").replace("\n", ".")):
            snapshot_capture_ref(sqlite_store, repo, ref, (str(tmp_path),))
        assert _count(sqlite_store, snapshots) == 0

    def test_ref_naming_a_blob_refused(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A blob's id is refused naming the blob, and nothing is written."""
        repo, _ = history
        blob = git(repo, "rev-parse", "main:README.md")
        with pytest.raises(InvalidInput, match=f"names a blob \\({blob}\\)"):
            snapshot_capture_ref(sqlite_store, repo, blob, (str(tmp_path),))
        assert _count(sqlite_store, snapshots) == _count(sqlite_store, blobs) == 0

    def test_one_bad_ref_of_two_writes_nothing(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """Every ref is resolved before any tree is captured."""
        repo, _ = history
        with pytest.raises(NotFound, match="nope"):
            snapshot_capture_refs(sqlite_store, repo, ["main", "nope"], (str(tmp_path),))
        assert _count(sqlite_store, snapshots) == _count(sqlite_store, blobs) == 0

    def test_limits_refused_before_a_blob_is_read(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """The file and workspace caps hold, naming the path, before any blob is stored."""
        repo, _ = history
        roots = (str(tmp_path),)
        with pytest.raises(LimitExceeded, match=r"README\.md: 12 bytes exceeds the 8-byte"):
            snapshot_capture_ref(
                sqlite_store, repo, "main", roots, limits=CaptureLimits(max_file_bytes=8)
            )
        with pytest.raises(LimitExceeded, match="workspace passes the 20-byte"):
            snapshot_capture_ref(
                sqlite_store, repo, "main", roots, limits=CaptureLimits(max_total_bytes=20)
            )
        assert _count(sqlite_store, blobs) == 0

    def test_tree_deeper_than_a_snapshot_may_be_refused_while_walked(
        self, sqlite_store: Store, tmp_path: Path
    ) -> None:
        """A chain of 300 nested trees is refused naming the depth limit, in the words a
        work-tree capture uses, before any blob is read."""
        repo = init_repo(tmp_path / "r")
        blob = git(repo, "hash-object", "-w", "--stdin", input_text="x\n")
        tree = git(repo, "mktree", input_text=f"100644 blob {blob}\tf\n")
        for _ in range(300):
            tree = git(repo, "mktree", input_text=f"040000 tree {tree}\td\n")
        with pytest.raises(UnsafePath, match="256"):
            snapshot_capture_ref(sqlite_store, repo, tree, (str(tmp_path),))
        assert _count(sqlite_store, blobs) == 0

    def test_not_a_repository(self, sqlite_store: Store, tmp_path: Path) -> None:
        """A directory without .git is refused naming it."""
        (tmp_path / "plain").mkdir()
        with pytest.raises(NotFound, match=r"holds no \.git"):
            snapshot_capture_ref(sqlite_store, tmp_path / "plain", "HEAD", (str(tmp_path),))


class TestConfinement:
    def test_repository_outside_roots_refused(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A repository whose .git lies outside the roots is refused naming it."""
        repo, _ = history
        (tmp_path / "elsewhere").mkdir()
        with pytest.raises(UnsafePath, match="outside the capture roots"):
            snapshot_capture_ref(sqlite_store, repo, "main", (str(tmp_path / "elsewhere"),))

    def test_git_file_pointing_outside_refused(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A ``.git`` file naming a git directory outside the roots is refused."""
        repo, _ = history
        inside = tmp_path / "allowed" / "checkout"
        inside.mkdir(parents=True)
        (inside / ".git").write_text(f"gitdir: {repo / '.git'}\n")
        with pytest.raises(UnsafePath, match=r"\.git file: .* outside the capture roots"):
            snapshot_capture_ref(sqlite_store, inside, "main", (str(tmp_path / "allowed"),))

    def test_alternate_pointing_outside_refused(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """An alternate object directory outside the roots is refused, naming it."""
        outside, _ = history
        allowed = tmp_path / "allowed"
        allowed.mkdir()
        borrower = allowed / "b"
        git(allowed, "clone", "-q", "--shared", str(outside), str(borrower))
        with pytest.raises(UnsafePath, match=r"alternate: .* outside the capture roots"):
            snapshot_capture_ref(sqlite_store, borrower, "main", (str(allowed),))

    def test_alternate_inside_roots_accepted(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """An alternate inside the roots is read, as git would."""
        source, commits = history
        borrower = tmp_path / "b"
        git(tmp_path, "clone", "-q", "--shared", str(source), str(borrower))
        result = snapshot_capture_ref(sqlite_store, borrower, commits[-1], (str(tmp_path),))
        assert result.files > 0

    def test_linked_object_directory_refused(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A link among the object directory's entries is refused."""
        repo, _ = history
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "elsewhere", repo / ".git" / "objects" / "zz")
        with pytest.raises(UnsafePath, match=r"objects/zz' is a link"):
            snapshot_capture_ref(sqlite_store, repo, "main", (str(tmp_path),))

    def test_bare_repository(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A bare repository is read as its git directory."""
        repo, commits = history
        bare = tmp_path / "bare.git"
        git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
        from_bare = snapshot_capture_ref(sqlite_store, bare, "main", (str(tmp_path),))
        from_repo = snapshot_capture_ref(sqlite_store, repo, commits[-1], (str(tmp_path),))
        assert from_bare.snapshot_id == from_repo.snapshot_id


class TestAttributes:
    def test_rewriting_attributes_are_noted(self, sqlite_store: Store, tmp_path: Path) -> None:
        """Lines setting eol, ident, a filter (LFS) are noted; unsetting ones are not."""
        repo = init_repo(tmp_path / "r")
        write(
            repo,
            ".gitattributes",
            b"# comment\n*.txt eol=crlf\n*.bin -text binary\n*.psd filter=lfs diff=lfs\n",
        )
        write(repo, "sub/.gitattributes", b"*.c ident\n")
        commit = commit_all(repo)
        result = snapshot_capture_ref(sqlite_store, repo, commit, (str(tmp_path),))
        notes = attribute_notes(sqlite_store, load_snapshot(sqlite_store, result.snapshot_id))
        assert [n.split(":", 2)[:2] for n in notes] == [
            [".gitattributes", "2"],
            [".gitattributes", "4"],
            ["sub/.gitattributes", "1"],
        ]
        assert "filter=lfs" in notes[1]
        assert "diff=lfs" not in notes[1]

    def test_no_attributes_no_notes(
        self, sqlite_store: Store, history: tuple[Path, list[str]], tmp_path: Path
    ) -> None:
        """A snapshot without .gitattributes has no notes."""
        repo, _ = history
        result = snapshot_capture_ref(sqlite_store, repo, "main", (str(tmp_path),))
        assert attribute_notes(sqlite_store, load_snapshot(sqlite_store, result.snapshot_id)) == ()
