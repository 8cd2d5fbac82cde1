"""Bundles refused (issue 30, "Bad input"): each names the object, and nothing is written
(docs/ARCHITECTURE.md, "Bundles")."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zstandard

from probe_service.canonical import canonical_json, sha256_hex
from probe_service.errors import BundleInvalid, Conflict, LimitExceeded, ProbeServiceError
from probe_service.service import ProbeService

from ..fuzz.strategies import row_counts
from .conftest import Source

Members = list[tuple[str, bytes]]


def read_members(path: Path) -> Members:
    """Every member of a bundle, the manifest first, as written."""
    with path.open("rb") as handle, zstandard.ZstdDecompressor().stream_reader(handle) as stream:
        raw = stream.read()
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]


def write_members(path: Path, members: Members, *, pax: dict[str, str] | None = None) -> Path:
    """A bundle file holding exactly ``members`` (no check of ours on the way)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for i, (name, data) in enumerate(members):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax and i == 1:
                info.pax_headers = pax
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    return path


def relisted(members: Members) -> Members:
    """``members`` with a manifest listing their current digests and sizes."""
    manifest = json.loads(members[0][1])
    manifest["objects"] = [
        {"path": n, "sha256": sha256_hex(d), "size": len(d)} for n, d in members[1:]
    ]
    return [("manifest.json", canonical_json(manifest)), *members[1:]]


@pytest.fixture
def exported(source: Source) -> Path:
    """The source's claim, exported."""
    out = source.work / "good.bundle"
    source.svc.bundle_export(out=str(out), claim_ids=(source.claim_id,))
    return out


@pytest.fixture
def target(tmp_path: Path) -> Iterator[ProbeService]:
    """An empty SQLite store to import into."""
    (tmp_path / "b").mkdir()
    with ProbeService.open(tmp_path / "b") as svc:
        yield svc


def refused(
    target: ProbeService, path: Path, key: str, error: type[ProbeServiceError] = BundleInvalid
) -> str:
    """Import ``path``, expect ``error``; assert the store is unchanged; the message."""
    before = row_counts(target.store)
    with pytest.raises(error) as caught:
        target.bundle_import(path=str(path), require_signed=(key,))
    assert row_counts(target.store) == before
    return str(caught.value)


def edited(exported: Path, kind: str, change: Callable[[bytes], bytes]) -> Members:
    members = read_members(exported)
    (index,) = [i for i, (n, _) in enumerate(members) if n.startswith(kind + "/")][:1]
    name, data = members[index]
    members[index] = (name, change(data))
    return members


def test_the_good_bundle_imports(exported: Path, target: ProbeService, source: Source) -> None:
    """The untouched bundle imports (the refusals below are of their edits alone)."""
    assert target.bundle_import(path=str(exported), require_signed=(source.public_key,)).written


def test_tampered_blob(exported: Path, target: ProbeService, source: Source) -> None:
    """A blob whose bytes changed (manifest relisted to match) is refused by its id."""
    members = edited(exported, "blob", lambda d: b"#" + d[1:])  # the same size
    blob = next(n for n, _ in members if n.startswith("blob/"))
    path = write_members(exported.with_name("t.bundle"), relisted(members))
    assert f"{blob}: its bytes do not hash to its id" in refused(target, path, source.public_key)
    # Without relisting, the manifest's own digest catches it first.
    path = write_members(exported.with_name("u.bundle"), members)
    assert f"{blob}: its bytes do not match the manifest" in refused(
        target, path, source.public_key
    )


def test_receipt_whose_commitment_no_longer_matches(
    exported: Path, target: ProbeService, source: Source
) -> None:
    """A receipt with an edited committed field is refused naming the run and the field."""

    def flip(data: bytes) -> bytes:
        doc = json.loads(data)
        doc["committed"]["exit_code"] = 1
        return json.dumps(doc, sort_keys=True).encode()

    members = relisted(edited(exported, "receipt", flip))
    run = next(n for n, _ in members if n.startswith("receipt/"))
    message = refused(
        target, write_members(exported.with_name("r.bundle"), members), source.public_key
    )
    assert f"{run}: commitment does not verify" in message
    assert "exit_code" in message


def test_signature_by_an_unlisted_key(exported: Path, target: ProbeService, source: Source) -> None:
    """Signed, but by a key the import does not list: refused naming the envelope."""
    message = refused(target, exported, source.other_public_key)
    assert message.startswith("envelope/")
    assert "not by a given key" in message


def test_unsigned_evidence_needs_allow_unsigned(
    exported: Path, target: ProbeService, source: Source
) -> None:
    """A bundle whose envelope was dropped: refused with --require-signed, imported with
    --allow-unsigned, which the answer says."""
    members = [(n, d) for n, d in read_members(exported) if not n.startswith("envelope/")]
    path = write_members(exported.with_name("n.bundle"), relisted(members))
    assert "not signed by a listed key" in refused(target, path, source.public_key)
    done = target.bundle_import(path=str(path), allow_unsigned=True)
    assert done.allow_unsigned
    assert len(done.unsigned_receipts) == 1


def test_truncated_file(exported: Path, target: ProbeService, source: Source) -> None:
    """A bundle cut short is refused as not whole."""
    path = exported.with_name("cut.bundle")
    path.write_bytes(exported.read_bytes()[: exported.stat().st_size // 2])
    assert "not a whole bundle (truncated or corrupt" in refused(target, path, source.public_key)


def test_unknown_format_version(exported: Path, target: ProbeService, source: Source) -> None:
    """A manifest of format version 2 is refused naming the version."""
    members = read_members(exported)
    manifest = {**json.loads(members[0][1]), "version": 2}
    members[0] = ("manifest.json", canonical_json(manifest))
    path = write_members(exported.with_name("v.bundle"), members)
    assert "version 2 is not a bundle format version" in refused(target, path, source.public_key)


@pytest.mark.parametrize("name", ["../escape", "/etc/cron.d/x", "blob/../../x", "blob/a/b"])
def test_zip_slip_paths(exported: Path, target: ProbeService, source: Source, name: str) -> None:
    """A member whose name could leave a directory is refused naming it, listed in the
    manifest or not."""
    members = [*read_members(exported), (name, b"x")]
    unlisted = write_members(exported.with_name("s1.bundle"), members)
    assert repr(name) in refused(target, unlisted, source.public_key)
    listed = write_members(exported.with_name("s2.bundle"), relisted(members))
    assert repr(name) in refused(target, listed, source.public_key)


def test_link_member(exported: Path, target: ProbeService, source: Source) -> None:
    """A member that is a symbolic link is refused, even under a good name."""
    buffer = io.BytesIO()
    members = read_members(exported)
    with tarfile.open(fileobj=buffer, mode="w:") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if name.startswith("blob/"):
                info.type, info.linkname, info.size = tarfile.SYMTYPE, "/etc/passwd", 0
            tar.addfile(info, io.BytesIO(data))
    path = exported.with_name("l.bundle")
    path.write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    assert "not a regular file" in refused(target, path, source.public_key)


def test_object_over_the_capture_cap(exported: Path, target: ProbeService, source: Source) -> None:
    """An object listed over the capture's 64 MiB a file is refused before it is read."""
    members = read_members(exported)
    manifest = json.loads(members[0][1])
    manifest["objects"][0]["size"] = 64 * (1 << 20) + 1
    members[0] = ("manifest.json", canonical_json(manifest))
    path = write_members(exported.with_name("big.bundle"), members)
    name = manifest["objects"][0]["path"]
    message = refused(target, path, source.public_key, LimitExceeded)
    assert message.startswith(f"{name}: 67108865 bytes, over 67108864")


def test_decompression_bomb(exported: Path, target: ProbeService, source: Source) -> None:
    """A small file whose tar headers decompress far past what the manifest lists (a 48
    MiB PAX record) stops at the cap, naming the file."""
    path = write_members(
        exported.with_name("bomb.bundle"),
        read_members(exported),
        pax={"comment": "0" * (48 << 20)},
    )
    assert path.stat().st_size < 64 * 1024
    message = refused(target, path, source.public_key, LimitExceeded)
    assert "decompression bomb" in message
    assert str(path) in message


def test_import_into_its_own_store_writes_nothing(exported: Path, source: Source) -> None:
    """Every object of the bundle is already stored, byte for byte: nothing is written."""
    before = row_counts(source.svc.store)
    done = source.svc.bundle_import(path=str(exported), require_signed=(source.public_key,))
    assert not done.written
    assert done.already_stored["claim"] == 1
    assert row_counts(source.svc.store) == before


def test_other_bytes_under_a_stored_id(exported: Path, source: Source) -> None:
    """A claim edited in the bundle (its record digest recomputed, so it verifies) is
    refused where the store holds that claim id with other bytes; nothing is written."""
    from probe_service.claims.creation import record_digest_of
    from probe_service.claims.records import ClaimRecord

    def restate(data: bytes) -> bytes:
        record = ClaimRecord.model_validate_json(data)
        record = record.model_copy(update={"statement": "parse_list refuses a trailing comma"})
        record = record.model_copy(update={"record_digest": record_digest_of(record)})
        return canonical_json(
            record.model_dump(mode="json", exclude={"supersedes", "superseded_by", "withdrawn"})
        )

    members = relisted(edited(exported, "claim", restate))
    message = refused(source.svc, write_members(exported.with_name("c.bundle"), members),
                      source.public_key, Conflict)  # fmt: skip
    assert message.startswith(f"claim/{source.claim_id}: this store holds another object")
