"""check_links: escaping snapshot links are refused over the manifest, before any write."""

from __future__ import annotations

import pytest

from probe_service.errors import LinkEscapes
from probe_service.snapshot import Entry
from probe_service.snapshot.links import MAX_LINK_HOPS, check_links


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
    ],
)
def test_internal_links_are_kept(targets: dict[str, str]) -> None:
    """Links that stay inside the tree, dangling or chained, pass."""
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
        ({"a": "a"}, "a"),
    ],
)
def test_escaping_links_are_refused_by_name(targets: dict[str, str], named: str) -> None:
    """Absolute, upward, through-a-link and looping targets refuse, naming the link."""
    with pytest.raises(LinkEscapes) as caught:
        check_links(_links(**targets))
    assert caught.value.path == named
    assert repr(named) in str(caught.value)


def test_hop_bound() -> None:
    """A chain of exactly MAX_LINK_HOPS links resolves; one more is refused."""
    chain = {f"l{i}": f"l{i + 1}" for i in range(MAX_LINK_HOPS)}
    check_links(_links(**chain))
    chain[f"l{MAX_LINK_HOPS}"] = f"l{MAX_LINK_HOPS + 1}"
    with pytest.raises(LinkEscapes, match=f"more than {MAX_LINK_HOPS} links"):
        check_links(_links(**chain))
