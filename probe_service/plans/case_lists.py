"""The JUnit case list of a version-2 receipt: a blob addressed by the digest it commits.

docs/ARCHITECTURE.md, "JUnit oracle": a receipt cannot carry 100,000 cases in its committed
part, so version 2 commits ``cases_sha256`` -- the SHA-256 of the canonical case list,
``canonical_json([{id, outcome, time, message}, ...])`` -- and the list is stored once as
a blob of that digest (zstd-compressed, like a snapshot's files). Verifying a version-2
receipt checks the list against the digest and the receipt's counts and failing cases
against the list.
"""

from __future__ import annotations

import json

from ..canonical import sha256_hex
from ..errors import NotFound, ReceiptInvalid, UnsafePath
from ..snapshot.blobs import insert_blobs, read_blob
from ..store import Store
from .junit_report import MAX_LISTED_NOT_PASSED, CaseList
from .receipt_model import Receipt
from .receipt_parts import Junit, JunitCase, JunitV2

__all__ = [
    "check_case_list",
    "has_case_list",
    "load_case_list",
    "receipt_cases",
    "store_case_list",
]


def store_case_list(store: Store, cases: CaseList) -> None:
    """Store the case list as its blob (a digest already stored is left as it is)."""
    with store.transaction() as conn:
        insert_blobs(conn, [{"digest": cases.sha256, "size": cases.size, "data": cases.compressed}])


def load_case_list(store: Store, junit: JunitV2) -> bytes:
    """The stored case list a version-2 receipt commits to.

    Raises ReceiptInvalid naming the digest when it is not stored or does not match it.
    """
    try:
        return read_blob(store, junit.cases_sha256)
    except NotFound:
        raise ReceiptInvalid(
            f"receipt: committed.junit.cases_sha256: case list {junit.cases_sha256} is not stored"
        ) from None
    except UnsafePath as exc:
        raise ReceiptInvalid(f"receipt: committed.junit.cases_sha256: {exc}") from None


_CASE_KEYS = frozenset({"id", "outcome", "time", "message"})
_OUTCOMES = ("passed", "failed", "error", "skipped")


def check_case_list(junit: JunitV2, data: bytes) -> list[dict[str, object]]:
    """The cases of ``data``, checked against what the receipt commits: the digest, the
    counts and the first failing cases. Raises ReceiptInvalid naming what differs."""
    where = "receipt: committed.junit"
    if sha256_hex(data) != junit.cases_sha256:
        raise ReceiptInvalid(f"{where}.cases_sha256: the case list does not match its digest")
    try:
        cases = json.loads(data)
    except (ValueError, RecursionError):
        cases = None
    if not isinstance(cases, list) or not all(
        isinstance(c, dict) and c.keys() == _CASE_KEYS for c in cases
    ):
        raise ReceiptInvalid(f"{where}.cases_sha256: the blob is not a case list")
    counts = {"tests": len(cases), "passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for case in cases:
        if case["outcome"] not in _OUTCOMES:
            raise ReceiptInvalid(f"{where}.cases_sha256: the blob is not a case list")
        counts[case["outcome"]] += 1
    for key, value in counts.items():
        if getattr(junit, key) != value:
            raise ReceiptInvalid(f"{where}.{key}: the case list says {value}")
    failing = [c for c in cases if c["outcome"] in ("failed", "error")][:MAX_LISTED_NOT_PASSED]
    if failing != [c.json_values() for c in junit.not_passed]:
        raise ReceiptInvalid(f"{where}.not_passed: not the case list's first failing cases")
    return cases


def has_case_list(receipt: Receipt) -> bool:
    """Whether the receipt commits to a case list by its digest (version 2, a report)."""
    return isinstance(receipt.committed.junit, JunitV2)


def receipt_cases(store: Store, receipt: Receipt) -> tuple[JunitCase, ...] | None:
    """Every case of the receipt's JUnit report (inline in version 1, the verified blob in
    version 2); None when it has no report. Raises ReceiptInvalid as ``check_case_list``."""
    junit = receipt.committed.junit
    if isinstance(junit, Junit):
        return junit.cases
    if junit is None:
        return None
    cases = check_case_list(junit, load_case_list(store, junit))
    return tuple(JunitCase.model_validate(case) for case in cases)
