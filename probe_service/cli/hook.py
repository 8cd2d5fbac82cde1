"""``byte-probe hook``: the turn operations inside an agent's hooks (docs/ARCHITECTURE.md,
"The agent's turn")."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from probe_service.errors import InvalidInput, UsageError
from probe_service.faces.claude_code import (
    default_opener,
    merge_settings,
    run_hook,
    settings_snippet,
)
from probe_service.faces.git_hooks import (
    STAGES,
    hook_script,
    install_git_hooks,
    local_opener,
    run_git_hook,
)
from probe_service.settings import read_settings

hook_app = typer.Typer(help="Answer an agent's hook events, or print their settings.")

ScopeOption = Annotated[
    str, typer.Option("--scope", help="The scope (project) of the turns' claims.")
]


@hook_app.command("claude-code")
def claude_code(
    scope: ScopeOption,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="The project's root: the turns' root and where the store is (default: the "
            "event's cwd, which follows the agent's cd).",
        ),
    ] = None,
) -> None:
    """Read one Claude Code hook event (UserPromptSubmit, PreToolUse, Stop) as JSON on
    stdin and print the answer in its protocol; always exits 0, and any failure answers
    deny under the block posture (ask under warn).

    Example: echo '{"hook_event_name": "Stop", ...}' | byte-probe hook claude-code --scope web
    """
    raise typer.Exit(run_hook(sys.stdin.buffer, sys.stdout, scope, default_opener, project))


@hook_app.command("git")
def git(
    stage: Annotated[str, typer.Argument(help="The git hook: pre-commit or pre-push.")],
    scope: ScopeOption,
    arguments: Annotated[
        list[str] | None, typer.Argument(help="What git passes (pre-push: remote, URL).")
    ] = None,
) -> None:
    """Gate what a git hook commits (the working tree) or pushes (each pushed ref's
    commit, from git objects; pre-push reads git's ref lines on stdin) under the posture
    the administrator set for the repository and scope: block exits 1 on a failing gate,
    warn prints the report and exits 0, report records only. Run from the repository's
    top level, as git runs its hooks.

    Example: byte-probe hook git pre-commit --scope web
    """
    if stage not in STAGES:
        raise UsageError(f"stage: {stage!r} is not one of {', '.join(STAGES)}")
    del arguments  # the remote's name and URL: the gate reads what is pushed, not where
    code = run_git_hook(stage, scope, ".", sys.stdin, sys.stderr, local_opener)
    raise typer.Exit(code)


install_app = typer.Typer(help="Print or write the settings or scripts installing the hooks.")
hook_app.add_typer(install_app, name="install")

CommandOption = Annotated[str, typer.Option("--command", help="How the hook runs byte-probe.")]


@install_app.command("claude-code")
def install_claude_code(
    scope: ScopeOption,
    command: CommandOption = "byte-probe",
    write: Annotated[
        Path | None,
        typer.Option("--write", help="Merge the hooks into this settings file instead."),
    ] = None,
) -> None:
    """Print the settings snippet that installs the hooks, or merge it into a settings
    file with --write (other keys and hooks kept; an entry already there is not repeated).

    Example: byte-probe hook install claude-code --scope web --write .claude/settings.json
    """
    snippet = settings_snippet(command, scope)
    if write is None:
        sys.stdout.write(json.dumps(snippet, indent=2) + "\n")
        return
    try:
        current = json.loads(write.read_text(encoding="utf-8")) if write.exists() else {}
    except ValueError as exc:
        raise InvalidInput(f"{write}: not JSON: {exc}") from exc
    merged = merge_settings(current, snippet)
    write.parent.mkdir(parents=True, exist_ok=True)
    partial = write.with_name(write.name + ".tmp")
    partial.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    partial.replace(write)
    sys.stdout.write(f"wrote {write}\n")


@install_app.command("git")
def install_git(
    scope: ScopeOption,
    command: CommandOption = "byte-probe",
    write: Annotated[
        bool, typer.Option("--write", help="Write the scripts into the repository's hooks.")
    ] = False,
    repo: Annotated[
        Path, typer.Option("--repo", help="The repository whose hooks are installed.")
    ] = Path("."),
) -> None:
    """Print the pre-commit and pre-push scripts, or write them into the repository's
    hooks directory with --write (core.hooksPath honoured). Running it again changes
    nothing; a script it installed is replaced, a hook of another origin is refused,
    naming the file, and nothing is written (chain it: call the printed command from it).

    Example: byte-probe hook install git --scope web --write --repo .
    """
    if not write:
        for stage in STAGES:
            sys.stdout.write(f"# .git/hooks/{stage}\n{hook_script(stage, command, scope)}\n")
        return
    for done in install_git_hooks(repo, command, scope, read_settings().environment):
        sys.stdout.write(f"{done.action} {done.path}\n")
