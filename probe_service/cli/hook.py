"""``byte-probe hook``: the turn operations inside an agent's hooks (docs/ARCHITECTURE.md,
"The agent's turn")."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from probe_service.errors import UsageError
from probe_service.faces.claude_code import default_opener, run_hook, settings_snippet

hook_app = typer.Typer(help="Answer an agent's hook events, or print their settings.")

ScopeOption = Annotated[
    str, typer.Option("--scope", help="The scope (project) of the turns' claims.")
]


@hook_app.command("claude-code")
def claude_code(scope: ScopeOption) -> None:
    """Read one Claude Code hook event (UserPromptSubmit, PreToolUse, Stop) as JSON on
    stdin and print the answer in its protocol; always exits 0, and any failure answers
    deny under the block posture (ask under warn).

    Example: echo '{"hook_event_name": "Stop", ...}' | byte-probe hook claude-code --scope web
    """
    raise typer.Exit(run_hook(sys.stdin.buffer, sys.stdout, scope, default_opener))


@hook_app.command("install")
def install(
    agent: Annotated[str, typer.Argument(help="The agent: claude-code.")],
    scope: ScopeOption,
    command: Annotated[
        str, typer.Option("--command", help="How the hook runs byte-probe.")
    ] = "byte-probe",
) -> None:
    """Print the settings snippet that installs the hooks (merge it into
    .claude/settings.json).

    Example: byte-probe hook install claude-code --scope web
    """
    if agent != "claude-code":
        raise UsageError(f"agent: {agent!r} is not supported (claude-code)")
    sys.stdout.write(json.dumps(settings_snippet(command, scope), indent=2) + "\n")
