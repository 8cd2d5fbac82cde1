"""Ids a person can type: unique prefixes, ambiguous prefixes named, bare plan ids in JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probe_service.cli.ids import resolve_id
from probe_service.errors import AmbiguousId
from probe_service.plans.tables import plans
from probe_service.store import open_store

from .conftest import POLICY_ID, CliRunner, PlanCreator

TWINS = ("abcdef01" + "0" * 56, "abcdef01" + "1" * 56)


@pytest.fixture
def twin_plans(tmp_path: Path) -> None:
    """Two stored plan rows whose ids share the prefix ``abcdef01``."""
    store = open_store(tmp_path / "state")
    with store.transaction() as conn:
        conn.execute(
            plans.insert(),
            [{"plan_id": p, "body": "{}", "created_at": "2026-01-01T00:00:00Z"} for p in TWINS],
        )
    store.close()


class TestPrefixes:
    def test_plan_show_accepts_unique_prefix(self, cli: CliRunner, created: PlanCreator) -> None:
        """`plan show` with the first 8 hex characters shows the full plan id."""
        plan_id = created("print(1)")
        code, out, err = cli("plan", "show", plan_id[:8], "--json")
        assert code == 0, err
        assert json.loads(out)["plan_id"] == plan_id

    def test_run_and_receipt_show_accept_prefixes(
        self, cli: CliRunner, created: PlanCreator
    ) -> None:
        """`run` takes a plan id prefix; `receipt show` a receipt or run id prefix."""
        code, out, err = cli("run", created("print(1)")[:10], "--policy", POLICY_ID, "--json")
        assert code == 0, err
        doc = json.loads(out)
        for prefix in (doc["receipt_sha256"][:12], doc["run_id"][:8]):
            code, shown, err = cli("receipt", "show", prefix, "--json")
            assert code == 0, err
            assert json.loads(shown)["receipt_sha256"] == doc["receipt_sha256"]

    def test_ambiguous_prefix_is_a_typed_error(self, cli: CliRunner, twin_plans: None) -> None:
        """An ambiguous prefix exits 3 with one line naming the prefix and the match count."""
        code, out, err = cli("plan", "show", "abcdef01", "--json")
        assert code == 3
        assert err.count("\n") == 1
        assert "'abcdef01'" in err
        assert "matches 2 ids" in err
        assert json.loads(out)["error"] == "ambiguous_id"

    def test_resolve_id_raises_ambiguous(self, tmp_path: Path, twin_plans: None) -> None:
        """resolve_id raises AmbiguousId carrying the prefix and count; a longer one resolves."""
        store = open_store(tmp_path / "state")
        with pytest.raises(AmbiguousId) as caught:
            resolve_id(store, "plan", "abcdef01")
        assert (caught.value.prefix, caught.value.matches) == ("abcdef01", 2)
        assert resolve_id(store, "plan", "abcdef011") == TWINS[1]
        store.close()

    def test_short_prefix_is_not_resolved(self, cli: CliRunner, created: PlanCreator) -> None:
        """Fewer than 8 characters are taken as a whole id, which the table refuses."""
        code, _, err = cli("plan", "show", created("print(1)")[:7])
        assert code == 3
        assert "plan_id" in err


class TestSubmitBarePlanId:
    def test_bare_plan_id_line(self, cli: CliRunner, created: PlanCreator, tmp_path: Path) -> None:
        """A JSONL line holding a bare (unquoted) plan id is submitted like a quoted one."""
        plan_id = created("print(1)")
        path = tmp_path / "plans.jsonl"
        path.write_text(f"{plan_id}\n{json.dumps(plan_id)}\n")
        code, out, err = cli("submit", str(path), "--policy", POLICY_ID, "--json")
        assert code == 0, err
        assert [r["plan_id"] for r in json.loads(out)["results"]] == [plan_id, plan_id]
