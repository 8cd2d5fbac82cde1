"""The bundle file format round-trips, and no edit of a file is read as other content
(docs/ARCHITECTURE.md, "Bundles")."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probe_service.bundles.format import KINDS, BundleLimits, read_bundle, write_bundle
from probe_service.errors import BundleInvalid, LimitExceeded

_IDS = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_-]{0,20}\Z")
_MEMBERS = st.dictionaries(
    st.tuples(st.sampled_from(KINDS), _IDS).map(lambda t: f"{t[0]}/{t[1]}"),
    st.binary(max_size=300),
    max_size=6,
)
_SETTINGS = settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


@_SETTINGS
@given(members=_MEMBERS)
def test_members_round_trip(tmp_path: Path, members: dict[str, bytes]) -> None:
    """What is written is read back: the same members, in order, and the same id."""
    out = tmp_path / "b.bundle"
    out.unlink(missing_ok=True)
    bundle_id, _ = write_bundle(out, members.items(), {"selection": {}})
    read = read_bundle(out)
    assert read.bundle_id == bundle_id
    assert read.members == members


@_SETTINGS
@given(members=_MEMBERS.filter(bool), where=st.floats(0, 1), bit=st.integers(0, 7))
def test_a_flipped_bit_is_refused_or_changes_nothing(
    tmp_path: Path, members: dict[str, bytes], where: float, bit: int
) -> None:
    """Any one bit flipped in the file: the read is refused, or gives the same members."""
    out = tmp_path / "f.bundle"
    out.unlink(missing_ok=True)
    write_bundle(out, members.items(), {"selection": {}})
    data = bytearray(out.read_bytes())
    data[min(int(where * len(data)), len(data) - 1)] ^= 1 << bit
    out.write_bytes(bytes(data))
    try:
        read = read_bundle(out)
    except (BundleInvalid, LimitExceeded):
        return
    assert read.members == members


def test_the_total_cap_counts_every_member(tmp_path: Path) -> None:
    """Members each under the per-object cap but together over the total are refused."""
    out = tmp_path / "t.bundle"
    write_bundle(out, [(f"blob/b{i}", b"x" * 1000) for i in range(5)], {"selection": {}})
    limits = BundleLimits(max_member_bytes=1000, max_total_bytes=4500)
    with pytest.raises(LimitExceeded, match="blob/b4: the bundle passes 4500 bytes"):
        read_bundle(out, limits)
    assert len(read_bundle(out).members) == 5
