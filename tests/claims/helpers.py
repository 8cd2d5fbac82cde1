"""Helpers for the claims tests: a real working tree captured into a store, requests."""

from __future__ import annotations

from pathlib import Path

from probe_service.plans.persist import save_receipt
from probe_service.plans.signing import SigningKey, sign_receipt
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store

from ..receipt_fields import committed_fields, receipt_of

RECEIPT_SUPPORTS = "a" * 64
RECEIPT_REFUTES = "b" * 64
RECEIPT_INCONCLUSIVE = "c" * 64
#: Stub outcomes standing in for the receipts part (plans/receipts), not built yet.
STUB_RECEIPTS = {
    RECEIPT_SUPPORTS: "supports",
    RECEIPT_REFUTES: "refutes",
    RECEIPT_INCONCLUSIVE: "inconclusive",
}
PARSE_PY = "def parse(text):\n    return text.split(',')\n\n\nparse('a,b,')\n"


class WorkTree:
    """A real directory whose states are captured as snapshots into ``store``."""

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store

    def write(self, path: str, content: str | bytes) -> WorkTree:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        return self

    def delete(self, path: str) -> WorkTree:
        (self.root / path).unlink()
        return self

    def capture(self) -> str:
        return snapshot_capture(self.store, self.root).snapshot_id


def claim_request(
    snapshot_id: str, *dependencies: dict[str, object], **extra: object
) -> dict[str, object]:
    """A valid claim request in scope ``payments`` over ``dependencies``."""
    request: dict[str, object] = {
        "scope": "payments",
        "statement": "parse() accepts a trailing comma",
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "dependencies": list(dependencies) or [{"exact_blob": {"path": "src/parse.py"}}],
    }
    request.update(extra)
    return request


def grep(pattern: str, domain: str = "src/**/*.py", **extra: object) -> dict[str, object]:
    """A grep query spec."""
    return {"kind": "grep", "pattern": pattern, "domain": domain, **extra}


def stored_receipt(
    store: Store,
    outcome: str,
    snapshot_id: str = "0" * 64,
    *,
    executable: str = "pytest",
    run_id: str = "run-1",
    plan: dict[str, object] | None = None,
    signing_key: SigningKey | None = None,
) -> str:
    """Store a verified receipt that ran ``executable`` (or ``plan``, moved to
    ``snapshot_id``) on ``snapshot_id``, signed by ``signing_key`` if given; its sha."""
    base = plan or {"policy_id": "default", "executable": executable}
    committed = {
        **committed_fields(),
        "outcome": outcome,
        "reason": "oracle_passed",
        "exit_code": 0,
        "elapsed_us": 1,
        "snapshot_id": snapshot_id,
        "plan": {**base, "snapshot_id": snapshot_id},
        "plan_id": f"plan-{executable}-{snapshot_id[:8]}",
    }
    if signing_key is not None:
        committed["signer"] = signing_key.fingerprint
    receipt = receipt_of(committed, {"worker": "test"})
    envelope = sign_receipt(receipt, signing_key) if signing_key else None
    save_receipt(store, run_id, receipt, False, envelope)
    return receipt.receipt_sha256
