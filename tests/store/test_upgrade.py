"""A store written by the previous release (681c6eb) opens, migrates to head, and keeps
every fact it held (docs/UPGRADING.md, "How upgrading is tested").

``tests/fixtures/stores/681c6eb-<database>/`` was written by 681c6eb's own code running its
probes in its sandbox (``scripts/release_fixtures.py``): the SQLite file as that release
left it, and for PostgreSQL a ``pg_dump`` of the schema it filled. ``expected.json`` holds
what that release answered (claims, obligations, the gate on each snapshot), and
``tests/fixtures/receipts/681c6eb-<database>/`` every receipt body it stored.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select, text

from probe_service.plans import find_reusable_receipt, load_plan, load_receipt, verify_receipt
from probe_service.plans.persist import load_envelope
from probe_service.plans.signing import public_key_from_pem, verify_envelope
from probe_service.plans.tables import plans, receipts
from probe_service.policies import POLICY_FILE_ENV
from probe_service.service import ProbeService
from probe_service.store import DB_FILENAME, Store, open_store, read_events
from probe_service.store.migrate import current_revisions, schema_head
from probe_service.store.safety import prepare_state_dir

from ..conftest import replay_pg_script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RELEASE = "681c6eb"
#: The schema head the previous release had (docs/UPGRADING.md, "Store schema").
RELEASE_HEAD = "0008_web_indexes"
#: Where the dumped schema's name stood (``scripts/release_fixtures.py``).
SCHEMA_TOKEN = "__release_schema__"


@dataclass(frozen=True)
class OldStore:
    """A store the previous release wrote, placed for this test, not opened yet."""

    root: Path
    url: str | None
    expected: dict[str, Any]
    receipts: Path


def _sqlite(tmp_path: Path) -> OldStore:
    source = FIXTURES / "stores" / f"{RELEASE}-sqlite"
    root = tmp_path / "old"
    root.mkdir()
    db = prepare_state_dir(root) / DB_FILENAME
    shutil.copyfile(source / "store.sqlite3", db)
    os.chmod(db, 0o600)
    with sqlite3.connect(db) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert revision == RELEASE_HEAD
    expected = json.loads((source / "expected.json").read_text())
    return OldStore(root, None, expected, FIXTURES / "receipts" / f"{RELEASE}-sqlite")


def _postgresql(tmp_path: Path, pg_url: str) -> OldStore:
    source = FIXTURES / "stores" / f"{RELEASE}-postgresql"
    replay_pg_script(pg_url, (source / "store.postgresql.sql").read_text(), SCHEMA_TOKEN)
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()
    assert revision == RELEASE_HEAD
    expected = json.loads((source / "expected.json").read_text())
    receipts_dir = FIXTURES / "receipts" / f"{RELEASE}-postgresql"
    return OldStore(tmp_path / "old", pg_url, expected, receipts_dir)


@pytest.fixture(params=["sqlite", "postgresql"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> OldStore:
    """The previous release's store on each backend, as that release left it."""
    if request.param == "sqlite":
        return _sqlite(tmp_path)
    return _postgresql(tmp_path, request.getfixturevalue("pg_url"))


@pytest.fixture
def opened(old_store: OldStore) -> Iterator[Store]:
    """The old store opened by this release (which migrates it)."""
    store = open_store(old_store.root, old_store.url)
    yield store
    store.close()


@pytest.fixture
def service(
    old_store: OldStore, opened: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[ProbeService]:
    """The Python API over the migrated store, with no policy file (nothing revoked)."""
    monkeypatch.setenv(POLICY_FILE_ENV, str(tmp_path / "no-policies.json"))
    with ProbeService.open(old_store.root, database_url=old_store.url) as svc:
        yield svc


def _stored(store: Store) -> dict[str, str]:
    with store.reading() as conn:
        rows = conn.execute(select(receipts.c.receipt_sha256, receipts.c.body)).all()
    return {str(sha): str(body) for sha, body in rows}


def test_the_store_migrates_to_head(old_store: OldStore, opened: Store) -> None:
    """Opening the previous release's store brings it from its head to this one's."""
    assert old_store.expected["store_revision"] == RELEASE_HEAD
    assert current_revisions(opened.engine) == {schema_head()}


def test_every_old_receipt_verifies_and_keeps_its_bytes(old_store: OldStore, opened: Store) -> None:
    """Each stored receipt is the body the release wrote, reads into the typed model,
    verifies and keeps its sha256."""
    stored = _stored(opened)
    written = json.loads((old_store.receipts / "manifest.json").read_text())["receipts"]
    assert set(written.values()) <= set(stored)
    for sha, body in stored.items():
        receipt = load_receipt(opened, sha)
        assert verify_receipt(receipt) == sha == receipt.receipt_sha256
        assert json.dumps(receipt.to_json(), sort_keys=True) == body
    for name, sha in written.items():
        assert (old_store.receipts / f"{name}.json").read_text(encoding="utf-8") == stored[sha]


def test_every_old_envelope_still_verifies(old_store: OldStore, opened: Store) -> None:
    """The envelopes signed by the release verify with its public key after migration."""
    manifest = json.loads((old_store.receipts / "manifest.json").read_text())
    key = public_key_from_pem(manifest["public_key"], "manifest")
    signed = [sha for name, sha in manifest["receipts"].items() if name != "supports"]
    for sha in signed:
        verified = verify_envelope(load_envelope(opened, sha), [key])
        assert (verified.receipt_sha256, verified.signer) == (sha, manifest["keyid"])


def test_old_plans_still_load_under_their_ids(opened: Store) -> None:
    """Every plan the release stored loads, its content still hashing to its id."""
    with opened.reading() as conn:
        plan_ids = conn.execute(select(plans.c.plan_id)).scalars().all()
    assert len(plan_ids) >= 12
    for plan_id in plan_ids:
        assert load_plan(opened, plan_id).snapshot_id


def test_only_what_may_answer_a_run_answers_one(old_store: OldStore, opened: Store) -> None:
    """A supports the release stored still answers its own action key; a refutation it
    stored reusable (never reproduced) does not (docs/UPGRADING.md, "Old receipts")."""
    manifest = json.loads((old_store.receipts / "manifest.json").read_text())
    supports = load_receipt(opened, manifest["receipts"]["supports_signed"])
    refutes = load_receipt(opened, manifest["receipts"]["refutes"])
    assert refutes.committed.confirmation is None
    found = find_reusable_receipt(opened, supports.committed.action_key)
    assert found is not None
    assert found.committed.outcome == "supports"
    assert find_reusable_receipt(opened, refutes.committed.action_key) is None


def test_events_are_kept_in_order(old_store: OldStore, opened: Store) -> None:
    """The event log reads back whole, its cursors strictly increasing."""
    with opened.reading() as conn:
        events = read_events(conn, 0, 1000)
        count = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
    assert len(events) == count == old_store.expected["events"]
    cursors = [event.cursor for event in events]
    assert cursors == sorted(set(cursors))


def test_old_claims_and_obligations_read(old_store: OldStore, service: ProbeService) -> None:
    """The claims the release recorded read back; its resolved and open obligations too."""
    expected = old_store.expected
    for claim_id in expected["claims"].values():
        claim = service.claim_show(claim_id=claim_id, scope="fixture")
        assert claim.claim_id == claim_id
    resolved = service.obligation_list(scope="fixture", state="resolved").obligations
    still_open = service.obligation_list(scope="fixture", state="open").obligations
    assert [o.obligation_id for o in resolved] == [expected["obligations"]["resolved"]]
    assert sorted(o.obligation_id for o in still_open) == sorted(expected["obligations"]["open"])


@pytest.mark.parametrize(
    "label",
    [
        "captured",
        "captured_signed",
        "changed",
        "changed_signed",
        "changed_again",
        "changed_again_signed",
    ],
)
def test_the_gate_gives_the_old_verdict(
    old_store: OldStore, service: ProbeService, label: str
) -> None:
    """On each snapshot, unsigned and requiring the release's key, the gate answers what
    the release answered: passed, claims checked, open obligations, refused evidence."""
    was = old_store.expected["gate"][label]
    now = service.gate(
        snapshot_id=was["snapshot_id"], scope="fixture", require_signed=tuple(was["require_signed"])
    )
    assert now.passed is was["passed"]
    assert now.checked == was["checked"]
    assert sorted(o.obligation_id for o in now.open_obligations) == was["open_obligations"]
    assert list(now.unsigned_evidence) == was["unsigned_evidence"]
