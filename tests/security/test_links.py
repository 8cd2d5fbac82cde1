"""A snapshot link that escapes its tree is never recreated; a harmless one always is
(docs/ARCHITECTURE.md, "Snapshot links").

Before (tracker issue 10, item 6): a link to ``/etc/hostname`` or ``../../outside`` was
materialized as is, and the probe ran. Then every link that the manifest walk could not
finish within 40 hops was refused too, so a repository shipping a link loop (``a -> b``,
``b -> a``, a common fixture of link-handling tests) ended every run ``inconclusive`` /
``snapshot_link_escapes``. Now capture keeps every link as data; only a link that is
absolute or resolves outside the tree (after following links inside it) refuses the run,
naming it; a loop or a dangling link is recreated and the kernel answers the probe
``ELOOP`` / ``ENOENT`` as it would in a checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service.store import Store

from .. import calls as service
from .attacks import RunProbe, leftovers

pytestmark = pytest.mark.sandbox

ESCAPING = {
    "absolute": ({"link": "/etc/hostname"}, "link"),
    "parent": ({"link": "../../outside"}, "link"),
    # Each link alone stays inside; followed through the first, the second leaves.
    "through-internal-link": ({"a/b/up": "../..", "link": "a/b/up/../outside"}, "link"),
    # A loop beside an escaping link does not hide it (one that leads *through* the loop
    # is a loop: the kernel gives up on it before it could leave).
    "beside-a-loop": ({"l1": "l2", "l2": "l1", "link": "a/../../outside"}, "link"),
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
    result = run_probe(captured.snapshot_id, "cat", ["link"])
    assert (result.outcome, result.reason) == ("inconclusive", "snapshot_link_escapes")
    assert f"'{named}'" in result.receipt.operational.to_json()["detail"]
    assert result.exit_code is None  # the probe never ran
    assert service.receipt_get(sqlite_store, result.run_id).receipt_sha256
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


def test_a_link_loop_runs_and_the_probe_sees_eloop(
    run_probe: RunProbe, sqlite_store: Store, repo: Path, run_tmp: Path
) -> None:
    """A loop (two links, and one to itself) and a dangling link are recreated: the probe
    runs, reads the tree's file, and the kernel answers ELOOP and ENOENT."""
    _repo_with_links(repo, {"l1": "l2", "l2": "l1", "self": "self", "dangling": "missing/x"})
    snapshot_id = service.snapshot_capture(sqlite_store, repo).snapshot_id
    script = (
        "cat data.txt; "
        "cat l1 2>&1 || echo l1-failed; cat self 2>&1 || echo self-failed; "
        "cat dangling 2>&1 || echo dangling-failed; "
        "echo targets $(readlink l1) $(readlink l2) $(readlink self)"
    )
    result = run_probe(snapshot_id, "sh", ["-c", script])
    assert (result.status, result.outcome) == ("ok", "supports"), result.detail
    lines = result.stdout.splitlines()
    assert lines[0] == "inside"
    assert "Too many levels of symbolic links" in lines[1], result.stdout
    assert lines[2] == "l1-failed"
    assert "Too many levels of symbolic links" in lines[3], result.stdout
    assert "No such file or directory" in lines[5], result.stdout
    assert lines[-1] == "targets l2 l1 self"
    assert leftovers(run_tmp) == []


def test_a_loop_is_refused_by_no_warm_tree_and_an_escape_by_every_one(
    run_probe: RunProbe, sqlite_store: Store, repo: Path, run_tmp: Path
) -> None:
    """The worker's warm cache asks the same rule: the loop snapshot is served twice (the
    second time from the cache), the escaping one is refused twice and never cached."""
    from probe_service.plans.warm import default_snapshot_cache

    _repo_with_links(repo, {"l1": "l2", "l2": "l1"})
    looped = service.snapshot_capture(sqlite_store, repo).snapshot_id
    (repo / "out").symlink_to("/etc/hostname")
    escaping = service.snapshot_capture(sqlite_store, repo).snapshot_id
    cache = default_snapshot_cache()
    key = (sqlite_store.url or str(sqlite_store.root), looped)
    for _ in range(2):
        ran = run_probe(looped, "cat", ["data.txt"])
        assert (ran.outcome, ran.stdout) == ("supports", "inside\n"), ran.detail
        assert key in cache
        refused = run_probe(escaping, "cat", ["data.txt"])
        assert (refused.outcome, refused.reason) == ("inconclusive", "snapshot_link_escapes")
        assert "'out'" in refused.detail
        assert (key[0], escaping) not in cache
    assert leftovers(run_tmp) == []
