"""The deployment that separates an agent from a person sharing its account: PostgreSQL roles.

SECURITY.md, "Who may clear what": an agent with a shell can run the CLI as its user, so the
clearing rules of the policy file alone cannot stop it. On a shared store the agent connects
as its own database role, set up by ``examples/postgres/agent-role.sql``; then the database
refuses its resolutions other than those evidence makes, its review decisions, withdrawals
and supersessions, whatever program it runs. This test applies the script with psql to a
real store and attacks it as that role.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError

from probe_service.claims import change_analyze
from probe_service.claims.tables import obligation_resolutions
from probe_service.errors import NotPermitted
from probe_service.service import ProbeService
from probe_service.store import Store, open_store

from .helpers import PARSE_PY, WorkTree, claim_request

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "postgres" / "agent-role.sql"


@pytest.fixture
def owner(tmp_path: Path, pg_url: str) -> Iterator[Store]:
    store = open_store(tmp_path / "owner", pg_url)
    yield store
    store.close()


@pytest.fixture
def agent_url(pg_url: str, owner: Store) -> Iterator[str]:
    """``pg_url`` as a fresh login role the script set up."""
    if shutil.which("psql") is None:
        pytest.fail("psql is needed to apply examples/postgres/agent-role.sql (postgresql-client)")
    role = f"agent_{uuid.uuid4().hex[:10]}"
    url = make_url(pg_url)
    schema = url.query["options"].removeprefix("-csearch_path=")  # type: ignore[union-attr]
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
    libpq = url.set(drivername="postgresql").difference_update_query(["options"])
    try:
        subprocess.run(
            ["psql", libpq.render_as_string(hide_password=False), "-q", "-v", f"agent={role}",
             "-v", f"schema={schema}", "-f", str(SCRIPT)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        yield url.set(username=role).render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        engine.dispose()


def resolutions(store: Store) -> int:
    with store.reading() as conn:
        return conn.execute(select(func.count()).select_from(obligation_resolutions)).scalar_one()


def test_the_agent_role_cannot_clear_what_evidence_does_not(
    tmp_path: Path, owner: Store, agent_url: str
) -> None:
    """As the agent's role, even on the CLI face (where no policy rule would stop it):
    accepted_risk, withdrawal and a review decision are refused by the database with a
    typed error; recording a claim still works, and the owner's writes are untouched."""
    work = tmp_path / "work"
    work.mkdir()
    tree = WorkTree(work, owner)
    start = tree.write("src/parse.py", PARSE_PY).capture()
    claim = ProbeService(owner).claim_create(claim=claim_request(start)).claim_id
    end = tree.write("src/parse.py", "def parse(t):\n    return t\n").capture()
    (opened,) = change_analyze(owner, start, end).opened

    agent_store = open_store(tmp_path / "agent", agent_url)
    try:
        agent = ProbeService(agent_store, interface="cli")
        with pytest.raises(NotPermitted, match="grants refuse"):
            agent.obligation_resolve(
                obligation_id=opened.obligation_id, resolution="accepted_risk", rationale="x"
            )
        with pytest.raises(NotPermitted, match="grants refuse"):
            agent.claim_withdraw(claim_id=claim, rationale="x")
        assert resolutions(owner) == 0
        # The role is not read-only: the agent records what it learned, but may not
        # withdraw even its own claim (one without obligations: only the tombstone).
        own = agent.claim_create(claim=claim_request(end, scope="billing")).claim_id
        with pytest.raises(NotPermitted, match="grants refuse"):
            agent.claim_withdraw(claim_id=own, rationale="x")
        with (
            agent_store.engine.connect() as conn,
            pytest.raises(ProgrammingError, match="permission denied"),
        ):
            conn.execute(
                text(
                    "INSERT INTO review_decisions VALUES "
                    "('rev_x', 'approve', 'r', 'agent', 'cli', 'now')"
                )
            )
    finally:
        agent_store.close()
    # The owner (the service, a person through the CLI) still resolves.
    ProbeService(owner, interface="cli").obligation_resolve(
        obligation_id=opened.obligation_id, resolution="accepted_risk", rationale="doc-only"
    )
    assert resolutions(owner) == 1
