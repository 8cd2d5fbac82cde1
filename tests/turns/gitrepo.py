"""A real git repository holding its embedded store and a live claim: what the git hooks
and the CI examples gate."""

from __future__ import annotations

import subprocess
from pathlib import Path

from probe_service.service import ProbeService
from probe_service.settings import read_settings

from ..claims.helpers import PARSE_PY
from ..conftest import seed_state

SCOPE = "payments"
STATEMENT = "parse accepts a trailing comma"


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git in ``repo`` as a developer would (hooks and all)."""
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=check
    )


def claimed_repo(root: Path, migrated: Path, policy_path: Path) -> Path:
    """``root``: a repository with one commit, its store (ignored by git) and a live claim
    of ``SCOPE`` resting on src/parse.py."""
    seed_state(root, migrated)
    (root / "src").mkdir()
    (root / "src/parse.py").write_text(PARSE_PY)
    (root / "README.md").write_text("notes\n")
    (root / ".gitignore").write_text(".zyte/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    with ProbeService.open(
        root, interface="host", settings=read_settings({}), policy_file=policy_path
    ) as svc:
        snapshot = svc.call("snapshot_capture", {"root": str(root)})["snapshot_id"]
        answer = {
            "scope": SCOPE,
            "question": "does parse accept a trailing comma",
            "answer": STATEMENT,
            "snapshot_id": snapshot,
            "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
        }
        svc.call("knowledge_record_answer", {"answer": answer})
    return root


def stale_edit(repo: Path) -> None:
    """Change the file the claim rests on."""
    (repo / "src/parse.py").write_text(PARSE_PY.replace("split(',')", "split(';')"))
