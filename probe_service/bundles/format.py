"""The bundle file: one zstd-compressed tar whose first member is a manifest.

docs/ARCHITECTURE.md, "Bundles" is the format's specification: ``manifest.json`` first
(format name, version, every object's path, SHA-256 and size), then one member per object,
each a regular file named ``<kind>/<id>``. Reading never touches the disk and never trusts
a header: a member name is matched against the kinds before anything of it is read, sizes
are bounded by the capture caps before and while decompressing (a decompression bomb stops
at the cap), and every member's bytes must hash to what the manifest lists.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import zstandard

from ..canonical import canonical_json, sha256_hex
from ..errors import BundleInvalid, LimitExceeded

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "KINDS",
    "MANIFEST_NAME",
    "BundleContents",
    "BundleLimits",
    "member_path",
    "read_bundle",
    "write_bundle",
]

FORMAT_NAME = "byte-probe-bundle"
#: The only version this release reads and writes (docs/UPGRADING.md names each).
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
#: Every kind of object a bundle may hold, in the order a bundle lists them.
KINDS = (
    "blob",
    "snapshot",
    "plan",
    "receipt",
    "envelope",
    "claim",
    "supersession",
    "tombstone",
    "check",
    "obligation",
    "audit",
)
#: ``<kind>/<id>``: no other name is read; ``..``, ``/`` and links cannot be spelled.
_MEMBER = re.compile(r"^(" + "|".join(KINDS) + r")/([A-Za-z0-9][A-Za-z0-9_-]{0,127})$")
_MiB = 1 << 20
#: Tar headers a member may take besides its data (a header block, a PAX record, padding).
_HEADER_ALLOWANCE = 8 * 1024


@dataclass(frozen=True)
class BundleLimits:
    """What one bundle may hold once decompressed: the capture caps (64 MiB a file, 256
    MiB in all, docs/ARCHITECTURE.md, "Snapshot capture") and a count of members."""

    max_member_bytes: int = 64 * _MiB
    max_total_bytes: int = 256 * _MiB
    max_members: int = 500_000
    max_manifest_bytes: int = 64 * _MiB


@dataclass
class BundleContents:
    """A bundle read whole: its manifest and every member's bytes, each checked against
    the manifest's digest and size."""

    bundle_id: str
    manifest: dict[str, Any]
    members: dict[str, bytes] = field(default_factory=dict)

    def of_kind(self, kind: str) -> Iterator[tuple[str, bytes]]:
        """``(id, bytes)`` of every member of ``kind``, in manifest order."""
        prefix = kind + "/"
        for path, data in self.members.items():
            if path.startswith(prefix):
                yield path[len(prefix) :], data


def member_path(kind: str, ident: str) -> str:
    """The member name of an object; raises BundleInvalid for a name no reader accepts."""
    path = f"{kind}/{ident}"
    if not _MEMBER.fullmatch(path):
        raise BundleInvalid(f"{path}: not a bundle member name (<kind>/<id>)")
    return path


def write_bundle(
    out: Path, objects: Iterable[tuple[str, bytes]], header: dict[str, Any]
) -> tuple[str, int]:
    """Write ``objects`` (``(member path, bytes)``, each path once) with their manifest to
    ``out``, through a temporary file beside it renamed into place; returns ``(bundle id,
    bytes written)``. Raises OSError when ``out`` cannot be written."""
    listed = list(objects)
    manifest = {
        **header,
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "objects": [{"path": p, "sha256": sha256_hex(d), "size": len(d)} for p, d in listed],
    }
    raw = canonical_json(manifest)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            compressor = zstandard.ZstdCompressor(level=9, write_checksum=True)
            with (
                compressor.stream_writer(handle, closefd=False) as stream,
                tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar,
            ):
                _add(tar, MANIFEST_NAME, raw)
                for path, data in listed:
                    _add(tar, path, data)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return sha256_hex(raw), out.stat().st_size


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    # Fixed metadata: the same objects give the same bytes.
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


class _Bounded(io.RawIOBase):
    """The decompressed stream, refused once it passes ``cap`` bytes (a bomb stops there)."""

    cap: int

    def __init__(self, source: IO[bytes], cap: int, where: str) -> None:
        self._source, self.cap, self._where, self.count = source, cap, where, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        self.count += len(data)
        if self.count > self.cap:
            raise LimitExceeded(
                f"{self._where}: decompresses past {self.cap} bytes (what its manifest lists); "
                "refused as a decompression bomb"
            )
        buffer[: len(data)] = data
        return len(data)


def read_bundle(path: Path, limits: BundleLimits | None = None) -> BundleContents:
    """Read and check a bundle file whole, in memory.

    Raises BundleInvalid naming the member or the file: not a zstd tar (truncated or
    corrupt), no manifest first, an unknown format or version, a member name that is not
    ``<kind>/<id>`` (an absolute or ``..`` path), a member that is not a regular file, listed
    twice, missing, unlisted, or whose bytes do not match the manifest's size or SHA-256;
    LimitExceeded when a member, the whole or the count passes ``limits``.
    """
    limits = limits or BundleLimits()
    try:
        with (
            open(path, "rb") as handle,
            zstandard.ZstdDecompressor().stream_reader(handle) as raw,
        ):
            # Until the manifest is read: the manifest's cap and its headers.
            bounded = _Bounded(raw, limits.max_manifest_bytes + _HEADER_ALLOWANCE, str(path))
            with tarfile.open(fileobj=io.BufferedReader(bounded), mode="r|") as tar:
                return _read_members(path, tar, limits, bounded)
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        raise BundleInvalid(f"{path}: not a whole bundle (truncated or corrupt: {exc})") from exc


def _read_members(
    path: Path, tar: tarfile.TarFile, limits: BundleLimits, bounded: _Bounded
) -> BundleContents:
    first = tar.next()
    if first is None or first.name != MANIFEST_NAME or not first.isreg():
        raise BundleInvalid(f"{path}: the first member is not {MANIFEST_NAME}")
    if first.size > limits.max_manifest_bytes:
        raise LimitExceeded(
            f"{MANIFEST_NAME}: {first.size} bytes, over {limits.max_manifest_bytes}"
        )
    raw = _data(tar, first)
    listed = _listed(_manifest(raw), limits)
    # From here on the stream may hold what the manifest lists and its headers, no more:
    # a header that claims more (a huge PAX record) stops at this cap.
    bounded.cap = (
        bounded.count + sum(s for _, s in listed.values()) + _HEADER_ALLOWANCE * (len(listed) + 2)
    )
    contents = BundleContents(bundle_id=sha256_hex(raw), manifest=json.loads(raw))
    total = 0
    for member in tar:
        if member is first:  # iterating a stream's tar starts again at its first member
            continue
        name = member.name
        if not _MEMBER.fullmatch(name):
            raise BundleInvalid(f"{name!r}: not a bundle member name (<kind>/<id>); refused")
        if not member.isreg():
            raise BundleInvalid(f"{name}: not a regular file (links and devices are refused)")
        if name not in listed:
            raise BundleInvalid(f"{name}: not listed in the manifest")
        if name in contents.members:
            raise BundleInvalid(f"{name}: appears twice")
        digest, size = listed[name]
        if member.size != size:
            raise BundleInvalid(f"{name}: {member.size} bytes, the manifest lists {size}")
        total += size
        if total > limits.max_total_bytes:
            raise LimitExceeded(
                f"{name}: the bundle passes {limits.max_total_bytes} bytes (the capture cap)"
            )
        data = _data(tar, member)
        if sha256_hex(data) != digest:
            raise BundleInvalid(f"{name}: its bytes do not match the manifest's sha256")
        contents.members[name] = data
    missing = [name for name in listed if name not in contents.members]
    if missing:
        raise BundleInvalid(f"{missing[0]}: listed in the manifest, absent from the bundle")
    contents.members = {name: contents.members[name] for name in listed}
    return contents


def _data(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    data = handle.read() if handle is not None else b""
    if len(data) != member.size:
        raise BundleInvalid(f"{member.name}: truncated ({len(data)} of {member.size} bytes)")
    return data


def _manifest(raw: bytes) -> dict[str, Any]:
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleInvalid(f"{MANIFEST_NAME}: not JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise BundleInvalid(f"{MANIFEST_NAME}: format is not {FORMAT_NAME!r}")
    version = manifest.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise BundleInvalid(
            f"{MANIFEST_NAME}: version {json.dumps(version)} is not a bundle format version "
            f"this release reads ({FORMAT_VERSION})"
        )
    return manifest


def _listed(manifest: dict[str, Any], limits: BundleLimits) -> dict[str, tuple[str, int]]:
    objects = manifest.get("objects")
    if not isinstance(objects, list):
        raise BundleInvalid(f"{MANIFEST_NAME}: objects is not a list")
    if len(objects) > limits.max_members:
        raise LimitExceeded(
            f"{MANIFEST_NAME}: {len(objects)} objects, over {limits.max_members} a bundle"
        )
    listed: dict[str, tuple[str, int]] = {}
    for i, entry in enumerate(objects):
        where = f"{MANIFEST_NAME}: objects[{i}]"
        if not isinstance(entry, dict):
            raise BundleInvalid(f"{where}: not an object")
        name, digest, size = entry.get("path"), entry.get("sha256"), entry.get("size")
        if not isinstance(name, str) or not _MEMBER.fullmatch(name):
            raise BundleInvalid(f"{where}: path {name!r} is not <kind>/<id>; refused")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise BundleInvalid(f"{where}: sha256 of {name} is not 64 hex")
        if type(size) is not int or size < 0:
            raise BundleInvalid(f"{where}: size of {name} is not a count of bytes")
        if size > limits.max_member_bytes:
            raise LimitExceeded(
                f"{name}: {size} bytes, over {limits.max_member_bytes} an object (the capture cap)"
            )
        if name in listed:
            raise BundleInvalid(f"{where}: {name} is listed twice")
        listed[name] = (digest, size)
    return listed
