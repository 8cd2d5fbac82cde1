"""The link rule: escaping snapshot links are refused over the manifest, before any write;
loops and dangling links are kept (docs/ARCHITECTURE.md, "Snapshot links")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service.errors import LinkEscapes
from probe_service.snapshot import Entry, snapshot_capture, snapshot_materialize
from probe_service.snapshot.links import (
    MAX_LINK_HOPS,
    check_links,
    escaping_links,
    link_targets,
    resolve_link,
)
from probe_service.store import Store


def _links(**targets: str) -> list[Entry]:
    entries = [Entry(path="d/sub/file", kind="file", digest="0" * 64)]
    entries += [
        Entry(path=p.replace("__", "/"), kind="symlink", target=t) for p, t in targets.items()
    ]
    return entries


@pytest.mark.parametrize(
    "targets",
    [
        {"x": "file"},
        {"d__up": ".."},
        {"d__sub__top": "../../d/sub/file"},
        {"x": "missing/deeper/.."},
        {"x": "./d/./sub//file"},
        {"a": "b", "b": "c", "c": "d/sub"},
        {"a": "a"},
        {"a": "b", "b": "a"},
        {"d__loop": "../d/loop"},
        {"a": "b/../..", "b": "a"},
        {"l1": "l2", "l2": "l1", "x": "l1/../../outside"},
    ],
)
def test_internal_links_are_kept(targets: dict[str, str]) -> None:
    """Links that stay inside the tree, dangling, chained or looping, pass."""
    check_links(_links(**targets))


@pytest.mark.parametrize(
    ("targets", "named"),
    [
        ({"x": "/etc/hostname"}, "x"),
        ({"x": ".."}, "x"),
        ({"d__x": "../.."}, "d/x"),
        ({"d__sub__x": "../../../etc"}, "d/sub/x"),
        ({"d__up": "..", "x": "d/up/.."}, "x"),
        ({"a": "b", "b": "/etc"}, "a"),
        ({"l1": "l2", "l2": "l1", "x": "../escape"}, "x"),
        ({"x": "missing/../.."}, "x"),
    ],
)
def test_escaping_links_are_refused_by_name(targets: dict[str, str], named: str) -> None:
    """Absolute, upward and through-a-link targets refuse, naming the link (a dangling
    path that climbs out escapes too: its missing directory could be made)."""
    with pytest.raises(LinkEscapes) as caught:
        check_links(_links(**targets))
    assert caught.value.path == named
    assert repr(named) in str(caught.value)


def test_hop_bound() -> None:
    """A chain of exactly MAX_LINK_HOPS links resolves inside; one more is a loop to the
    kernel (ELOOP), kept, even when its end would leave the tree."""
    chain = {f"l{i}": f"l{i + 1}" for i in range(MAX_LINK_HOPS)}
    targets = link_targets(_links(**chain))
    assert resolve_link("l0", targets).kind == "inside"
    chain[f"l{MAX_LINK_HOPS}"] = "/etc/hostname"
    targets = link_targets(_links(**chain))
    assert resolve_link("l0", targets).kind == "loop"
    assert resolve_link("l1", targets).kind == "escapes"
    assert [path for path, _ in escaping_links(targets)] == [
        f"l{i}" for i in sorted(range(1, MAX_LINK_HOPS + 1), key=lambda i: f"l{i}")
    ]


def test_where_a_link_leads() -> None:
    """An internal link resolves to the path it names; a loop says so."""
    targets = link_targets(_links(d__up="..", x="d/up/d/sub/file", a="b", b="a"))
    assert resolve_link("x", targets).path == "d/sub/file"
    assert resolve_link("d/up", targets).path == ""
    assert resolve_link("a", targets).kind == "loop"


def test_capture_names_what_a_run_would_refuse(sqlite_store: Store, repo: Path) -> None:
    """Capture stores every link and names, by the same rule, the ones a run refuses; a
    loop and a dangling link are not among them."""
    (repo / "data.txt").write_text("x\n")
    for name, target in {
        "l1": "l2",
        "l2": "l1",
        "gone": "nowhere",
        "host": "/etc/hostname",
    }.items():
        os.symlink(target, repo / name)
    captured = snapshot_capture(sqlite_store, repo)
    assert captured.symlinks == 4
    assert captured.escaping_links == (
        "snapshot link 'host' -> '/etc/hostname' has an absolute target",
    )


def test_materialize_recreates_a_loop_as_links(
    sqlite_store: Store, repo: Path, tmp_path: Path
) -> None:
    """A cold materialization writes the loop and the dangling link as they were."""
    (repo / "data.txt").write_text("x\n")
    for name, target in {"l1": "l2", "l2": "l1", "gone": "nowhere"}.items():
        os.symlink(target, repo / name)
    snapshot_id = snapshot_capture(sqlite_store, repo).snapshot_id
    snapshot_materialize(sqlite_store, snapshot_id, tmp_path / "out")
    assert {n: os.readlink(tmp_path / "out" / n) for n in ("l1", "l2", "gone")} == {
        "l1": "l2",
        "l2": "l1",
        "gone": "nowhere",
    }
    with pytest.raises(OSError, match="Too many levels"):
        (tmp_path / "out" / "l1").read_text()
