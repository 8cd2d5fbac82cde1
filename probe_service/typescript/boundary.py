"""``typescript_boundary``: definitions, consumers and implementations of a symbol in one
stored snapshot.

docs/ARCHITECTURE.md, "TypeScript boundary". The worker's answer is data: it is checked
against the request (adapter, symbol, file) and every span against the snapshot's own
bytes before it is believed; an answer that does not match is ``unavailable``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..claims import SnapshotSource
from ..claims.digests import digest_json
from ..claims.models import MAX_QUERY_RESULTS
from ..claims.queries import ANALYZER_VERSION, typescript_domain
from ..claims.views import BlobMissing, EntryLike, TreeView
from ..errors import InvalidInput, NotFound
from ..sandbox import SandboxRuntime
from ..store import Store
from .analyzer import TYPESCRIPT_BOUNDARY
from .install import PINNED_TYPESCRIPT, WorkerInstall
from .models import SEARCHED_NAMED, BoundaryProject, BoundaryResult, BoundarySite
from .worker import ADAPTER_VERSION, WorkerAnswer, WorkerRequest, run_worker, span_matches

__all__ = ["boundary_for_tree", "not_found_message", "result_identity", "typescript_boundary"]

_SYMBOL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


def typescript_boundary(
    store: Store,
    snapshot_id: str,
    symbol: str,
    file: str | None = None,
    *,
    max_results: int = 1000,
    runtime: SandboxRuntime | None = None,
    worker: WorkerInstall | None = None,
) -> BoundaryResult:
    """Resolve the definitions, consumers and implementations of ``symbol`` in the snapshot.

    Raises InvalidInput for a malformed symbol, file or limit; NotFound when the snapshot
    (or a blob it names) is not in the store, or when no declaration of ``symbol`` (in
    ``file``) exists in the files searched (the message names them). Budgets, sandbox and
    worker failures are answers (``unavailable``), never exceptions. Writes nothing.
    """
    check_request(symbol, file, max_results)
    tree = SnapshotSource(store, TYPESCRIPT_BOUNDARY).require(snapshot_id)
    try:
        result = boundary_for_tree(
            tree,
            (symbol, file, max_results),
            runtime=runtime,
            worker=worker,
            forbidden_roots=(store.root,),
        )
    except BlobMissing as exc:
        raise NotFound(f"snapshot {snapshot_id}: blob missing from the store: {exc}") from exc
    if result.reason == "not_found":
        raise NotFound(not_found_message(result))
    return result


def not_found_message(result: BoundaryResult) -> str:
    """Why ``result`` names no declaration, with the files searched (bounded)."""
    where = f" in {result.file}" if result.file is not None else ""
    named = ", ".join(result.searched)
    more = result.searched_count - len(result.searched)
    listing = f": {named}" + (f" and {more} more" if more > 0 else "") if named else ""
    return (
        f"symbol: no declaration of {result.symbol!r}{where} in the "
        f"{result.searched_count} TypeScript/JavaScript file(s) searched{listing}"
    )


def check_request(symbol: str, file: str | None, max_results: int) -> None:
    """Raise InvalidInput naming the field when the request is malformed."""
    if not symbol or len(symbol) > 200 or not set(symbol) <= _SYMBOL_CHARS or symbol[0].isdigit():
        raise InvalidInput(f"symbol: {symbol!r} is not a TypeScript identifier")
    if file is not None:
        parts = file.split("/")
        if file.startswith("/") or "\\" in file or any(p in ("", ".", "..") for p in parts):
            raise InvalidInput(f"file: {file!r} is not a clean relative path in the snapshot")
    if not 1 <= max_results <= MAX_QUERY_RESULTS:
        raise InvalidInput(f"max_results: {max_results} is not within 1..{MAX_QUERY_RESULTS}")


def boundary_for_tree(
    tree: TreeView,
    request: tuple[str, str | None, int],
    *,
    domain_glob: str = "**",
    extras: Sequence[EntryLike] = (),
    runtime: SandboxRuntime | None = None,
    worker: WorkerInstall | None = None,
    forbidden_roots: Sequence[Path] = (),
) -> BoundaryResult:
    """The boundary of ``request`` (symbol, file, max results) in ``tree``'s inputs inside
    ``domain_glob``, plus ``extras`` (files outside it the compiler analyzes too).

    Raises BlobMissing when a blob of the inputs cannot be read.
    """
    domain = typescript_domain(domain_glob, tree)
    answer = run_worker(
        tree,
        domain,
        WorkerRequest(*request, extras=tuple(extras)),
        runtime=runtime,
        worker=worker,
        forbidden_roots=forbidden_roots,
    )
    base = {
        "snapshot_id": tree.snapshot_id,
        "symbol": request[0],
        "file": request[1],
        "adapter_version": ADAPTER_VERSION,
        "typescript_version": PINNED_TYPESCRIPT,
        "worker_digest": answer.worker_digest,
        "input_fingerprint": domain.content_digest,
    }
    if answer.reason is None:
        try:
            return _from_answer(base, answer, request)
        except _Mismatch as exc:
            answer.reason, answer.detail = "worker_answer_mismatch", str(exc)
        except ValidationError as exc:
            answer.reason, answer.detail = "worker_output_invalid", str(exc.errors()[0]["msg"])
    return _unavailable(base, answer)


class _Mismatch(Exception):
    """The worker's answer does not match the request or the snapshot."""


def _unavailable(base: dict[str, Any], answer: WorkerAnswer) -> BoundaryResult:
    fields = {
        **base,
        "status": "unavailable",
        "reason": answer.reason or "worker_failed",
        "applicable": True,
        "discovery_complete": False,
        "complete": False,
        "truncated": answer.reason in ("input_budget", "output_budget"),
        "unknowns": (f"{answer.reason}: {answer.detail}",),
    }
    fields["result_fingerprint"] = result_identity(fields)
    return BoundaryResult.model_validate(fields)


def _from_answer(
    base: dict[str, Any], answer: WorkerAnswer, request: tuple[str, str | None, int]
) -> BoundaryResult:
    data = answer.data
    if (
        data.get("adapter") != ADAPTER_VERSION
        or data.get("typescript_version") != PINNED_TYPESCRIPT
    ):
        raise _Mismatch(f"adapter {data.get('adapter')!r} / {data.get('typescript_version')!r}")
    if data.get("symbol") != request[0] or data.get("file") != request[1]:
        raise _Mismatch("the answer names another symbol or file than was asked")
    if data.get("status") == "unavailable":
        answer.reason, answer.detail = "input_budget", "; ".join(map(str, data.get("unknowns", [])))
        return _unavailable(base, answer)
    if data.get("status") not in ("ok", "inapplicable"):
        answer.reason = "worker_error"
        answer.detail = "; ".join(map(str, data.get("unknowns", [])))[:2000]
        return _unavailable(base, answer)
    unknowns = [str(u) for u in data.get("unknowns", [])]
    unknowns += [f"symbolic link not followed: {p}" for p in answer.skipped_links]
    complete = bool(data.get("complete")) and not answer.skipped_links
    truncated = bool(data.get("truncated"))
    applicable = bool(data.get("applicable"))
    status = "inapplicable" if not applicable else ("complete" if complete else "incomplete")
    fields = {
        **base,
        "status": status,
        "applicable": applicable,
        "discovery_complete": bool(data.get("discovery_complete")) and not answer.skipped_links,
        "complete": complete and not truncated,
        "truncated": truncated,
        "projects": [BoundaryProject.model_validate(p) for p in data.get("projects", [])],
        **{key: [_site(s, answer.files) for s in data.get(key, [])] for key in _SITE_LISTS},
        "unknowns": tuple(unknowns),
        "unavailable_packages": tuple(data.get("unavailable_packages", [])),
        "outside_reads": tuple(data.get("outside_reads", [])),
        "identifiers": _identifiers(data.get("identifiers"), request[0]),
        "searched_count": data.get("searched_count", 0),
        "searched": tuple(data.get("searched", []))[:SEARCHED_NAMED],
        "domain_fingerprint": data.get("domain_fingerprint"),
        "resolution_fingerprint": data.get("resolution_fingerprint"),
    }
    if applicable and not fields["definitions"] and _only_missing_declaration(unknowns):
        fields["reason"] = "not_found"
    fields["result_fingerprint"] = result_identity(fields)
    return BoundaryResult.model_validate(fields)


_SITE_LISTS = ("definitions", "consumers", "implementations")


def _only_missing_declaration(unknowns: Sequence[str]) -> bool:
    """Whether nothing but the declaration is missing: a search that was otherwise whole."""
    expected = ("no declaration of ", "requested file ")
    return bool(unknowns) and all(u.startswith(expected) for u in unknowns)


def _identifiers(raw: Any, symbol: str) -> tuple[str, ...]:
    """The worker's alias names: identifiers, the requested symbol among them."""
    if not isinstance(raw, list) or symbol not in raw or len(raw) > MAX_IDENTIFIERS:
        raise _Mismatch("the identifier query set is missing, lacks the symbol or is too long")
    for name in raw:
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
            raise _Mismatch(f"{name!r} in the identifier query set is not an identifier")
    return tuple(sorted(set(raw)))


#: An ECMAScript identifier name (letters, digits, ``$``, ``_``, joiners), at most 200 chars.
_IDENTIFIER = re.compile(r"[^\W\d][\w$\u200c\u200d]{0,199}|\$[\w$\u200c\u200d]{0,199}")
#: The most names an identifier query set holds.
MAX_IDENTIFIERS = 10_000


def _site(raw: Any, files: dict[str, bytes]) -> BoundarySite:
    if not isinstance(raw, dict):
        raise _Mismatch("a site is not a map")
    path, start, end, sha = raw.get("path"), raw.get("start"), raw.get("end"), raw.get("sha256")
    if not (isinstance(path, str) and isinstance(start, int) and isinstance(end, int)):
        raise _Mismatch("a site lacks its path or byte span")
    if not isinstance(sha, str) or not span_matches(files, path, start, end, sha):
        raise _Mismatch(f"{path}:{start}-{end}: span does not match the snapshot's bytes")
    line = files[path][:start].count(b"\n") + 1
    return BoundarySite.model_validate({**raw, "line": line})


def result_identity(fields: dict[str, Any]) -> str:
    """Digest of what a claim depends on: definitions, consumers and implementations by
    path, role and span content (not position, so moving code keeps it), completeness and
    truncation."""

    def sites(key: str) -> list[list[str]]:
        items = fields.get(key, ())
        return sorted([_get(s, "path"), _get(s, "role"), _get(s, "sha256")] for s in items)

    return digest_json(
        {
            "analyzer": ANALYZER_VERSION["typescript_boundary"],
            "definitions": sites("definitions"),
            "consumers": sites("consumers"),
            "implementations": sites("implementations"),
            "status": fields["status"],
            "complete": fields["complete"],
            "truncated": fields["truncated"],
        }
    )


def _get(site: Any, key: str) -> str:
    return str(site[key] if isinstance(site, dict) else getattr(site, key))
