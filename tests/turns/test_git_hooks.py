"""``byte-probe hook install git``: real ``git commit`` and ``git push`` run the installed
hooks, which gate under the administrator's posture (docs/ARCHITECTURE.md, "The agent's
turn", git hooks)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probe_service.cli import main
from probe_service.errors import InvalidInput
from probe_service.faces.git_hooks import MARKER, hook_script, pushed_refs, run_git_hook
from probe_service.service import ProbeService
from probe_service.settings import DATABASE_URL_ENV, POLICY_FILE_ENV, read_settings

from .conftest import PostureWriter
from .gitrepo import SCOPE, STATEMENT, claimed_repo, git, stale_edit

BYTE_PROBE = str(Path(sys.executable).parent / "byte-probe")
ZERO = "0" * 40


@pytest.fixture
def repo(
    tmp_path: Path, migrated_sqlite_file: Path, policy_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A claimed repository with the hooks installed; the hook processes read the test's
    policy file and the embedded store."""
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv(POLICY_FILE_ENV, str(policy_path))
    root = claimed_repo(tmp_path / "repo", migrated_sqlite_file, policy_path)
    assert main(["hook", "install", "git", "--scope", SCOPE, "--write", "--repo", str(root),
                 "--command", BYTE_PROBE]) == 0  # fmt: skip
    return root


class TestPreCommit:
    def test_a_stale_claim_blocks_the_commit_and_a_current_one_lets_it_through(
        self, repo: Path
    ) -> None:
        """Under block (no policy entry) a commit whose tree moved a claim's file is
        refused naming the claim; with the file restored the commit goes through."""
        stale_edit(repo)
        refused = git(repo, "commit", "-q", "-am", "semicolons", check=False)
        assert refused.returncode != 0
        assert "refused under posture block" in refused.stderr
        assert STATEMENT in refused.stderr
        assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "1"
        git(repo, "checkout", "--", "src/parse.py")
        (repo / "README.md").write_text("more notes\n")
        passed = git(repo, "commit", "-q", "-am", "notes", check=False)
        assert passed.returncode == 0, passed.stderr
        assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "2"

    def test_warn_prints_the_report_and_lets_the_commit_through(
        self, repo: Path, write_postures: PostureWriter
    ) -> None:
        """Under warn the failing gate is printed and the commit is made."""
        write_postures([{"root": str(repo), "scope": SCOPE, "posture": "warn"}])
        stale_edit(repo)
        done = git(repo, "commit", "-q", "-am", "semicolons", check=False)
        assert done.returncode == 0, done.stderr
        assert "allowed under posture warn" in done.stderr
        assert STATEMENT in done.stderr

    def test_report_records_only(self, repo: Path, write_postures: PostureWriter) -> None:
        """Under report the commit is made silently; the obligation is in the store."""
        write_postures([{"root": str(repo), "posture": "report"}])
        stale_edit(repo)
        done = git(repo, "commit", "-q", "-am", "semicolons", check=False)
        assert (done.returncode, done.stderr) == (0, "")
        with ProbeService.open(repo, settings=read_settings({})) as svc:
            assert len(svc.call("obligation_list", {"scope": SCOPE, "state": "open"})) == 1


class TestPrePush:
    def test_a_push_is_gated_per_ref_new_branch_existing_branch_and_deletion(
        self, repo: Path, tmp_path: Path
    ) -> None:
        """New branches (all-zero remote sha) gate the commit alone, an existing branch the
        change from the remote's commit; a stale push is refused, a deletion is not gated."""
        remote = tmp_path / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        git(repo, "remote", "add", "origin", str(remote))
        first = git(repo, "push", "-q", "origin", "main", check=False)
        assert first.returncode == 0, first.stderr
        stale_edit(repo)
        git(repo, "commit", "-q", "--no-verify", "-am", "semicolons")
        existing = git(repo, "push", "-q", "origin", "main", check=False)
        assert existing.returncode != 0
        assert "refused under posture block" in existing.stderr
        assert "refs/heads/main" in existing.stderr
        new = git(repo, "push", "-q", "origin", "main:feature", check=False)
        assert new.returncode != 0
        assert "refs/heads/main" in new.stderr
        assert git(repo, "ls-remote", "--heads", "origin").stdout.count("refs/heads/") == 1
        git(repo, "checkout", "HEAD~1", "--", "src/parse.py")
        git(repo, "commit", "-q", "--no-verify", "-am", "commas again")
        passed = git(repo, "push", "-q", "origin", "main", "main:side", check=False)
        assert passed.returncode == 0, passed.stderr
        stale = git(repo, "rev-parse", "HEAD~1").stdout.strip()
        git(repo, "push", "-q", "--no-verify", "origin", f"{stale}:refs/heads/old")
        deleted = git(repo, "push", "-q", "origin", "--delete", "old", check=False)
        assert deleted.returncode == 0, deleted.stderr


class TestInstall:
    def test_installing_twice_changes_nothing(
        self, repo: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A second install reports both scripts unchanged; they carry the marker."""
        capsys.readouterr()
        args = ["hook", "install", "git", "--scope", SCOPE, "--write", "--repo", str(repo)]
        assert main([*args, "--command", BYTE_PROBE]) == 0
        assert capsys.readouterr().out.count("unchanged") == 2
        assert MARKER in (repo / ".git/hooks/pre-push").read_text()

    def test_a_hook_of_another_origin_is_refused_naming_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An existing pre-push not ours: exit 3 naming the file; pre-commit not written."""
        repo = tmp_path / "other"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        theirs = repo / ".git/hooks/pre-push"
        theirs.write_text("#!/bin/sh\nmake lint\n")
        code = main(["hook", "install", "git", "--scope", SCOPE, "--write", "--repo", str(repo)])
        assert code == 3
        assert str(theirs) in capsys.readouterr().err
        assert theirs.read_text() == "#!/bin/sh\nmake lint\n"
        assert not (repo / ".git/hooks/pre-commit").exists()

    def test_a_command_path_with_spaces_quotes_and_dollars_stays_one_word(
        self, tmp_path: Path
    ) -> None:
        """The script runs the command at a hostile path with exactly the hook's words,
        and nothing in the path is run by the shell."""
        directory = tmp_path / "bin dir" / "it's $(touch pwned) `touch pwned2`"
        directory.mkdir(parents=True)
        record = tmp_path / "argv"
        fake = directory / "byte probe"
        fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {str(record)!r}\n')
        fake.chmod(0o755)
        repo = tmp_path / "quoted"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        main(["hook", "install", "git", "--scope", SCOPE, "--write", "--repo", str(repo),
              "--command", str(fake)])  # fmt: skip
        git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
            "--allow-empty", "-m", "x")  # fmt: skip
        words = ["hook", "git", "pre-commit", "--scope", SCOPE, "--"]
        assert record.read_text().splitlines() == words
        assert not any(p.name.startswith("pwned") for p in tmp_path.rglob("pwned*"))
        assert not list(Path(os.getcwd()).glob("pwned*"))

    def test_a_command_with_a_newline_is_refused(self) -> None:
        """A newline would end the exec line: refused before any script is made."""
        with pytest.raises(InvalidInput, match="newline"):
            hook_script("pre-commit", "byte-probe\ntouch pwned", SCOPE)


class TestPushedRefs:
    def test_deletions_are_left_out_and_new_branches_flagged(self) -> None:
        """git's all-zero local sha deletes (nothing to gate); an all-zero remote sha is a
        new branch."""
        sha = "a" * 40
        text = (
            f"refs/heads/new {sha} refs/heads/new {ZERO}\n"
            f"(delete) {ZERO} refs/heads/gone {sha}\n"
            f"refs/heads/main {sha} refs/heads/main {'b' * 40}\n"
        )
        found = pushed_refs(text)
        assert [(r.local_ref, r.new_branch) for r in found] == [
            ("refs/heads/new", True),
            ("refs/heads/main", False),
        ]

    @pytest.mark.parametrize(
        "line", ["refs/heads/x abc refs/heads/x def", "only three words", f"a {'g' * 40} b {ZERO}"]
    )
    def test_a_line_not_of_gits_shape_is_refused(self, line: str) -> None:
        """Anything but four words with two shas is refused, naming the line."""
        with pytest.raises(InvalidInput, match="line 1"):
            pushed_refs(line + "\n")


class TestFailures:
    """A hook that cannot gate never lets a commit or push through silently under block."""

    @staticmethod
    def run(stage: str, text: str, opener: object, root: Path) -> tuple[int, str]:
        err = io.StringIO()
        code = run_git_hook(stage, SCOPE, str(root), io.StringIO(text), err, opener)  # type: ignore[arg-type]
        return code, err.getvalue()

    @staticmethod
    def opener(policy_path: Path) -> object:
        def open_session(root: str) -> ProbeService:
            return ProbeService.open(
                root, interface="host", settings=read_settings({}), policy_file=policy_path
            )

        return open_session

    def test_input_not_of_gits_shape_refuses_under_block_only(
        self, repo: Path, policy_path: Path, write_postures: PostureWriter
    ) -> None:
        """Malformed pre-push input: exit 3 naming the line under block; warn says it and
        lets the push through; report lets it through silently."""
        code, said = self.run("pre-push", "not git's lines\n", self.opener(policy_path), repo)
        assert code == 3
        assert "pre-push input line 1" in said
        assert "refused under posture block" in said
        write_postures([{"root": str(repo), "posture": "warn"}])
        code, said = self.run("pre-push", "not git's lines\n", self.opener(policy_path), repo)
        assert (code, "allowed under posture warn" in said) == (0, True)
        write_postures([{"root": str(repo), "posture": "report"}])
        assert self.run("pre-push", "x\n", self.opener(policy_path), repo) == (0, "")

    def test_a_bug_refuses_under_block(self, repo: Path) -> None:
        """An exception that is no refusal of ours still refuses (internal, exit 70)."""

        def broken(root: str) -> ProbeService:
            raise RuntimeError("boom")

        code, said = self.run("pre-commit", "", broken, repo)
        assert code == 70
        assert "(internal)" in said
        assert "boom" in said

    def test_install_without_write_prints_both_scripts(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --write nothing is written; both scripts are printed, each marked."""
        assert main(["hook", "install", "git", "--scope", SCOPE]) == 0
        out = capsys.readouterr().out
        assert out.count(MARKER) == 2
        assert "hook git pre-push --scope payments --" in out
