"""Who may clear what: principals from the operating system, clearing rules, review requests.

docs/ARCHITECTURE.md, "Principals and clearing". Each test tries a route by which the
wrong party could clear an obligation (a face, a field, a bypassing operation, a second
decision, a self-review) and checks that the refusal names the rule and writes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from probe_service.claims import change_analyze
from probe_service.claims.tables import (
    claim_audit,
    claim_tombstones,
    obligation_resolutions,
    review_decisions,
    review_requests,
)
from probe_service.errors import Conflict, InvalidInput, NotPermitted, PolicyError
from probe_service.policies import load_policy_file
from probe_service.principals import Actor, os_actor, user_name
from probe_service.service import ProbeService
from probe_service.store import Store

from ..policies.conftest import VALID_POLICY
from .helpers import PARSE_PY, WorkTree, claim_request

ME = user_name(os.getuid())
RULES: list[dict[str, Any]] = [
    {
        "scope": "payments",
        # The developer may also review others' requests: never their own.
        "accepted_risk": {"users": [ME, "alice"], "reviewers": ["bob", "carol", ME]},
        "withdrawn": {"users": ["alice"]},
        "superseded": {"kinds": ["person"]},
    }
]
PRINCIPALS = {"alice": "person", "bob": "person", "carol": "person", "claude": "agent"}


def policy_file(tmp_path: Path, **top: Any) -> Path:
    """A schema-3 policy file with ``top``'s file-level keys, 0600."""
    path = tmp_path / "policies.json"
    path.write_text(json.dumps({"schema": 3, "policies": [dict(VALID_POLICY)], **top}))
    path.chmod(0o600)
    return path


def session(store: Store, policy: Path, face: str = "cli", who: str | None = None) -> ProbeService:
    """A session as ``who`` on ``face`` (default: this process's own user)."""
    kinds = dict(load_policy_file(policy).principals) if policy.exists() else {}
    actor = None
    if who is not None:
        actor = Actor(name=who, kind=kinds.get(who, "person"), face=face)  # type: ignore[arg-type]
        if face in ("mcp", "host"):
            actor = Actor(name=who, kind="agent", face=face)
    return ProbeService(store, interface=face, policy_file=policy, actor=actor)  # type: ignore[arg-type]


def open_obligation(tree: WorkTree) -> tuple[str, str, str]:
    """A claim in scope payments and its open obligation; (claim, obligation, end)."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    svc = ProbeService(tree.store)
    claim = svc.claim_create(claim=claim_request(start)).claim_id
    end = tree.write("src/parse.py", "def parse(t):\n    return t\n").capture()
    (opened,) = change_analyze(tree.store, start, end).opened
    return claim, opened.obligation_id, end


def counts(store: Store) -> dict[str, int]:
    tables = (obligation_resolutions, review_requests, review_decisions, claim_tombstones)
    with store.reading() as conn:
        return {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one() for t in tables
        }


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    return policy_file(tmp_path, principals=PRINCIPALS, clearing=RULES)


class TestAgentsNeverAcceptARisk:
    @pytest.mark.parametrize("face", ["mcp", "host"])
    def test_an_agent_face_is_refused_even_without_rules(
        self, tree: WorkTree, tmp_path: Path, face: str
    ) -> None:
        """On MCP or the host, accepted_risk is refused whatever user runs the agent, with
        no clearing rule at all; nothing is written."""
        _, obligation, _ = open_obligation(tree)
        svc = session(tree.store, tmp_path / "absent.json", face=face)
        before = counts(tree.store)
        with pytest.raises(NotPermitted, match="agents never"):
            svc.call(
                "obligation_resolve",
                {"obligation_id": obligation, "resolution": "accepted_risk", "rationale": "ok"},
            )
        assert counts(tree.store) == before

    def test_a_field_naming_another_actor_is_refused(self, tree: WorkTree, rules: Path) -> None:
        """The request has no field for who resolves: an MCP caller cannot claim to be the
        security team."""
        _, obligation, _ = open_obligation(tree)
        svc = session(tree.store, rules, face="mcp")
        with pytest.raises(InvalidInput, match="resolved_by"):
            svc.call(
                "obligation_resolve",
                {
                    "obligation_id": obligation,
                    "resolution": "withdrawn",
                    "rationale": "ok",
                    "resolved_by": "security-team",
                },
            )

    def test_an_os_user_the_administrator_made_an_agent_is_one_on_the_cli(
        self, tree: WorkTree, rules: Path
    ) -> None:
        """principals maps claude to agent: on the CLI too it may not accept a risk."""
        _, obligation, _ = open_obligation(tree)
        with pytest.raises(NotPermitted, match="agents never"):
            session(tree.store, rules, who="claude").obligation_resolve(
                obligation_id=obligation, resolution="accepted_risk", rationale="ok"
            )

    def test_the_process_actor_comes_from_the_os(self, tree: WorkTree, rules: Path) -> None:
        """Without a peer, a session's actor is this process's OS user, its kind from the
        file; a machine face makes it an agent."""
        assert ProbeService(tree.store, interface="cli", policy_file=rules).actor == os_actor(
            "cli", {}
        )
        assert ProbeService(tree.store, interface="mcp", policy_file=rules).actor.kind == "agent"


class TestRules:
    def test_a_user_the_rule_does_not_list_is_refused_naming_it(
        self, tree: WorkTree, rules: Path
    ) -> None:
        """withdrawn is alice's only: another person is refused, the rule named."""
        _, obligation, _ = open_obligation(tree)
        before = counts(tree.store)
        with pytest.raises(NotPermitted, match=r"clearing rule 'payments'.*bob.*withdrawn"):
            session(tree.store, rules, who="bob").obligation_resolve(
                obligation_id=obligation, resolution="withdrawn", rationale="gone"
            )
        assert counts(tree.store) == before

    def test_a_listed_user_resolves_directly(self, tree: WorkTree, rules: Path) -> None:
        """alice withdraws directly (no reviewers): resolved, by alice, audited as her."""
        _, obligation, _ = open_obligation(tree)
        done = session(tree.store, rules, who="alice").obligation_resolve(
            obligation_id=obligation, resolution="withdrawn", rationale="gone"
        )
        assert (done.state, done.resolved_by, done.review) == ("resolved", "alice", None)
        with tree.store.reading() as conn:
            actors = {
                (r.operation, r.actor, r.actor_kind)
                for r in conn.execute(select(claim_audit)).all()
            }
        assert ("obligation_resolve", "alice", "person") in actors

    def test_claim_withdraw_is_no_way_around_the_rule(self, tree: WorkTree, rules: Path) -> None:
        """Withdrawing the claim itself closes its obligations: the same rule applies."""
        claim, _, _ = open_obligation(tree)
        before = counts(tree.store)
        with pytest.raises(NotPermitted, match="withdrawn"):
            session(tree.store, rules, who="bob").claim_withdraw(claim_id=claim, rationale="x")
        assert counts(tree.store) == before
        assert session(tree.store, rules, who="alice").claim_withdraw(claim_id=claim, rationale="x")

    def test_a_scope_without_a_rule_keeps_the_single_user_workflow(
        self, tree: WorkTree, tmp_path: Path
    ) -> None:
        """No rule for payments: the developer accepts the risk directly, as before."""
        _, obligation, _ = open_obligation(tree)
        other = policy_file(tmp_path, clearing=[{"scope": "billing"}])
        done = session(tree.store, other).obligation_resolve(
            obligation_id=obligation, resolution="accepted_risk", rationale="doc-only"
        )
        assert (done.state, done.resolved_by) == ("resolved", ME)

    def test_the_star_rule_governs_every_other_scope(self, tree: WorkTree, tmp_path: Path) -> None:
        """A ``*`` rule that lists nobody for withdrawn refuses it in payments."""
        _, obligation, _ = open_obligation(tree)
        star = policy_file(tmp_path, clearing=[{"scope": "*"}])
        with pytest.raises(NotPermitted, match="clearing rule '\\*' lets no one"):
            session(tree.store, star).obligation_resolve(
                obligation_id=obligation, resolution="withdrawn", rationale="x"
            )

    @pytest.mark.parametrize(
        ("top", "named"),
        [
            ({"principals": {"eve": "robot"}}, "principals"),
            ({"clearing": [{"scope": "p", "withdrawn": {"kinds": ["agent"]}}]}, "kinds"),
            ({"clearing": [{"scope": "p", "withdrawn": {"kinds": ["wizard"]}}]}, "kinds"),
            (
                {
                    "principals": {"claude": "agent"},
                    "clearing": [{"scope": "p", "withdrawn": {"users": ["claude"]}}],
                },
                "claude",
            ),
            (
                {
                    "principals": {"ci": "service"},
                    "clearing": [{"scope": "p", "withdrawn": {"reviewers": ["ci"]}}],
                },
                "reviewer 'ci'",
            ),
            ({"clearing": [{"scope": "p"}, {"scope": "p"}]}, "two rules"),
        ],
    )
    def test_bad_rules_are_refused_naming_them(
        self, tree: WorkTree, tmp_path: Path, top: dict[str, Any], named: str
    ) -> None:
        """An unknown kind, an agent allowed to clear, a non-person reviewer, a scope twice:
        the file is refused naming the key, and a resolution under it writes nothing."""
        _, obligation, _ = open_obligation(tree)
        bad = policy_file(tmp_path, **top)
        with pytest.raises(PolicyError, match=named):
            load_policy_file(bad)
        before = counts(tree.store)
        with pytest.raises(PolicyError):
            session(tree.store, bad).obligation_resolve(
                obligation_id=obligation, resolution="accepted_risk", rationale="x"
            )
        assert counts(tree.store) == before

    def test_older_schemas_may_not_name_the_keys(self, tmp_path: Path) -> None:
        """clearing and principals need schema 3."""
        path = tmp_path / "old.json"
        path.write_text(json.dumps({"schema": 2, "policies": [VALID_POLICY], "clearing": []}))
        path.chmod(0o600)
        load_policy_file(path)  # an empty list names nothing
        path.write_text(
            json.dumps({"schema": 2, "policies": [VALID_POLICY], "principals": {"a": "person"}})
        )
        with pytest.raises(PolicyError, match="principals needs schema 3"):
            load_policy_file(path)


class TestReview:
    def request(self, tree: WorkTree, rules: Path) -> tuple[str, str, str]:
        """The developer's accepted_risk in payments; (obligation, review, end)."""
        _, obligation, end = open_obligation(tree)
        done = session(tree.store, rules).obligation_resolve(
            obligation_id=obligation, resolution="accepted_risk", rationale="doc-only change"
        )
        assert done.state == "open"
        assert done.review is not None
        assert (done.review.requested_by, done.review.state) == (ME, "pending")
        return obligation, done.review.review_id, end

    def test_the_request_keeps_the_gate_closed_until_another_person_approves(
        self, tree: WorkTree, rules: Path
    ) -> None:
        """Pending: the gate fails and the request is listed; bob approves: resolved as
        the requester's accepted risk, and the gate opens."""
        obligation, review, end = self.request(tree, rules)
        me = session(tree.store, rules)
        assert me.gate(snapshot_id=end, scope="payments").passed is False
        (listed,) = me.review_list().reviews
        assert listed.review_id == review
        decided = session(tree.store, rules, who="bob").review_decide(
            review_id=review[:12], decision="approve", rationale="checked the docs"
        )
        assert (decided.state, decided.decided_by) == ("approved", "bob")
        (resolved,) = me.obligation_list(state="resolved").obligations
        assert (resolved.obligation_id, resolved.resolution, resolved.resolved_by) == (
            obligation,
            "accepted_risk",
            ME,
        )
        assert me.gate(snapshot_id=end, scope="payments").passed is True
        assert me.review_list().reviews == []

    def test_a_rejection_leaves_the_obligation_open(self, tree: WorkTree, rules: Path) -> None:
        obligation, review, end = self.request(tree, rules)
        session(tree.store, rules, who="carol").review_decide(
            review_id=review, decision="reject", rationale="needs a test"
        )
        me = session(tree.store, rules)
        (still,) = me.obligation_list(state="open").obligations
        assert still.obligation_id == obligation
        assert me.gate(snapshot_id=end, scope="payments").passed is False

    @pytest.mark.parametrize(
        ("who", "face", "match"),
        [
            (ME, "cli", "no self-review"),
            ("alice", "cli", "does not list alice"),
            ("claude", "cli", "claude \\(agent"),
        ],
    )
    def test_the_wrong_reviewer_is_refused_and_nothing_is_written(
        self, tree: WorkTree, rules: Path, who: str, face: str, match: str
    ) -> None:
        """The requester (a reviewer too), a person who is not a reviewer, and an OS user
        the administrator made an agent: each refused naming why."""
        _, review, _ = self.request(tree, rules)
        before = counts(tree.store)
        svc = session(tree.store, rules, face=face, who=who)
        with pytest.raises(NotPermitted, match=match):
            svc.invoke("review_decide", review_id=review, decision="approve", rationale="ok")
        assert counts(tree.store) == before

    def test_no_agent_face_offers_the_decision(self, tree: WorkTree, rules: Path) -> None:
        """review_decide is not an operation of the MCP or host face at all."""
        _, review, _ = self.request(tree, rules)
        for face in ("mcp", "host"):
            with pytest.raises(InvalidInput, match="review_decide"):
                session(tree.store, rules, face=face).call(
                    "review_decide", {"review_id": review, "decision": "approve", "rationale": "x"}
                )

    def test_a_decided_request_cannot_be_decided_again(self, tree: WorkTree, rules: Path) -> None:
        _, review, _ = self.request(tree, rules)
        session(tree.store, rules, who="bob").review_decide(
            review_id=review, decision="approve", rationale="ok"
        )
        before = counts(tree.store)
        with pytest.raises(Conflict, match="already approved by bob"):
            session(tree.store, rules, who="carol").review_decide(
                review_id=review, decision="reject", rationale="late"
            )
        assert counts(tree.store) == before

    def test_one_pending_request_per_obligation(self, tree: WorkTree, rules: Path) -> None:
        obligation, review, _ = self.request(tree, rules)
        with pytest.raises(Conflict, match=review):
            session(tree.store, rules, who="alice").obligation_resolve(
                obligation_id=obligation, resolution="accepted_risk", rationale="again"
            )

    def test_a_request_resolved_meanwhile_cannot_be_approved(
        self, tree: WorkTree, rules: Path
    ) -> None:
        """alice withdraws the obligation directly while the request waits: approving it
        is a conflict and writes no decision."""
        obligation, review, _ = self.request(tree, rules)
        session(tree.store, rules, who="alice").obligation_resolve(
            obligation_id=obligation, resolution="withdrawn", rationale="gone"
        )
        before = counts(tree.store)
        with pytest.raises(Conflict, match="resolved meanwhile"):
            session(tree.store, rules, who="bob").review_decide(
                review_id=review, decision="approve", rationale="ok"
            )
        assert counts(tree.store) == before

    def test_a_rule_without_reviewers_now_leaves_the_request_undecidable(
        self, tree: WorkTree, rules: Path, tmp_path: Path
    ) -> None:
        """The administrator removed the reviewers: nobody may decide until they list one."""
        _, review, _ = self.request(tree, rules)
        (tmp_path / "later").mkdir()
        later = policy_file(
            tmp_path / "later",
            principals=PRINCIPALS,
            clearing=[{"scope": "payments", "accepted_risk": {"users": [ME]}}],
        )
        with pytest.raises(NotPermitted, match="names no reviewer"):
            session(tree.store, later, who="bob").review_decide(
                review_id=review, decision="approve", rationale="ok"
            )


def test_every_audited_write_names_its_actor(tree: WorkTree, rules: Path) -> None:
    """A claim recorded on MCP is audited as the agent, a resolution on the CLI as the
    person: the actor columns are never empty for a new write."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    session(tree.store, rules, face="mcp").call(
        "claim_create", {"claim": claim_request(start, scope="billing")}
    )
    with tree.store.reading() as conn:
        rows = conn.execute(select(claim_audit.c.actor, claim_audit.c.actor_kind)).all()
    assert rows
    assert all(r.actor == ME and r.actor_kind == "agent" for r in rows)


class TestCli:
    def test_the_developer_s_request_the_list_and_a_refused_self_review(
        self, tree: WorkTree, rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """On the CLI the OS user requests; ``obligations review`` lists it; the same user
        approving it is one line on stderr naming the rule, exit 3; ``policy check`` prints
        the rules in force."""
        from probe_service.cli.main import app as main_app

        from .test_cli import cli, runner

        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(rules))
        monkeypatch.delenv("PROBE_DATABASE_URL", raising=False)
        root = tree.root.parent / "state"
        _, obligation, _ = open_obligation(tree)
        asked = cli(root, "obligations", "resolve", obligation, "--resolution", "accepted_risk",
                    "--rationale", "doc-only")  # fmt: skip
        assert asked.exit_code == 0, asked.output
        assert "review requested: rev_" in asked.stdout
        review = asked.stdout.split("review requested: ", 1)[1].split()[0]
        listed = cli(root, "obligations", "review", "--json")
        (entry,) = json.loads(listed.stdout)
        assert (entry["review_id"], entry["requested_by"], entry["state"]) == (
            review,
            ME,
            "pending",
        )
        mine = cli(root, "obligations", "review", review, "--approve", "--rationale", "ok")
        assert mine.exit_code == 3
        assert mine.stderr.count("\n") == 1
        assert "no self-review" in mine.stderr
        assert "--by" not in cli(root, "obligations", "resolve", "--help").stdout
        checked = runner.invoke(main_app, ["policy", "check", "--file", str(rules)])
        assert checked.exit_code == 0, checked.output
        assert "payments accepted_risk: alice, " + ME in checked.stdout
        assert "a second person approves (bob, carol, " in checked.stdout
        assert "payments withdrawn: alice, directly" in checked.stdout


def test_an_agent_s_accepted_risk_is_refused_over_the_real_mcp_face(tmp_path: Path) -> None:
    """``byte-probe mcp`` (the SDK's stdio client) answers the agent's accepted_risk with a
    not_permitted tool error; the obligation stays open."""
    from ..faces.drivers import open_mcp

    root = tmp_path / "state"
    work = tmp_path / "work"
    root.mkdir()
    work.mkdir()
    with ProbeService.open(root) as svc:
        _, obligation, _ = open_obligation(WorkTree(work, svc.store))
    with open_mcp(root) as client:
        result = client.portal.call(
            client.session.call_tool,
            "byte_obligation_resolve",
            {"obligation_id": obligation, "resolution": "accepted_risk", "rationale": "trust me"},
        )
    assert result.is_error
    assert result.structured_content["error"]["code"] == "not_permitted"
    assert "agents never" in result.structured_content["error"]["message"]
    with ProbeService.open(root) as svc:
        assert [o.obligation_id for o in svc.obligation_list(state="open").obligations] == [
            obligation
        ]


def test_the_reviews_page_lists_requests_and_the_claim_page_names_actors(
    tree: WorkTree, rules: Path
) -> None:
    """``/reviews`` lists a pending request with its requester, a hostile rationale as inert
    text; the claim's audit on ``/claims/ID`` shows who made each write."""
    from probe_service.settings import read_settings

    from ..web.conftest import serving
    from ..web.test_guard import fetch

    claim, obligation, _ = open_obligation(tree)
    session(tree.store, rules).obligation_resolve(
        obligation_id=obligation, resolution="accepted_risk", rationale="<script>x</script>"
    )
    web = ProbeService(tree.store, interface="web", settings=read_settings({}))
    with serving(web) as url:
        status, _, body = fetch(f"{url}/reviews")
        _, _, claim_page = fetch(f"{url}/claims/{claim}")
    assert status == 200
    assert f"{ME} (person, cli)" in body
    assert "<script>x" not in body
    assert "&lt;script&gt;x&lt;/script&gt;" in body
    assert f'<td class="actor">{ME} (person)</td>' in claim_page


def test_a_turn_records_the_os_actor(tree: WorkTree, rules: Path) -> None:
    """A turn begun on the CLI face lists its OS user as its actor."""
    tree.write("src/parse.py", PARSE_PY)
    svc = session(tree.store, rules, face="cli")
    svc.call("turn_begin", {"root": str(tree.root), "scope": "payments"})
    (turn,) = ProbeService(tree.store).turn_list().turns
    assert turn.actor == ME
