"""``byte-probe hook claude-code``: the turn operations in Claude Code's hook protocol.

docs/ARCHITECTURE.md, "The agent's turn". One process per hook event reads the event's
JSON on stdin and prints one JSON answer on stdout, always exiting 0:

- ``UserPromptSubmit`` → ``turn_begin`` (the prompt is the question, the session id the
  turn's session key); the brief goes back as ``hookSpecificOutput.additionalContext``.
- ``PreToolUse`` → ``dispatch_check`` for the session's current turn; the verdict is
  ``hookSpecificOutput.permissionDecision``: ``block`` → ``deny``, ``warn`` → ``ask``,
  ``allow`` → ``allow``, with the reasons as ``permissionDecisionReason``.
- ``Stop`` → the end-of-turn stability check (a capture compared with the turn's
  snapshot) and a reminder of blocked plans, as ``systemMessage``; it never blocks the
  stop (the agent records its answer with the ``turn_end`` MCP tool).

Claude Code lets a tool call through when a hook crashes or times out, so this face never
raises: input that is not the documented shape, an unknown turn, a store that does not
open or a bug all answer ``deny`` under the ``block`` posture (``ask`` under ``warn``,
``allow`` under ``report``), naming what failed. The posture is the administrator's; when
even that cannot be read, the answer is ``deny``.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InternalError, InvalidInput, ProbeServiceError, validation_message
from .serve_client import ServiceCalls

__all__ = [
    "PERMISSION",
    "answer_hook",
    "default_opener",
    "merge_settings",
    "run_hook",
    "settings_snippet",
]

#: The permission decision each verdict (or posture, on failure) answers.
PERMISSION: dict[str, Literal["allow", "ask", "deny"]] = {
    "block": "deny",
    "warn": "ask",
    "allow": "allow",
    "report": "allow",
}
#: Most bytes of hook input read; more is not the documented shape.
MAX_INPUT_BYTES = 4 * 1024 * 1024
#: Longest brief handed back as context (Claude Code shows a preview of longer text).
MAX_CONTEXT_CHARS = 9000

Opener = Callable[[str], ServiceCalls]


class _Common(BaseModel):
    # Claude Code adds fields over releases; only the ones read are checked.
    model_config = ConfigDict(frozen=True, extra="ignore")

    session_id: str = Field(min_length=1, max_length=200)
    cwd: str = Field(min_length=1, max_length=4096)
    hook_event_name: Literal["UserPromptSubmit", "PreToolUse", "Stop"]


class _Prompt(_Common):
    prompt: str = Field(max_length=1_000_000)


class _PreTool(_Common):
    tool_name: str = Field(min_length=1, max_length=200)
    tool_input: dict[str, Any]


class _Stop(_Common):
    stop_hook_active: bool = False


_EVENTS: dict[str, type[_Common]] = {
    "UserPromptSubmit": _Prompt,
    "PreToolUse": _PreTool,
    "Stop": _Stop,
}


def _parse(raw: bytes) -> _Common:
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"hook input: not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidInput("hook input: not a JSON object")
    event = document.get("hook_event_name")
    model = _EVENTS.get(event) if isinstance(event, str) else None
    if model is None:
        raise InvalidInput(f"hook_event_name: {event!r} is not one of {', '.join(sorted(_EVENTS))}")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise InvalidInput(f"hook input: {validation_message(exc, 'hook input')}") from exc


def _pre_tool(decision: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def _context(text: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": text[:MAX_CONTEXT_CHARS],
        }
    }


class _Hook:
    """One event against one session; ``posture`` is the administrator's, once read."""

    def __init__(self, svc: ServiceCalls, event: _Common, scope: str, root: str) -> None:
        #: The project's root: the turn's root and where its store lives (the event's
        #: ``cwd`` follows the agent's ``cd``; the project directory does not).
        self.svc, self.event, self.scope, self.root = svc, event, scope, root
        self.posture = "block"
        self.blocked: list[dict[str, Any]] = []

    def current(self) -> dict[str, Any] | None:
        found = self.svc.call(
            "turn_current",
            {"root": self.root, "scope": self.scope, "session": self.event.session_id},
        )
        self.posture = found["posture"]
        self.blocked = found["blocked_plans"]
        turn: dict[str, Any] | None = found["turn"]
        return turn

    def prompt(self, event: _Prompt) -> dict[str, Any]:
        self.current()
        begun = self.svc.call(
            "turn_begin",
            {
                "root": self.root,
                "scope": self.scope,
                "question": event.prompt[:4000] or None,
                "session": event.session_id,
            },
        )
        return _context(
            f"byte-probe turn {begun['turn_id']} (posture {begun['posture']}). "
            "When you give your answer, record it with the byte_turn_end tool "
            f"(turn {begun['turn_id']!r}, the spans you cite).\n{begun['text']}"
        )

    def pre_tool(self, event: _PreTool) -> dict[str, Any]:
        turn = self.current()
        if turn is None:
            raise InvalidInput(
                "turn: no turn begun for this session under this root (is the "
                "UserPromptSubmit hook installed?)"
            )
        decision = self.svc.call(
            "dispatch_check",
            {
                "turn": turn["turn_id"],
                "tool": event.tool_name,
                "arguments": event.tool_input,
                "root": self.root,
            },
        )
        lines = [decision["message"]]
        for reason in decision["reasons"]:
            moved = "; ".join(reason["what_moved"][:3])
            lines.append(f"claim {reason['claim_id']} ({reason['kind']}): {moved}")
        if decision["reasons"]:
            lines.append("To clear: " + decision["reasons"][0]["clear_with"])
        return _pre_tool(PERMISSION[decision["verdict"]], "\n".join(lines))

    def stop(self, event: _Stop) -> dict[str, Any]:
        turn = self.current()
        if turn is None:
            return {}
        # As the turn: a workspace lease the turn holds does not refuse its own check.
        capture = {"root": self.root, "turn": turn["turn_id"]}
        now = self.svc.call("snapshot_capture", capture)["snapshot_id"]
        notes = []
        if now != turn["snapshot_id"]:
            notes.append(
                f"the tree moved during turn {turn['turn_id']}: an answer recorded now is "
                "not grounded on a stable snapshot and clears no block"
            )
        if turn["claim_id"] is None:
            notes.append(f"no answer recorded: call byte_turn_end with turn {turn['turn_id']!r}")
        for block in self.blocked:
            notes.append(
                f"a plan resting on claim {block['claim_id']} is blocked until a later turn "
                "records a grounded answer (byte_turn_end on an unchanged tree)"
            )
        return {"systemMessage": "byte-probe: " + "; ".join(notes)} if notes else {}


def _failure(event_name: str | None, posture: str, error: ProbeServiceError) -> dict[str, Any]:
    message = f"byte-probe hook failed ({error.code}): {error}"
    if event_name == "UserPromptSubmit":
        return _context(message + "; tool calls will be refused under posture " + posture)
    if event_name == "Stop":
        return {"systemMessage": message}
    # PreToolUse, or input whose event cannot be told: never let the call through silently.
    return _pre_tool(PERMISSION[posture] if posture != "report" else "allow", message)


def answer_hook(
    raw: bytes, scope: str, opener: Opener, project: str | None = None
) -> dict[str, Any]:
    """The answer to one hook event's input ``raw`` for the project at ``project`` (by
    default the event's ``cwd``); never raises."""
    event_name: str | None = None
    posture = "block"
    try:
        try:
            head = json.loads(raw.decode("utf-8"))
            event_name = head.get("hook_event_name") if isinstance(head, dict) else None
        except (UnicodeDecodeError, ValueError):
            event_name = None
        event = _parse(raw)
        root = os.path.abspath(os.path.join(event.cwd, project)) if project else event.cwd
        with opener(root) as svc:
            hook = _Hook(svc, event, scope, root)
            try:
                if isinstance(event, _Prompt):
                    return hook.prompt(event)
                if isinstance(event, _PreTool):
                    return hook.pre_tool(event)
                assert isinstance(event, _Stop)  # noqa: S101 - _parse gives one of three
                return hook.stop(event)
            finally:
                posture = hook.posture
    except ProbeServiceError as exc:
        return _failure(event_name if isinstance(event_name, str) else None, posture, exc)
    except Exception as exc:
        # A bug: still the protocol's answer under the posture, never a crash.
        bug = InternalError(f"internal error ({type(exc).__name__}): {exc}")
        return _failure(event_name if isinstance(event_name, str) else None, posture, bug)


def run_hook(
    stdin: IO[bytes], stdout: IO[str], scope: str, opener: Opener, project: str | None = None
) -> int:
    """Read one event from ``stdin``, print its answer on ``stdout``; always 0."""
    try:
        raw = stdin.read(MAX_INPUT_BYTES + 1)
    except OSError:
        raw = b""
    if len(raw) > MAX_INPUT_BYTES:
        raw = b""
    answer = answer_hook(raw, scope, opener, project)
    stdout.write(json.dumps(answer, sort_keys=True) + "\n")
    stdout.flush()
    return 0


def default_opener(cwd: str) -> ServiceCalls:
    """With ``PROBE_SERVE_SOCKET`` set, a connection to the local service (which knows
    the caller from the socket: docs/ARCHITECTURE.md, "Local service"); else a machine-face
    session whose store is under ``cwd`` (an agent request: captures confined to the
    project, as on the host face). Raises SettingsError, ServiceUnavailable, or what
    opening the store raises: the hook answers each under the posture."""
    from ..settings import read_settings
    from .serve_client import HOOK_CALL_SECONDS, ServiceClient

    settings = read_settings()
    if settings.serve_socket is not None:
        # A thin client: the store, the service and their imports stay in the service.
        return ServiceClient(settings.serve_socket, timeout=HOOK_CALL_SECONDS)
    from ..service import ProbeService

    return ProbeService.open(os.path.abspath(cwd), settings=settings, interface="host")


#: The events installed, with the matcher of each (PreToolUse: every tool).
_INSTALLED = (("UserPromptSubmit", None), ("PreToolUse", "*"), ("Stop", None))


def settings_snippet(command: str, scope: str, timeout: int = 30) -> dict[str, Any]:
    """The ``hooks`` block of Claude Code's settings that runs ``command hook claude-code
    --scope SCOPE --project "$CLAUDE_PROJECT_DIR"`` on each installed event (the shell
    Claude Code runs it in expands the project directory)."""
    line = shlex.join([command, "hook", "claude-code", "--scope", scope])
    line += ' --project "$CLAUDE_PROJECT_DIR"'
    hooks: dict[str, Any] = {}
    for event, matcher in _INSTALLED:
        command_hook = {"type": "command", "command": line, "timeout": timeout}
        entry: dict[str, Any] = {"hooks": [command_hook]}
        if matcher is not None:
            entry = {"matcher": matcher, **entry}
        hooks[event] = [entry]
    return {"hooks": hooks}


def merge_settings(settings: object, snippet: dict[str, Any]) -> dict[str, Any]:
    """``settings`` (a Claude Code settings document) with ``snippet``'s hooks added: an
    entry already present is not added twice, every other key is kept.

    Raises InvalidInput naming the key that is not the documented shape.
    """
    if not isinstance(settings, dict):
        raise InvalidInput("settings: not a JSON object")
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput("settings.hooks: not a JSON object")
    merged = {**hooks}
    for event, entries in snippet["hooks"].items():
        present = merged.get(event, [])
        if not isinstance(present, list):
            raise InvalidInput(f"settings.hooks.{event}: not a JSON array")
        merged[event] = present + [e for e in entries if e not in present]
    return {**settings, "hooks": merged}
