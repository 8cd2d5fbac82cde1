"""``byte-probe turns`` and ``byte-probe hook``: the CLI over the turn operations."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from probe_service.cli import main
from probe_service.policies import POLICY_FILE_ENV
from probe_service.store import DATABASE_URL_ENV

from ..conftest import seed_state


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated_sqlite_file: Path) -> Path:
    """A project holding its embedded store; no policy file (every turn under block)."""
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv(POLICY_FILE_ENV, str(tmp_path / "absent-policies.json"))
    root = seed_state(tmp_path / "project", migrated_sqlite_file)
    (root / "app.py").write_text("print('hi')\n")
    return root


def hook(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raw: dict[str, object]
) -> tuple[int, dict[str, object]]:
    stdin = SimpleNamespace(buffer=io.BytesIO(json.dumps(raw).encode()))
    monkeypatch.setattr("sys.stdin", stdin)
    code = main(["hook", "claude-code", "--scope", "web"])
    return code, json.loads(capsys.readouterr().out)


def test_a_prompt_and_a_tool_call_through_the_cli_are_listed_by_turns(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hook command answers in the protocol; `turns --json` lists the decision."""
    common = {"session_id": "s-1", "cwd": str(project), "transcript_path": "/t.jsonl"}
    code, answer = hook(
        monkeypatch,
        capsys,
        {**common, "hook_event_name": "UserPromptSubmit", "prompt": "what does app.py print"},
    )
    assert code == 0
    assert answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"  # type: ignore[index]
    code, answer = hook(
        monkeypatch,
        capsys,
        {**common, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {}},
    )
    assert (code, answer["hookSpecificOutput"]["permissionDecision"]) == (0, "allow")  # type: ignore[index]
    assert main(["turns", "--json", "--root", str(project)]) == 0
    listed = json.loads(capsys.readouterr().out)["turns"]
    assert [(d["tool"], d["posture"], d["verdict"]) for d in listed[0]["decisions"]] == [
        ("Read", "block", "allow")
    ]


def test_hook_install_prints_the_settings_snippet(capsys: pytest.CaptureFixture[str]) -> None:
    """`hook install claude-code` prints a hooks block for the three events."""
    assert main(["hook", "install", "claude-code", "--scope", "web"]) == 0
    snippet = json.loads(capsys.readouterr().out)
    assert sorted(snippet["hooks"]) == ["PreToolUse", "Stop", "UserPromptSubmit"]


def test_hook_install_refuses_another_agent(capsys: pytest.CaptureFixture[str]) -> None:
    """An agent the hook does not speak to is a usage error naming it."""
    assert main(["hook", "install", "cursor", "--scope", "web"]) != 0
    assert "No such command 'cursor'" in capsys.readouterr().err


def test_hook_install_write_merges_into_the_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--write keeps the other keys and hooks, and running it twice adds nothing."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"matcher": "Write", "hooks": [{"type": "command", "command": "fmt"}]}
    settings.write_text(json.dumps({"model": "x", "hooks": {"PreToolUse": [mine]}}))
    argv = ["hook", "install", "claude-code", "--scope", "web", "--write", str(settings)]
    assert main(argv) == 0
    assert main(argv) == 0
    capsys.readouterr()
    merged = json.loads(settings.read_text())
    assert merged["model"] == "x"
    assert merged["hooks"]["PreToolUse"][0] == mine
    assert len(merged["hooks"]["PreToolUse"]) == 2
    assert len(merged["hooks"]["Stop"]) == 1


def test_hook_install_write_refuses_a_settings_file_of_another_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A settings file whose hooks are not an object is refused by name, unchanged."""
    settings = tmp_path / "settings.json"
    settings.write_text('{"hooks": []}')
    argv = ["hook", "install", "claude-code", "--scope", "web", "--write", str(settings)]
    assert main(argv) != 0
    assert "settings.hooks: not a JSON object" in capsys.readouterr().err
    assert settings.read_text() == '{"hooks": []}'
