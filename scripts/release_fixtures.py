"""Write a store and its receipts with whichever release of the package this interpreter imports.

The upgrade fixtures (docs/UPGRADING.md, "How upgrading is tested") are made by running this
script with a release's own interpreter (its own worktree and venv), as root, so that its
probes really run in that release's sandbox:

    git worktree add /tmp/rel-681c6eb 681c6eb && make -C /tmp/rel-681c6eb setup
    /tmp/rel-681c6eb/.venv/bin/python scripts/release_fixtures.py \\
        tests/fixtures/receipts/681c6eb-sqlite tests/fixtures/stores/681c6eb-sqlite

It captures a small repository, plans and runs probes of every receipt shape that release
writes (supports, refutes, inconclusive before launch and by timeout, sandbox denials, a
toolchain with preflight, ``junit_xml`` reports; signed and unsigned; and where the release
has them, a confirmed, an unconfirmed and a flaky refutation), runs one batch through the
queue's tables, records two claims, opens and resolves an obligation, opens a second one,
and asks the gate.

RECEIPTS receives ``manifest.json`` (the release, the public key, the receipts by name) and
``NAME.json`` (the stored body, byte for byte), with ``NAME.envelope.json`` beside each
signed one. STORE receives ``expected.json`` (snapshots, claims, obligations, what the gate
said) and the store: ``store.sqlite3`` (a ``VACUUM INTO`` copy of the embedded store) or,
with ``--database-url`` (a PostgreSQL URL whose ``search_path`` names an empty schema),
``store.postgresql.sql`` (``pg_dump --inserts`` of that schema, its name replaced by
``__release_schema__``).

Only operations every release since signed receipts has are used, through ``ProbeService``.
The signing key lives in a temporary directory that is removed: the fixtures keep only its
public key.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from probe_service.service import ProbeService

POLICY = "fixture-python"
SHORT = "fixture-short"
TOOLED = "fixture-toolchain"
UNCONFIRMED = "fixture-unconfirmed"
SCOPE = "fixture"
#: Where the dumped schema's name stood; a replay puts its own schema's name there.
SCHEMA_TOKEN = "__release_schema__"  # noqa: S105 - a placeholder, not a password

JUNIT_SCRIPT = """\
import os
report = os.path.join(os.environ["BYTE_PROBE_SCRATCH"], "report.xml")
with open(report, "w", encoding="utf-8") as handle:
    handle.write(
        '<testsuites><testsuite name="calc" tests="2">'
        '<testcase classname="tests.calc" name="test_add" time="0.001"/>'
        '<testcase classname="tests.calc" name="test_div" time="0.002">'
        '<failure message="ZeroDivisionError">division by zero</failure>'
        '<system-out>dividing</system-out></testcase>'
        "</testsuite></testsuites>"
    )
print("wrote", report)
"""

FILES = {
    "ok.py": "print('all good')\n",
    "fail.py": "import sys\nprint('regressed', file=sys.stderr)\nsys.exit(1)\n",
    "denied.py": "open('/root/.ssh/id_ed25519').read()\n",
    "network.py": (
        "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=5)\n"
    ),
    "slow.py": "import time\ntime.sleep(30)\n",
    "coin.py": "import os, sys\nsys.exit(os.urandom(1)[0] & 1)\n",
    "junit_report.py": JUNIT_SCRIPT,
    "src/parse.py": "def parse(text):\n    return text.split(',')\n",
    "src/other.py": "VALUE = 1\n",
}

EXIT_0 = {"kind": "exit_code", "equals": 0}
DECLARED = {"source": "user_requirement", "reference": "fixture"}
REGRESSION = {"source": "historical_regression", "reference": "issue #7"}


def write_policy_file(path: Path, toolchain: Path, schema: int) -> None:
    """The administrator's policy file (owner-only): plain, short timeout, toolchain and,
    from schema 3, one that turns confirmation of refutations off."""
    base = {
        "allowed_executables": ["python3"],
        "timeout_seconds": 30,
        "max_output_bytes": 100_000,
        "allowed_domains": [],
        "environment": [],
        "max_processes": 32,
        "memory_bytes": 512 * 1024 * 1024,
    }
    policies = [
        {"id": POLICY, **base},
        {"id": SHORT, **base, "timeout_seconds": 2},
        {
            "id": TOOLED,
            **base,
            "toolchains": {"plain": str(toolchain)},
            "executable_pins": {"python3": str(toolchain / "bin" / "python")},
        },
    ]
    if schema >= 3:
        policies.append({"id": UNCONFIRMED, **base, "confirm_refutes": False})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"schema": schema, "policies": policies}, handle, indent=2)


def plan(snapshot: str, policy: str, args: list[str], **extra: Any) -> dict[str, Any]:
    """A plan running ``python3 ARGS`` (or ``executable``) under ``policy``."""
    return {
        "snapshot_id": snapshot,
        "policy_id": policy,
        "executable": extra.pop("executable", "python3"),
        "args": args,
        "oracle": extra.pop("oracle", {"check": EXIT_0, **DECLARED}),
        **extra,
    }


def refuting(snapshot: str, policy: str, args: list[str], **extra: Any) -> dict[str, Any]:
    """A plan whose failed check refutes (a historical regression)."""
    oracle = {"check": extra.pop("check", EXIT_0), **REGRESSION}
    return plan(snapshot, policy, args, failure_refutes=True, oracle=oracle, **extra)


def policy_schema_max() -> int:
    """The newest policy schema this release reads (3 brought ``confirm_refutes``)."""
    from probe_service.policies import model

    return 3 if "confirm_refutes" in Path(model.__file__).read_text(encoding="utf-8") else 2


Runner = Callable[[str, dict[str, Any], bool], str]


def runner(
    unsigned: ProbeService, signed: ProbeService, names: dict[str, str], private_key: str
) -> Runner:
    """``run(name, plan, signed)``: plan and run in process, never reused, in the session
    with or without the signing key; the receipt's sha goes into ``names``. Releases that
    read the key at each run see the environment change too; later ones read it once per
    session, hence two sessions."""

    def run(name: str, body: dict[str, Any], sign: bool) -> str:
        svc = signed if sign else unsigned
        if not sign:
            os.environ.pop("BYTE_PROBE_SIGNING_KEY", None)
        try:
            plan_id = svc.probe_plan(plan=body).plan_id
            result = svc.probe_run(
                plan_id=plan_id, policy_id=body["policy_id"], reuse=False, via="embedded"
            )
        finally:
            os.environ["BYTE_PROBE_SIGNING_KEY"] = private_key
        names[name] = result.receipt_sha256
        print(f"{name}: {result.outcome} / {result.reason}", file=sys.stderr)
        return result.receipt_sha256

    return run


def run_probes(svc: ProbeService, run: Runner, snap: str, schema: int) -> None:
    """One receipt of each shape this release writes."""
    run("supports", plan(snap, POLICY, ["ok.py"]), False)
    run("supports_signed", plan(snap, POLICY, ["ok.py"], hypothesis="signed"), True)
    run("refutes", refuting(snap, POLICY, ["fail.py"]), True)
    inferred = {"check": {"kind": "stdout_contains", "text": "[4, 5]"}, "source": "model_inferred"}
    run(
        "inconclusive_model_inferred",
        plan(snap, POLICY, ["-c", "print([4, 5])"], oracle=inferred),
        True,
    )
    run("inconclusive_not_allowed", plan(snap, POLICY, ["-c", "true"], executable="bash"), True)
    run("inconclusive_timeout", plan(snap, SHORT, ["slow.py"]), True)
    run("denied", refuting(snap, POLICY, ["denied.py"]), True)
    run("denied_network", refuting(snap, POLICY, ["network.py"]), True)
    junit = {"kind": "junit_xml", "require": ["tests.calc::test_add"]}
    preflight = [["python3", "-c", "import sys"]]
    tooled = plan(
        snap, TOOLED, ["junit_report.py"], preflight=preflight, oracle={"check": junit, **DECLARED}
    )
    run("toolchain_junit", tooled, True)
    run(
        "junit_refutes",
        refuting(snap, TOOLED, ["junit_report.py"], check={"kind": "junit_xml"}),
        True,
    )
    if schema < 3:
        return
    run("refutes_unconfirmed", refuting(snap, UNCONFIRMED, ["fail.py"]), True)
    # A refutation its confirmation does not reproduce (inconclusive / flaky): the probe
    # fails at random, so it runs until that shape is seen; the other attempts stay stored.
    for attempt in range(40):
        sha = run(
            "refutes_flaky", refuting(snap, POLICY, ["coin.py"], hypothesis=f"coin {attempt}"), True
        )
        if svc.receipt_get(receipt_id=sha)["reason"] == "flaky":
            return
    raise SystemExit("no flaky confirmation in 40 attempts")


def run_batch(svc: ProbeService, names: dict[str, str], snap: str) -> None:
    """One batch through the queue's tables, run by the inline runner (no Redis)."""
    from probe_service.queue import submit_plans
    from probe_service.queue.inline import run_inline

    batch_plan = svc.probe_plan(plan=plan(snap, POLICY, ["ok.py"], hypothesis="batch"))
    # None without Redis in releases before the queue seam; the embedded queue after it.
    queue = svc.queue
    submitted = submit_plans(svc.store, queue, [batch_plan.plan_id], POLICY, reuse=False)
    if hasattr(queue, "execute_submitted"):
        queue.execute_submitted(svc.store, submitted.run_ids, 2)
    else:
        run_inline(svc.store, submitted.run_ids)
    names["batch_supports"] = svc.receipt_get(receipt_id=submitted.run_ids[0])["receipt_sha256"]


def record_claims(
    svc: ProbeService, run: Runner, names: dict[str, str], repo: Path, snap: str
) -> dict[str, Any]:
    """Two claims; a change opens an obligation resolved by a recheck, a second change
    opens one left open. Returns the ids."""

    def claim(statement: str, receipt: str, path: str) -> str:
        return svc.claim_create(
            claim={
                "scope": SCOPE,
                "statement": statement,
                "kind": "behavior",
                "snapshot_id": snap,
                "evidence": [{"receipt": receipt}],
                "dependencies": [{"exact_blob": {"path": path}}],
            }
        ).claim_id

    claims = {
        "parse": claim("parse splits on commas", names["supports_signed"], "src/parse.py"),
        "fail": claim("fail.py still exits 1", names["refutes"], "src/other.py"),
    }
    (repo / "src/parse.py").write_text("def parse(text):\n    return text.split(';')\n")
    changed = svc.snapshot_capture(root=str(repo)).snapshot_id
    svc.change_analyze(from_snapshot=snap, to_snapshot=changed, scope=SCOPE)
    opened = svc.obligation_list(scope=SCOPE, state="open").obligations
    # Rechecked: the claim's plan on the changed snapshot still supports.
    recheck = run("recheck_on_changed", plan(changed, POLICY, ["ok.py"], hypothesis="signed"), True)
    resolved = svc.obligation_resolve(
        obligation_id=opened[0].obligation_id,
        resolution="rechecked",
        rationale="reran on the changed snapshot",
        receipt=recheck,
        scope=SCOPE,
    ).obligation_id
    (repo / "src/parse.py").write_text("def parse(text):\n    return text.split('|')\n")
    changed_again = svc.snapshot_capture(root=str(repo)).snapshot_id
    svc.change_analyze(from_snapshot=changed, to_snapshot=changed_again, scope=SCOPE)
    still_open = svc.obligation_list(scope=SCOPE, state="open").obligations
    return {
        "snapshots": {"captured": snap, "changed": changed, "changed_again": changed_again},
        "claims": claims,
        "obligations": {"resolved": resolved, "open": [o.obligation_id for o in still_open]},
    }


def ask_gate(svc: ProbeService, snapshots: dict[str, str], keyid: str) -> dict[str, Any]:
    """The gate on each snapshot, unsigned and requiring the fixture key. The gate records
    what it checks, so the verdict a later release must repeat is the one asked again of
    the store as it is left here."""
    gates: dict[str, Any] = {}
    for label, snapshot in snapshots.items():
        for signed_by in ((), (keyid,)):
            svc.gate(snapshot_id=snapshot, scope=SCOPE, require_signed=signed_by)
            again = svc.gate(snapshot_id=snapshot, scope=SCOPE, require_signed=signed_by)
            gates[label + ("_signed" if signed_by else "")] = {
                "snapshot_id": snapshot,
                "require_signed": list(signed_by),
                "passed": again.passed,
                "checked": again.checked,
                "open_obligations": sorted(o.obligation_id for o in again.open_obligations),
                "unsigned_evidence": list(again.unsigned_evidence),
            }
    return gates


def store_rows(svc: ProbeService, query: str) -> list[tuple[Any, ...]]:
    from sqlalchemy import text

    with svc.store.reading() as conn:
        return [tuple(row) for row in conn.execute(text(query)).all()]


def write_receipts(svc: ProbeService, names: dict[str, str], out: Path) -> None:
    """Every stored receipt body and envelope, byte for byte, named where named."""
    by_sha = {sha: name for name, sha in names.items()}
    for sha, body in store_rows(svc, "SELECT receipt_sha256, body FROM receipts"):
        (out / f"{by_sha.get(sha, sha)}.json").write_text(body, encoding="utf-8")
    for sha, envelope in store_rows(svc, "SELECT receipt_sha256, envelope FROM receipt_signatures"):
        (out / f"{by_sha.get(sha, sha)}.envelope.json").write_text(envelope, encoding="utf-8")


def pg_dump(database_url: str) -> str:
    """The store's schema and rows as ``pg_dump --inserts`` prints them, the schema named
    ``SCHEMA_TOKEN`` (the URL's ``search_path`` names the schema)."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    schema = unquote(str(url.query["options"])).removeprefix("-csearch_path=")
    done = subprocess.run(
        [
            *("pg_dump", "--schema", schema, "--inserts", "--no-owner", "--no-privileges"),
            *("--host", url.host or "127.0.0.1", "--port", str(url.port or 5432)),
            *("--username", url.username or "postgres", url.database or "postgres"),
        ],
        env={**os.environ, "PGPASSWORD": url.password or ""},
        capture_output=True,
        text=True,
        check=True,
    )
    body = done.stdout.split(f"CREATE SCHEMA {schema};", 1)[1]
    # psql's own meta-commands (newer pg_dump wraps the dump in \restrict) are not SQL.
    body = "\n".join(line for line in body.splitlines() if not line.startswith("\\"))
    return body.replace(f"{schema}.", f"{SCHEMA_TOKEN}.") + "\n"


def release_commit() -> str:
    import probe_service

    package = Path(probe_service.__file__).resolve().parent.parent
    done = subprocess.run(
        ["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def dump_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("receipts", type=Path, help="directory for the receipts (new)")
    parser.add_argument("store", type=Path, help="directory for the store (new)")
    parser.add_argument("--database-url", default=None, help="a PostgreSQL schema to fill")
    args = parser.parse_args()
    receipts_dir, store_dir = args.receipts.resolve(), args.store.resolve()
    receipts_dir.mkdir(parents=True)
    store_dir.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix="release-fixtures-"))
    try:
        # The probe uids must reach the toolchain below it (read and search, never write).
        os.chmod(work, 0o755)  # noqa: S103
        repo, state, toolchain = work / "repo", work / "state", work / "toolchain-plain"
        for rel, body in FILES.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(body, encoding="utf-8")
        state.mkdir()
        schema = policy_schema_max()
        write_policy_file(work / "policies.json", toolchain, schema)
        os.environ["BYTE_PROBE_POLICY_FILE"] = str(work / "policies.json")
        (work / "requirements.txt").write_text("", encoding="utf-8")
        names: dict[str, str] = {}
        with ProbeService.open(state, database_url=args.database_url) as plain:
            plain.toolchain_create(
                name="plain",
                python="/usr/bin/python3",
                requirements_file=str(work / "requirements.txt"),
                dest=str(toolchain),
            )
            key = plain.key_create(out=str(work / "keys"))
            os.environ["BYTE_PROBE_SIGNING_KEY"] = key.private_key
            svc = ProbeService.open(state, database_url=args.database_url)
            run = runner(plain, svc, names, key.private_key)
            snap = svc.snapshot_capture(root=str(repo)).snapshot_id
            run_probes(svc, run, snap, schema)
            run_batch(svc, names, snap)
            expected = record_claims(svc, run, names, repo, snap)
            expected["gate"] = ask_gate(svc, expected["snapshots"], key.keyid)
            write_receipts(svc, names, receipts_dir)
            revision = store_rows(svc, "SELECT version_num FROM alembic_version")[0][0]
            expected["events"] = store_rows(svc, "SELECT count(*) FROM events")[0][0]
            svc.close()
        release = release_commit()
        manifest = {
            "release": release,
            "policy_schema": schema,
            "public_key": (work / "keys" / "signing-key.pub.pem").read_text(encoding="utf-8"),
            "keyid": key.keyid,
            "receipts": names,
        }
        dump_json(receipts_dir / "manifest.json", manifest)
        expected.update(release=release, store_revision=revision, keyid=key.keyid)
        dump_json(store_dir / "expected.json", expected)
        if args.database_url is None:
            db = state / ".zyte" / "repository-intelligence.sqlite3"
            with sqlite3.connect(db) as conn:
                conn.execute("VACUUM INTO ?", (str(store_dir / "store.sqlite3"),))
        else:
            dumped = pg_dump(args.database_url)
            (store_dir / "store.postgresql.sql").write_text(dumped, encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
