"""``byte-probe hook git``: the gate inside git's ``pre-commit`` and ``pre-push`` hooks.

docs/ARCHITECTURE.md, "The agent's turn" (git hooks). ``pre-commit`` captures the working
tree and gates it; ``pre-push`` reads git's lines ``<local ref> <local sha> <remote ref>
<remote sha>`` on stdin and gates each pushed ref's commit, captured from git objects: a
change from the remote's commit when this repository holds it (``gate_change``), else the
commit alone (a new branch, whose remote sha is all zeros). A deletion (local sha all
zeros) pushes no tree and is not gated. A scope with no live claim passes (nothing to
gate yet).

The administrator's posture for the repository's root and scope decides: ``block`` — a
failing gate, or a hook that cannot gate, exits non-zero and git refuses; ``warn`` — the
report is printed and the hook exits 0; ``report`` — the gate's obligations are recorded
in the store, nothing is printed, exit 0. A hook is an agent request whatever user runs
it (the host face: captures confined to the capture roots).

Installed scripts carry ``MARKER``; ``install_git_hooks`` replaces only a script carrying
it and refuses, naming the file and writing nothing, when a hook of another origin is
there (chain by calling the printed command from that hook instead).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from ..errors import Conflict, InternalError, InvalidInput, OSFailure, ProbeServiceError
from ..service import ProbeService
from ..service.adapters import GateReport, render_gate_text, turn_posture

__all__ = [
    "MARKER",
    "STAGES",
    "GitHookInstall",
    "hook_script",
    "hooks_dir",
    "install_git_hooks",
    "local_opener",
    "pushed_refs",
    "run_git_hook",
]

Stage = Literal["pre-commit", "pre-push"]
STAGES: tuple[Stage, ...] = ("pre-commit", "pre-push")
#: The line that marks a script as installed by us (and so ours to replace).
MARKER = "# byte-probe-git-hook 1"
#: Most bytes of pre-push input read (a line per pushed ref).
MAX_PUSH_INPUT = 1024 * 1024
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")

Opener = Callable[[str], ProbeService]


def local_opener(root: str) -> ProbeService:
    """A host-face session over the store under ``root``, in this process: a git hook
    gates the developer's own tree, confined to the repository like the host face's
    captures (docs/ARCHITECTURE.md, "git hooks and CI")."""
    return ProbeService.open(os.path.abspath(root), interface="host")


def hook_script(stage: Stage, command: str, scope: str) -> str:
    """The ``stage`` hook script running ``command hook git STAGE --scope SCOPE``; every
    word is shell-quoted, so a path with spaces or quotes stays one word."""
    if "\0" in command or "\n" in command or "\n" in scope:
        raise InvalidInput("command: a hook command holds no NUL byte or newline")
    line = shlex.join([command, "hook", "git", stage, "--scope", scope])
    return (
        "#!/bin/sh\n"
        f"{MARKER}\n"
        "# Installed by `byte-probe hook install git`; reinstalling replaces it. The gate\n"
        "# under the administrator's posture for this repository and scope.\n"
        f'exec {line} -- "$@"\n'
    )


#: Variables naming another repository than ``-C``'s: left out when asking about ``repo``.
_REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


def hooks_dir(repo: Path, environment: Mapping[str, str]) -> Path:
    """The directory git reads ``repo``'s hooks from (``core.hooksPath`` honoured); git
    runs with ``environment`` (the settings' copy) less what would name another
    repository.

    Raises InvalidInput when ``repo`` is not a git repository.
    """
    env = {k: v for k, v in environment.items() if k not in _REPOSITORY_VARIABLES}
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--path-format=absolute", "--git-path", "hooks"],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
    except OSError as exc:
        raise OSFailure(f"git: cannot run it ({exc})") from exc
    if done.returncode != 0:
        raise InvalidInput(f"repo: {repo} is not a git repository ({done.stderr.strip()})")
    return Path(done.stdout.strip())


@dataclass(frozen=True)
class GitHookInstall:
    """One hook file and what ``install_git_hooks`` did to it."""

    path: Path
    action: Literal["installed", "replaced", "unchanged"]


def install_git_hooks(
    repo: Path, command: str, scope: str, environment: Mapping[str, str]
) -> list[GitHookInstall]:
    """Write the ``pre-commit`` and ``pre-push`` scripts into ``repo``'s hooks directory;
    idempotent. Every existing file is checked before any is written.

    Raises Conflict naming a hook file not installed by us (nothing is written).
    """
    directory = hooks_dir(repo, environment)
    planned: list[tuple[Path, str, Literal["installed", "replaced", "unchanged"]]] = []
    for stage in STAGES:
        path, script = directory / stage, hook_script(stage, command, scope)
        try:
            present = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            planned.append((path, script, "installed"))
            continue
        except OSError as exc:
            raise OSFailure(f"{path}: cannot read it ({exc})") from exc
        if MARKER not in present.splitlines()[:3]:
            chain = shlex.join([command, "hook", "git", stage, "--scope", scope])
            raise Conflict(
                f"{path}: a {stage} hook byte-probe did not install is there; nothing was "
                f'written. Move it aside, or chain: add the line `{chain} -- "$@"` to it'
            )
        planned.append((path, script, "unchanged" if present == script else "replaced"))
    directory.mkdir(parents=True, exist_ok=True)
    for path, script, action in planned:
        if action != "unchanged":
            partial = path.with_name(f".{path.name}.byte-probe.tmp")
            partial.write_text(script, encoding="utf-8")
            partial.chmod(0o755)
            partial.replace(path)
    return [GitHookInstall(path, action) for path, _, action in planned]


@dataclass(frozen=True)
class PushedRef:
    """One line of pre-push input: a ref whose commit is pushed."""

    local_ref: str
    local_sha: str
    remote_ref: str
    remote_sha: str

    @property
    def new_branch(self) -> bool:
        """The remote has no commit there yet (git sends all zeros)."""
        return set(self.remote_sha) == {"0"}


def pushed_refs(text: str) -> list[PushedRef]:
    """The refs pre-push input ``text`` pushes; deletions (local sha all zeros) left out.

    Raises InvalidInput naming a line that is not git's documented shape.
    """
    found: list[PushedRef] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(" ")
        if len(parts) != 4 or not all(_SHA.fullmatch(parts[i]) for i in (1, 3)):
            raise InvalidInput(
                f"pre-push input line {number}: not '<local ref> <local sha> <remote ref> "
                "<remote sha>'"
            )
        ref = PushedRef(*parts)
        if set(ref.local_sha) != {"0"}:
            found.append(ref)
    return found


def _holds_commit(svc: ProbeService, root: str, sha: str) -> bool:
    # git runs the hook with GIT_DIR naming this very repository: the settings' copy fits.
    done = subprocess.run(
        ["git", "-C", root, "cat-file", "-e", f"{sha}^{{commit}}"],
        capture_output=True,
        check=False,
        env=dict(svc.settings.environment),
    )
    return done.returncode == 0


def _gate_commit(svc: ProbeService, root: str, scope: str) -> list[tuple[str, GateReport]]:
    snapshot = svc.snapshot_capture(root=root).snapshot_id
    return [("the working tree", svc.gate(snapshot_id=snapshot, scope=scope, allow_empty=True))]


def _gate_push(svc: ProbeService, root: str, scope: str, text: str) -> list[tuple[str, GateReport]]:
    reports: list[tuple[str, GateReport]] = []
    for ref in pushed_refs(text):
        label = f"{ref.local_ref} ({ref.local_sha[:12]})"
        if ref.new_branch or not _holds_commit(svc, root, ref.remote_sha):
            snapshot = svc.snapshot_capture(root=root, ref=ref.local_sha).snapshot_id
            report = svc.gate(snapshot_id=snapshot, scope=scope, allow_empty=True)
        else:
            report = svc.gate_change(
                base=ref.remote_sha,
                head=ref.local_sha,
                repository=root,
                scope=scope,
                allow_empty=True,
            ).report
        reports.append((label, report))
    return reports


def _verdict(stage: Stage, posture: str, failed: list[tuple[str, GateReport]], err: IO[str]) -> int:
    if not failed or posture == "report":
        return 0
    for label, report in failed:
        err.write(f"byte-probe {stage}: the gate on {label} failed\n")
        err.write(render_gate_text(report).rstrip("\n") + "\n")
    if posture == "warn":
        err.write(f"byte-probe {stage}: allowed under posture warn\n")
        return 0
    err.write(f"byte-probe {stage}: refused under posture block\n")
    return 1


def run_git_hook(
    stage: Stage, scope: str, root: str, stdin: IO[str], stderr: IO[str], opener: Opener
) -> int:
    """Gate what ``stage`` commits or pushes from the repository at ``root``; the hook's
    exit code under the posture (a failure to gate refuses under ``block`` only)."""
    posture = "block"
    try:
        text = stdin.read(MAX_PUSH_INPUT) if stage == "pre-push" else ""
        root = os.path.realpath(root)
        with opener(root) as svc:
            posture = turn_posture(svc.policy_file, root, scope)
            reports = (
                _gate_commit(svc, root, scope)
                if stage == "pre-commit"
                else _gate_push(svc, root, scope, text)
            )
        return _verdict(stage, posture, [(lb, r) for lb, r in reports if not r.passed], stderr)
    except ProbeServiceError as exc:
        error: ProbeServiceError = exc
    except Exception as exc:
        # A bug still answers under the posture: a hook must not let a commit through
        # silently under block because it crashed.
        error = InternalError(f"internal error ({type(exc).__name__}): {exc}")
    if posture == "report":
        return 0
    stderr.write(f"byte-probe {stage}: the hook could not gate ({error.code}): {error}\n")
    if posture == "warn":
        stderr.write(f"byte-probe {stage}: allowed under posture warn\n")
        return 0
    stderr.write(f"byte-probe {stage}: refused under posture block\n")
    return error.exit_code or 1
