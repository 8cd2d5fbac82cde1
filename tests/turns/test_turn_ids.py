"""Turn ids by unique prefix through the one id resolver, on every face (docs/ARCHITECTURE.md,
"Ids"): a prefix is answered as the full id; an unknown or ambiguous one is the
resolver's typed refusal, the same everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.service import ProbeService
from probe_service.settings import POLICY_FILE_ENV
from probe_service.store import DATABASE_URL_ENV, open_store
from probe_service.turns.tables import turns

from ..claims.helpers import PARSE_PY
from ..faces.drivers import FACES, open_face

#: Two stored turns whose ids share this prefix (rows written as-is: an ambiguous prefix
#: is refused before anything would read them).
TWIN_TURNS = ("trn_5eed5eed" + "0" * 24, "trn_5eed5eed" + "1" * 24)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store root holding a working tree, the twin turns and no policy file."""
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv(POLICY_FILE_ENV, str(tmp_path / "absent-policies.json"))
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src/parse.py").write_text(PARSE_PY)
    store = open_store(root)
    try:
        row = {
            "root": str(root),
            "scope": "payments",
            "symbols": "[]",
            "snapshot_id": "0" * 64,
            "rests_on": "[]",
            "interface": "python",
            "began_at": "2026-01-01T00:00:00+00:00",
            "expires_at": "2026-01-01T12:00:00+00:00",
        }
        with store.transaction() as conn:
            conn.execute(turns.insert(), [{**row, "turn_id": t} for t in TWIN_TURNS])
    finally:
        store.close()
    return root


def test_a_turn_prefix_works_on_every_face(root: Path) -> None:
    """dispatch_check and turn_end take trn_ and 8 hex of a turn id as the full id."""
    for face in FACES:
        with open_face(face, root) as driver:
            begun = driver.call(
                "turn_begin", {"root": str(root), "scope": "payments", "question": "parse"}
            )
            turn = begun["turn_id"]
            decided = driver.call("dispatch_check", {"turn": turn[:12], "tool": "Bash"})
            ended = driver.call("turn_end", {"turn": turn[:12], "answer": "it splits"})
        assert (decided["turn_id"], decided["verdict"]) == (turn, "allow"), face
        assert ended["turn_id"] == turn, face


def test_unknown_and_ambiguous_turn_prefixes_are_refused_alike(root: Path) -> None:
    """The resolver's codes, naming the field and the candidates, on every face; short or
    misshapen prefixes are refused before any lookup."""
    cases = [
        ({"turn": "trn_ffffffff"}, "not_found", "turn"),
        ({"turn": "trn_5eed5eed"}, "ambiguous_id", TWIN_TURNS[1]),
        ({"turn": "trn_5eed"}, "invalid_input", "turn"),
        ({"turn": "5eed5eed" + "0" * 24}, "invalid_input", "turn"),
    ]
    answers: dict[str, list[dict[str, str]]] = {}
    for face in FACES:
        with open_face(face, root) as driver:
            answers[face] = [
                driver.call(op, {**params, **extra})["error"]
                for params, _, _ in cases
                for op, extra in (
                    ("dispatch_check", {"tool": "Bash"}),
                    ("turn_end", {"answer": "a"}),
                )
            ]
    expected = [(code, named) for _, code, named in cases for _ in range(2)]
    for (code, named), error in zip(expected, answers["python"], strict=True):
        assert error["code"] == code, error
        assert named in error["message"], error
    assert [e["code"] for e in answers["host"]] == [e["code"] for e in answers["python"]]
    assert [e["code"] for e in answers["mcp"]] == [e["code"] for e in answers["python"]]


def test_the_id_resolve_row_knows_turns(root: Path) -> None:
    """id_resolve answers a turn prefix too (the resolver's one table of kinds)."""
    with ProbeService.open(root) as svc:
        assert svc.id_resolve(kind="turn", value=TWIN_TURNS[0][:14]).id == TWIN_TURNS[0]
