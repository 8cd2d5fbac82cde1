"""Tracker issue 10, item 6: a snapshot link that escapes its tree is never recreated.

Before: a link to ``/etc/hostname`` or ``../../outside`` was materialized as is, and the
probe ran. Now capture keeps every link as data, and materialization refuses a link
that is absolute or resolves outside the tree (after following links inside it), so the
run ends ``inconclusive`` / ``snapshot_link_escapes`` naming the link.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service import service
from probe_service.store import Store

from .attacks import RunProbe, leftovers

pytestmark = pytest.mark.sandbox

ESCAPING = {
    "absolute": ({"link": "/etc/hostname"}, "link"),
    "parent": ({"link": "../../outside"}, "link"),
    # Each link alone stays inside; followed through the first, the second leaves.
    "through-internal-link": ({"a/b/up": "../..", "link": "a/b/up/../outside"}, "link"),
    "loop": ({"l1": "l2", "l2": "l1"}, "l1"),
}


def _repo_with_links(repo: Path, links: dict[str, str]) -> None:
    (repo / "data.txt").write_text("inside\n")
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "a" / "b" / "f").write_text("f\n")
    for name, target in links.items():
        os.symlink(target, repo / name)


@pytest.mark.parametrize("case", sorted(ESCAPING))
def test_escaping_link_ends_inconclusive_naming_it(
    run_probe: RunProbe, sqlite_store: Store, repo: Path, run_tmp: Path, case: str
) -> None:
    """Capture keeps the link; the run is refused before launch, naming it; nothing is left."""
    links, named = ESCAPING[case]
    _repo_with_links(repo, links)
    captured = service.snapshot_capture(sqlite_store, repo)
    targets = {
        e.path: e.target for e in service.snapshot_get(sqlite_store, captured.snapshot_id).entries
    }
    assert {name: targets[name] for name in links} == links  # kept as data
    result = run_probe(captured.snapshot_id, "cat", ["link" if "link" in links else "l1"])
    assert (result.outcome, result.reason) == ("inconclusive", "snapshot_link_escapes")
    assert f"'{named}'" in result.receipt["operational"]["detail"]
    assert result.exit_code is None  # the probe never ran
    assert service.receipt_get(sqlite_store, result.run_id)["receipt_sha256"]
    assert leftovers(run_tmp) == []


def test_internal_relative_links_are_kept(
    run_probe: RunProbe, sqlite_store: Store, repo: Path, run_tmp: Path
) -> None:
    """Links that stay inside (to a file, up a directory, dangling) are recreated and usable."""
    _repo_with_links(repo, {"alias": "data.txt", "a/b/up": "../..", "dangling": "missing/x"})
    snapshot_id = service.snapshot_capture(sqlite_store, repo).snapshot_id
    result = run_probe(snapshot_id, "cat", ["alias", "a/b/up/data.txt"])
    assert (result.status, result.exit_code) == ("ok", 0), result.stderr
    assert result.stdout == "inside\ninside\n"
    assert result.outcome == "supports"
    assert leftovers(run_tmp) == []
