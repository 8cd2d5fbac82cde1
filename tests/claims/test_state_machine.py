"""Random edit sequences on a small repository: claim_check always agrees with a
brute-force recomputation of every dependency, and change_analyze opens an obligation for
every claim the step made stale."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from probe_service.claims import (
    change_analyze,
    claim_check,
    claim_create,
    evaluate_query,
    obligation_list,
)
from probe_service.claims.models import Dependency, parse_request
from probe_service.claims.views import TreeView
from probe_service.errors import InvalidClaim
from probe_service.snapshot import snapshot_capture
from probe_service.store import open_store

PATHS = ["src/a.py", "src/b.py", "src/sub/c.py", "docs/d.md", "top.py"]
CONTENTS = ["", "x = 1\n", "def legacy():\n    pass\n", "legacy()\n", "parse(1)\n", "def (:\n"]
DEPENDENCIES: list[dict[str, object]] = [
    *({"exact_blob": {"path": p}} for p in [*PATHS, "src/new.py"]),
    {"query_set": {"query": {"kind": "grep", "pattern": "legacy", "domain": "src/**"}}},
    {"query_set": {"query": {"kind": "path_glob", "domain": "src/*.py"}}},
    {"query_set": {"query": {"kind": "python_symbol", "name": "legacy", "domain": "**/*.py"}}},
    {"negative_query": {"query": {"kind": "grep", "pattern": "legacy", "domain": "src/**"}}},
    {"negative_query": {"query": {"kind": "grep", "pattern": "parse", "domain": "**/*.md"}}},
    {"negative_query": {
        "query": {"kind": "python_symbol", "name": "legacy", "domain": "src/**/*.py"}}},
]  # fmt: skip


def expected_state(dep: dict[str, object], then: dict[str, bytes], now: dict[str, bytes]) -> str:
    """Brute force: recompute the dependency at both trees from the files themselves."""
    if "exact_blob" in dep:
        path = dep["exact_blob"]["path"]  # type: ignore[index]
        return "current" if then.get(path) == now.get(path) else "needs_recheck"
    spec = parse_request(Dependency, dep)
    query = (spec.query_set or spec.negative_query).query  # type: ignore[union-attr]
    before = evaluate_query(query, TreeView.from_files(then))
    after = evaluate_query(query, TreeView.from_files(now))
    if spec.query_set is not None:
        same = (before.matches, before.complete, before.truncated) == (
            after.matches, after.complete, after.truncated,
        )  # fmt: skip
        return "current" if same else "needs_recheck"
    return (
        "current" if before.complete and after.complete and not after.matches else ("needs_recheck")
    )


class ClaimsMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="claims-sm-"))
        (self.tmp / "state").mkdir()
        (self.tmp / "work").mkdir()
        self.store = open_store(self.tmp / "state")
        self.files: dict[str, bytes] = {}
        self.claims: dict[str, tuple[dict[str, object], dict[str, bytes]]] = {}
        self.snapshot = self.capture()
        self.previous = self.snapshot
        self.previous_states: dict[str, str] = {}
        for dep in DEPENDENCIES:  # an empty tree admits every dependency, negatives included
            self.record_claim(dep)

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def capture(self) -> str:
        return snapshot_capture(self.store, self.tmp / "work").snapshot_id

    def step(self) -> None:
        self.previous, self.snapshot = self.snapshot, self.capture()
        self.analyse_step()

    @rule(path=st.sampled_from(PATHS), content=st.sampled_from(CONTENTS))
    def write(self, path: str, content: str) -> None:
        target = self.tmp / "work" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        self.files[path] = content.encode()
        self.step()

    @rule(path=st.sampled_from(PATHS))
    def delete(self, path: str) -> None:
        if path in self.files:
            (self.tmp / "work" / path).unlink()
            del self.files[path]
            self.step()

    @rule(dep=st.sampled_from(DEPENDENCIES))
    def record_claim(self, dep: dict[str, object]) -> None:
        request = {"scope": "sm", "statement": f"claim {len(self.claims)}", "kind": "behavior",
                   "snapshot_id": self.snapshot, "dependencies": [dep]}  # fmt: skip
        try:
            record = claim_create(
                self.store, request, receipts=lambda _r: None, allow_incomplete=True
            )
        except InvalidClaim:
            assert "negative_query" in dep  # only an already-matching negative is refused
            return
        self.claims[record.claim_id] = (dep, dict(self.files))
        # A claim on an incomplete negative baseline is stale from birth: no later step
        # makes it stale, so change_analyze owes it nothing (the gate still reports it).
        self.previous_states[record.claim_id] = expected_state(dep, self.files, self.files)

    def analyse_step(self) -> None:
        analysis = change_analyze(self.store, self.previous, self.snapshot)
        opened = {o.claim_id for o in analysis.opened}
        # Snapshots are content-addressed: returning to an earlier tree finds the
        # obligation opened then, so "has one" is the rule, not "opened one now".
        holding = {o.claim_id for o in obligation_list(self.store, snapshot_id=self.snapshot)}
        for claim_id, (dep, then) in self.claims.items():
            now_state = expected_state(dep, then, self.files)
            stale = now_state != "current"
            if stale and self.previous_states[claim_id] == "current":
                assert claim_id in holding, f"index missed {claim_id} ({dep})"
            if not stale:
                assert claim_id not in opened
            self.previous_states[claim_id] = now_state

    @invariant()
    def check_agrees_with_brute_force(self) -> None:
        if not getattr(self, "claims", None):
            return
        ids = list(self.claims)
        for check in claim_check(self.store, ids, self.snapshot):
            dep, then = self.claims[check.claim_id]
            assert check.state == expected_state(dep, then, self.files), (dep, check.reasons)

    @invariant()
    def obligations_are_unique_per_claim_and_snapshot(self) -> None:
        if not hasattr(self, "store"):
            return
        seen = [(o.claim_id, o.snapshot_id) for o in obligation_list(self.store, limit=10_000)]
        assert len(seen) == len(set(seen))


ClaimsMachine.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestClaimsMachine = ClaimsMachine.TestCase
TestClaimsMachine.__doc__ = "claim_check and change_analyze agree with brute force on random edits."


def test_claim_stale_at_birth_needs_no_obligation_from_an_unrelated_change() -> None:
    """Regression (found by the machine): a negative claim on an incomplete baseline is
    needs_recheck from birth; an edit outside its domain is not what made it stale, so
    change_analyze opens nothing and claim_check still says needs_recheck.

    Decision: the model was wrong, not change_analyze. change_analyze answers "what did this
    change make stale" through the dependency index; a claim stale at birth is reported by
    ``gate`` on any snapshot, and ``claim_create`` now refuses such a claim unless
    ``allow_incomplete`` is given.
    """
    machine = ClaimsMachine()
    try:
        machine.setup()
        machine.write(path="src/a.py", content="def (:\n")
        legacy = {
            "negative_query": {
                "query": {"kind": "python_symbol", "name": "legacy", "domain": "src/**/*.py"}
            }
        }
        machine.record_claim(dep=legacy)
        (claim_id,) = [c for c, (dep, _) in machine.claims.items() if dep is legacy]
        before = machine.snapshot
        machine.write(path="docs/d.md", content="")
        machine.check_agrees_with_brute_force()
        opened = change_analyze(machine.store, before, machine.snapshot).opened
        assert claim_id not in {o.claim_id for o in opened}
        (check,) = claim_check(machine.store, [claim_id], machine.snapshot)
        assert check.state == "needs_recheck"
    finally:
        machine.teardown()
