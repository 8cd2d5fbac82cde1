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


@hook_app.command("install")
def install(
    agent: Annotated[str, typer.Argument(help="The agent: claude-code.")],
    scope: ScopeOption,
    command: Annotated[
        str, typer.Option("--command", help="How the hook runs byte-probe.")
    ] = "byte-probe",
    write: Annotated[
        Path | None,
        typer.Option("--write", help="Merge the hooks into this settings file instead."),
    ] = None,
) -> None:
    """Print the settings snippet that installs the hooks, or merge it into a settings
    file with --write (other keys and hooks kept; an entry already there is not repeated).

    Example: byte-probe hook install claude-code --scope web --write .claude/settings.json
    """
    if agent != "claude-code":
        raise UsageError(f"agent: {agent!r} is not supported (claude-code)")
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
