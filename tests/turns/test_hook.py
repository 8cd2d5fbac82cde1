"""``byte-probe hook claude-code``: recorded Claude Code hook inputs in, the protocol's
exact answers out (docs/ARCHITECTURE.md, "The agent's turn"). The hook never crashes and
never lets a call through silently under the block posture."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from probe_service.faces.claude_code import answer_hook, run_hook, settings_snippet
from probe_service.service import ProbeService
from probe_service.settings import read_settings

from ..claims.helpers import PARSE_PY
from ..conftest import seed_state
from .conftest import PostureWriter

SCOPE = "payments"
SESSION = "5c1e6a4e-8d2f-4b1c-9a4e-0f1d2c3b4a59"


def event(cwd: Path, name: str, **fields: Any) -> bytes:
    """A hook input as Claude Code sends it (common fields, then the event's own)."""
    document = {
        "session_id": SESSION,
        "transcript_path": f"/home/dev/.claude/projects/x/{SESSION}.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }
    return json.dumps(document).encode()


def pre_tool(cwd: Path) -> bytes:
    return event(
        cwd,
        "PreToolUse",
        tool_name="Bash",
        tool_input={"command": "npm test", "description": "Run the tests"},
        tool_use_id="toolu_01ABC123",
    )


@pytest.fixture
def project(tmp_path: Path, migrated_sqlite_file: Path) -> Path:
    """A project directory holding its embedded store and a module a claim rests on."""
    root = seed_state(tmp_path / "project", migrated_sqlite_file)
    (root / "src").mkdir()
    (root / "src/parse.py").write_text(PARSE_PY)
    return root


@pytest.fixture
def opener(policy_path: Path) -> Any:
    """How the hook opens its session: the host face over the project's store."""

    def open_session(cwd: str) -> ProbeService:
        settings = read_settings({})
        return ProbeService.open(cwd, interface="host", settings=settings, policy_file=policy_path)

    return open_session


def claim_on(project: Path, opener: Any) -> str:
    """A live claim about parse resting on src/parse.py; its id."""
    with opener(str(project)) as svc:
        snapshot = svc.call("snapshot_capture", {"root": "."})["snapshot_id"]
        answer = {
            "scope": SCOPE,
            "question": "does parse accept a trailing comma",
            "answer": "parse accepts a trailing comma",
            "snapshot_id": snapshot,
            "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
        }
        return str(svc.call("knowledge_record_answer", {"answer": answer})["claim_id"])


def prompt(project: Path, opener: Any) -> dict[str, Any]:
    raw = event(project, "UserPromptSubmit", prompt="does parse accept a trailing comma?")
    return answer_hook(raw, SCOPE, opener)


def test_user_prompt_submit_begins_a_turn_and_returns_the_brief(project: Path, opener: Any) -> None:
    """UserPromptSubmit answers additionalContext naming the turn and the related claim."""
    claim = claim_on(project, opener)
    answer = prompt(project, opener)
    assert list(answer) == ["hookSpecificOutput"]
    output = answer["hookSpecificOutput"]
    assert set(output) == {"hookEventName", "additionalContext"}
    assert output["hookEventName"] == "UserPromptSubmit"
    assert "byte-probe turn trn_" in output["additionalContext"]
    assert f"claim {claim} [current]" in output["additionalContext"]


def test_pre_tool_use_allows_then_denies_once_the_claim_went_stale(
    project: Path, opener: Any
) -> None:
    """PreToolUse: allow on an unchanged tree; deny, with the reason, once the claim is stale."""
    claim = claim_on(project, opener)
    prompt(project, opener)
    assert answer_hook(pre_tool(project), SCOPE, opener) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "nothing the plan rests on moved",
        }
    }
    (project / "src/parse.py").write_text("def parse(text):\n    return []\n")
    output = answer_hook(pre_tool(project), SCOPE, opener)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    reason = output["permissionDecisionReason"]
    assert f"claim {claim} (stale): dependencies[0] exact_blob: src/parse.py changed" in reason
    assert "To clear: `byte-probe recheck" in output["permissionDecisionReason"]


def test_the_denial_holds_in_the_next_turn_until_a_grounded_answer(
    project: Path, opener: Any
) -> None:
    """The next prompt's turn is still denied; its stable turn_end unblocks it."""
    claim_on(project, opener)
    prompt(project, opener)
    (project / "src/parse.py").write_text("changed\n")
    answer_hook(pre_tool(project), SCOPE, opener)
    context = prompt(project, opener)["hookSpecificOutput"]["additionalContext"]
    assert "BLOCKED" in context
    denied = answer_hook(pre_tool(project), SCOPE, opener)["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny"
    with opener(str(project)) as svc:
        turn = svc.call("turn_current", {"root": str(project), "scope": SCOPE, "session": SESSION})[
            "turn"
        ]["turn_id"]
        ended = svc.call("turn_end", {"turn": turn, "answer": "parse now returns []"})
    assert ended["grounded"] is True
    allowed = answer_hook(pre_tool(project), SCOPE, opener)["hookSpecificOutput"]
    assert allowed["permissionDecision"] == "allow"


def test_warn_posture_asks(project: Path, opener: Any, write_postures: PostureWriter) -> None:
    """Under warn a stale plan's tool call is put to the user (ask)."""
    write_postures([{"root": str(project), "posture": "warn"}])
    claim_on(project, opener)
    prompt(project, opener)
    (project / "src/parse.py").write_text("changed\n")
    output = answer_hook(pre_tool(project), SCOPE, opener)["hookSpecificOutput"]
    assert output["permissionDecision"] == "ask"


def test_stop_reminds_of_a_moved_tree_and_a_missing_answer(project: Path, opener: Any) -> None:
    """Stop: the stability check and the reminder as systemMessage; it never blocks."""
    prompt(project, opener)
    (project / "src/new.py").write_text("x = 1\n")
    answer = answer_hook(event(project, "Stop", stop_hook_active=False), SCOPE, opener)
    assert list(answer) == ["systemMessage"]
    assert "the tree moved during turn trn_" in answer["systemMessage"]
    assert "no answer recorded: call byte_turn_end" in answer["systemMessage"]


class TestNeverCrashes:
    @pytest.mark.parametrize(
        ("raw", "named"),
        [
            (b"not json", "hook input: not JSON"),
            (b"[1, 2]", "not a JSON object"),
            (b'{"hook_event_name": "Elsewhere"}', "hook_event_name"),
        ],
    )
    def test_input_not_in_the_documented_shape_is_denied(
        self, raw: bytes, named: str, opener: Any
    ) -> None:
        """Unreadable input answers deny (the block posture) naming what is wrong."""
        output = answer_hook(raw, SCOPE, opener)["hookSpecificOutput"]
        assert output["permissionDecision"] == "deny"
        assert named in output["permissionDecisionReason"]

    def test_a_pre_tool_use_without_tool_name_is_denied_naming_it(
        self, project: Path, opener: Any
    ) -> None:
        """A PreToolUse missing a documented field: deny naming the field."""
        raw = event(project, "PreToolUse", tool_input={})
        output = answer_hook(raw, SCOPE, opener)["hookSpecificOutput"]
        assert output["permissionDecision"] == "deny"
        assert "tool_name" in output["permissionDecisionReason"]

    def test_no_turn_for_the_session_is_denied_under_block(
        self, project: Path, opener: Any
    ) -> None:
        """A tool call with no turn begun is not let through under block."""
        output = answer_hook(pre_tool(project), SCOPE, opener)["hookSpecificOutput"]
        assert output["permissionDecision"] == "deny"
        assert "turn: no turn begun" in output["permissionDecisionReason"]

    def test_a_failure_under_warn_asks(
        self, project: Path, opener: Any, write_postures: PostureWriter
    ) -> None:
        """Under warn, a failure after the posture is known answers ask."""
        write_postures([{"root": str(project), "posture": "warn"}])
        output = answer_hook(pre_tool(project), SCOPE, opener)["hookSpecificOutput"]
        assert output["permissionDecision"] == "ask"

    def test_a_bug_is_denied(self, project: Path) -> None:
        """An exception that is not a refusal still answers deny, never a traceback."""

        def broken(cwd: str) -> ProbeService:
            raise RuntimeError("boom")

        output = answer_hook(pre_tool(project), SCOPE, broken)["hookSpecificOutput"]
        assert output["permissionDecision"] == "deny"
        assert "internal error (RuntimeError): boom" in output["permissionDecisionReason"]

    def test_run_hook_prints_one_json_line_and_exits_0(self, opener: Any) -> None:
        """The process form: one JSON document on stdout, exit code 0, even for bad input."""
        out = io.StringIO()
        assert run_hook(io.BytesIO(b"{"), out, SCOPE, opener) == 0
        answer = json.loads(out.getvalue())
        assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_settings_snippet_installs_the_three_events() -> None:
    """hook install prints a hooks block running the hook on each event."""
    snippet = settings_snippet("byte-probe", "payments")
    line = 'byte-probe hook claude-code --scope payments --project "$CLAUDE_PROJECT_DIR"'
    hook = {"type": "command", "command": line, "timeout": 30}
    assert snippet == {
        "hooks": {
            "UserPromptSubmit": [{"hooks": [hook]}],
            "PreToolUse": [{"matcher": "*", "hooks": [hook]}],
            "Stop": [{"hooks": [hook]}],
        }
    }


def test_a_cd_inside_the_project_keeps_the_turn(project: Path, opener: Any) -> None:
    """With --project the turn is found (and checked) from a subdirectory the agent cd'd to."""
    raw = event(project / "src", "UserPromptSubmit", prompt="does parse accept a trailing comma")
    assert "byte-probe turn trn_" in str(answer_hook(raw, SCOPE, opener, str(project)))
    raw = event(
        project / "src", "PreToolUse", tool_name="Read", tool_input={"file_path": "parse.py"}
    )
    output = answer_hook(raw, SCOPE, opener, str(project))["hookSpecificOutput"]
    assert output["permissionDecision"] == "allow"
