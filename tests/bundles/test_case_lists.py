"""A version-2 receipt travels in a bundle with its JUnit case list (a blob), checked on
verify and import (docs/ARCHITECTURE.md, "Bundles", "JUnit oracle")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.plans import load_receipt, verify_stored_receipt
from probe_service.service import ProbeService

from .conftest import PLAN, Source
from .test_bad_input import read_members, refused, relisted, write_members

#: A probe writing a three-case report (one failure) into scratch.
WRITE_REPORT = (
    "import os; open(os.environ['BYTE_PROBE_SCRATCH'] + '/report.xml', 'w').write("
    '\'<testsuite><testcase classname="m" name="a"/><testcase classname="m" name="b">'
    '<failure message="boom"/></testcase><testcase classname="m" name="c"/></testsuite>\')'
)


@pytest.fixture
def into(tmp_path: Path) -> Iterator[ProbeService]:
    """An empty SQLite store to import into."""
    (tmp_path / "into").mkdir()
    with ProbeService.open(tmp_path / "into") as svc:
        yield svc


@pytest.fixture
def junit_bundle(source: Source) -> tuple[Path, str, str]:
    """The source's snapshot with one more run: a junit_xml probe; exported by snapshot.
    Returns the bundle, the receipt's sha and its case list digest."""
    plan = {
        **PLAN,
        "snapshot_id": source.snapshot_id,
        "args": ["-c", WRITE_REPORT],
        "oracle": {
            "check": {"kind": "junit_xml", "path": "report.xml"},
            "source": "user_requirement",
            "reference": "issue #29",
        },
    }
    plan_id = source.svc.probe_plan(plan=plan).plan_id
    run = source.svc.probe_run(plan_id=plan_id, policy_id="walk-python", via="embedded")
    receipt = run.receipt  # type: ignore[union-attr]
    assert receipt is not None
    assert receipt.committed.version == 2
    digest = receipt.committed.junit.cases_sha256  # type: ignore[union-attr]
    out = source.work / "junit.bundle"
    source.svc.bundle_export(out=str(out), snapshot_id=source.snapshot_id)
    return out, receipt.receipt_sha256, digest


def test_the_case_list_travels_and_verifies_in_the_target(
    junit_bundle: tuple[Path, str, str], into: ProbeService, source: Source
) -> None:
    """The bundle carries the case list as a blob; imported, the receipt verifies against
    the target store's copy."""
    path, sha, digest = junit_bundle
    assert f"blob/{digest}" in [name for name, _ in read_members(path)]
    into.bundle_import(path=str(path), require_signed=(source.public_key,))
    receipt = load_receipt(into.store, sha)
    assert verify_stored_receipt(into.store, receipt) == sha


def test_a_bundle_without_the_case_list_is_refused_naming_the_receipt(
    junit_bundle: tuple[Path, str, str], into: ProbeService, source: Source
) -> None:
    """The case list member removed (manifest relisted): refused, nothing written."""
    path, _, digest = junit_bundle
    members = [(n, d) for n, d in read_members(path) if n != f"blob/{digest}"]
    stripped = write_members(path.with_name("stripped.bundle"), relisted(members))
    assert f"its JUnit case list {digest} is not in the bundle" in refused(
        into, stripped, source.public_key
    )
