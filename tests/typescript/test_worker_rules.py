"""The worker's install, profile, budgets and answer checks, each tried against an attack.

None of these launches the worker: each rule refuses before it would run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probe_service.claims.digests import digest_bytes
from probe_service.claims.queries import ANALYZER_VERSION, typescript_domain
from probe_service.claims.views import BlobMissing, MemoryEntry, TreeView
from probe_service.errors import PolicyError, SandboxUnavailable
from probe_service.plans.models import parse_plan
from probe_service.plans.persist import save_plan
from probe_service.plans.run import probe_run
from probe_service.policies import POLICY_FILE_ENV
from probe_service.policies.loader import find_policy, load_policy_file
from probe_service.policies.model import PolicyFile
from probe_service.service import ProbeService
from probe_service.service.registry import Face
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store
from probe_service.typescript import boundary as boundary_module
from probe_service.typescript.boundary import boundary_for_tree, result_identity
from probe_service.typescript.install import (
    PINNED_TYPESCRIPT,
    default_worker_dir,
    locate_worker,
)
from probe_service.typescript.profile import (
    BOUNDARY_PROFILE,
    HEAP_MIB,
    MAX_INPUT_BYTES,
    MAX_INPUT_FILES,
    MAX_OUTPUT_BYTES,
)
from probe_service.typescript.worker import ADAPTER_VERSION, WorkerAnswer, check_input_budget
from tests.plans.conftest import TEST_POLICY, plan_doc

WORKER_SOURCE = default_worker_dir() / "boundary.cjs"


class TestInstall:
    def test_pinned_versions_agree(self) -> None:
        """The analyzer version names the worker's adapter and the pinned compiler, and the
        lock file pins exactly that compiler."""
        assert ANALYZER_VERSION["typescript_boundary"].endswith(f"typescript/{PINNED_TYPESCRIPT}")
        assert f'const ADAPTER = "{ADAPTER_VERSION}"' in WORKER_SOURCE.read_text()
        lock = json.loads((default_worker_dir() / "package-lock.json").read_text())
        assert lock["packages"]["node_modules/typescript"]["version"] == PINNED_TYPESCRIPT
        manifest = json.loads((default_worker_dir() / "package.json").read_text())
        assert manifest["dependencies"] == {"typescript": PINNED_TYPESCRIPT}

    def test_checked_in_install_verifies(self) -> None:
        """`npm ci` reproduces the recorded digest of worker + compiler."""
        assert locate_worker().digest == (default_worker_dir() / "worker.sha256").read_text()[:64]

    @pytest.mark.parametrize("target", ["boundary.cjs", "node_modules/typescript/lib/lib.es5.d.ts"])
    def test_tampered_install_is_refused(self, tmp_path: Path, target: str) -> None:
        """One changed byte in the worker or in the compiler's lib files: sandbox_unverified."""
        copy = tmp_path / "tsboundary"
        shutil.copytree(default_worker_dir(), copy, symlinks=True)
        with (copy / target).open("a", encoding="utf-8") as handle:
            handle.write("\n// changed\n")
        with pytest.raises(SandboxUnavailable, match=r"differs from worker\.sha256") as caught:
            locate_worker(copy)
        assert caught.value.reason == "sandbox_unverified"


class TestBuiltInProfile:
    def test_profile_carries_the_specified_limits(self) -> None:
        """No network, no environment, 4 MiB output, node only; V8 heap and caps as specified."""
        assert BOUNDARY_PROFILE.allowed_domains == ()
        assert BOUNDARY_PROFILE.environment == ()
        assert BOUNDARY_PROFILE.allowed_executables == ("node",)
        assert BOUNDARY_PROFILE.max_output_bytes == MAX_OUTPUT_BYTES == 4 * 1024 * 1024
        assert (HEAP_MIB, MAX_INPUT_FILES, MAX_INPUT_BYTES) == (384, 10_000, 64 * 1024 * 1024)

    def test_policy_file_cannot_define_it(self) -> None:
        """A policy file naming the built-in id (or any builtin.* id) is refused."""
        document = {"schema": 1, "policies": [{**TEST_POLICY, "id": BOUNDARY_PROFILE.id}]}
        with pytest.raises(ValueError, match="is reserved"):
            PolicyFile.model_validate(document)

    def test_policy_file_on_disk_cannot_define_it(self, tmp_path: Path) -> None:
        """The loader refuses such a file with a PolicyError naming the id."""
        path = tmp_path / "policies.json"
        document = {"schema": 1, "policies": [{**TEST_POLICY, "id": "builtin.anything"}]}
        path.write_text(json.dumps(document))
        path.chmod(0o600)
        with pytest.raises(PolicyError, match=r"builtin\.anything"):
            load_policy_file(path)

    def test_find_policy_never_returns_it(self) -> None:
        """Looking the profile up by id, as every interface does, is refused."""
        policies = PolicyFile.model_validate({"schema": 1, "policies": [TEST_POLICY]})
        with pytest.raises(PolicyError, match="built-in profiles cannot be selected"):
            find_policy(policies, BOUNDARY_PROFILE.id)

    def test_plan_cannot_select_it(self, sqlite_store: Store, repo: Path) -> None:
        """A stored plan naming the profile's id is refused at run time, before any launch."""
        (repo / "a.txt").write_text("a")
        snapshot_id = snapshot_capture(sqlite_store, repo).snapshot_id
        plan = parse_plan(plan_doc(snapshot_id=snapshot_id, policy_id=BOUNDARY_PROFILE.id))
        plan_id, _ = save_plan(sqlite_store, plan)
        policies = PolicyFile.model_validate({"schema": 1, "policies": [TEST_POLICY]})
        with pytest.raises(PolicyError, match="built-in profiles cannot be selected"):
            probe_run(sqlite_store, plan_id, BOUNDARY_PROFILE.id, policy_file=policies, environ={})

    @pytest.mark.parametrize("face", ["python", "cli", "host", "mcp"])
    def test_no_face_can_select_it(
        self,
        sqlite_store: Store,
        repo: Path,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        face: Face,
    ) -> None:
        """`probe_run` through the operation table, on every face, refuses the profile's id
        with the same error code (nothing is launched)."""
        policy_path = tmp_path / "policies.json"
        policy_path.write_text(json.dumps({"schema": 1, "policies": [TEST_POLICY]}))
        policy_path.chmod(0o600)
        monkeypatch.setenv(POLICY_FILE_ENV, str(policy_path))
        monkeypatch.delenv("PROBE_REDIS_URL", raising=False)
        (repo / "a.txt").write_text("a")
        snapshot_id = snapshot_capture(sqlite_store, repo).snapshot_id
        plan = parse_plan(plan_doc(snapshot_id=snapshot_id, policy_id=BOUNDARY_PROFILE.id))
        plan_id, _ = save_plan(sqlite_store, plan)
        svc = ProbeService(sqlite_store, interface=face)
        with pytest.raises(PolicyError, match="built-in profiles cannot be selected"):
            svc.call("probe_run", {"plan_id": plan_id, "policy_id": BOUNDARY_PROFILE.id})


class TestInputBudget:
    def test_over_10000_files_is_unavailable_before_launch(self) -> None:
        """10,001 TypeScript inputs: unavailable (input_budget), the worker never starts."""
        files = {f"src/f{i}.ts": b"export {}\n" for i in range(MAX_INPUT_FILES + 1)}
        result = boundary_for_tree(TreeView.from_files(files), ("chargeCard", None, 10))
        assert (result.status, result.reason, result.complete) == (
            "unavailable",
            "input_budget",
            False,
        )
        assert result.truncated
        assert "10001 TypeScript input files exceed the 10000-file cap" in result.unknowns[0]

    def test_over_64_mib_is_unavailable_before_any_read(self) -> None:
        """64 MiB + 1 byte of inputs: unavailable without reading one blob."""
        big = MemoryEntry("src/big.ts", "file", "0" * 64, MAX_INPUT_BYTES + 1)

        def never(digest: str) -> bytes:
            raise BlobMissing(digest)

        tree = TreeView("s" * 64, {big.path: big}, never)
        result = boundary_for_tree(tree, ("chargeCard", None, 10))
        assert (result.status, result.reason) == ("unavailable", "input_budget")

    def test_extra_files_count_against_the_caps(self) -> None:
        """Files outside the domain handed to the worker count like its inputs."""
        files = {f"src/f{i}.ts": b"x" for i in range(MAX_INPUT_FILES)}
        tree = TreeView.from_files({**files, "scripts/extra.ts": b"x"})
        domain = typescript_domain("src/**", tree)
        assert check_input_budget(domain) is None
        over = check_input_budget(domain, [tree.entries["scripts/extra.ts"]])
        assert over == f"{MAX_INPUT_FILES + 1} TypeScript input files exceed the 10000-file cap"

    def test_exactly_at_the_caps_is_not_refused(self) -> None:
        """The caps are inclusive: 10,000 files are not over budget."""
        files = {f"src/f{i}.ts": b"x" for i in range(MAX_INPUT_FILES)}
        assert check_input_budget(typescript_domain("**", TreeView.from_files(files))) is None


def _answer(data: dict[str, Any], files: dict[str, bytes]) -> WorkerAnswer:
    return WorkerAnswer(data=data, files=files, worker_digest="d" * 64)


def _ok(**changes: Any) -> dict[str, Any]:
    text = b"export function chargeCard() {}\nchargeCard();\n"
    start = text.rindex(b"chargeCard()")
    site = {
        "path": "a.ts",
        "start": start,
        "end": start + 12,
        "sha256": digest_bytes(text[start : start + 12]),
        "identity": "i" * 64,
        "role": "call",
    }
    data = {
        "adapter": ADAPTER_VERSION,
        "typescript_version": PINNED_TYPESCRIPT,
        "symbol": "chargeCard",
        "file": None,
        "status": "ok",
        "applicable": True,
        "discovery_complete": True,
        "complete": True,
        "truncated": False,
        "consumers": [site],
        "definitions": [],
        "identifiers": ["chargeCard"],
    }
    return {**data, **changes, "_text": text}


class TestWorkerAnswerIsData:
    """The worker's stdout is checked against the request and the snapshot's bytes (a hostile
    worker cannot be launched here without editing the verified install, so its answers are
    built by hand)."""

    def _result(self, data: dict[str, Any]) -> Any:
        text = data.pop("_text")
        base = {"snapshot_id": "s", "symbol": "chargeCard", "file": None, "input_fingerprint": "f"}
        base |= {"adapter_version": ADAPTER_VERSION, "typescript_version": PINNED_TYPESCRIPT}
        answer = _answer(data, {"a.ts": text})
        try:
            return boundary_module._from_answer(base, answer, ("chargeCard", None, 10))
        except boundary_module._Mismatch as exc:
            return str(exc)

    def test_honest_answer_is_accepted(self) -> None:
        """A matching answer becomes a complete boundary with the consumer's line."""
        result = self._result(_ok())
        assert result.status == "complete"
        assert result.consumers[0].line == 2

    @pytest.mark.parametrize(
        "changes",
        [
            {"symbol": "otherName"},
            {"file": "b.ts"},
            {"adapter": "typescript-boundary/0"},
            {"typescript_version": "7.0.0"},
        ],
    )
    def test_answer_for_another_request_is_refused(self, changes: dict[str, Any]) -> None:
        """An answer naming another symbol, file, adapter or compiler is a mismatch."""
        assert isinstance(self._result(_ok(**changes)), str)

    def test_forged_span_is_refused(self) -> None:
        """A span whose SHA-256 is not that of the snapshot's bytes is a mismatch."""
        forged = _ok()
        forged["consumers"] = [{**forged["consumers"][0], "sha256": "0" * 64}]
        assert "does not match the snapshot's bytes" in self._result(forged)

    @pytest.mark.parametrize(
        "identifiers",
        [None, [], ["pay"], ["chargeCard", "a b"], ["chargeCard", 5], ["chargeCard", "x" * 300]],
    )
    def test_identifier_set_must_name_identifiers_with_the_symbol(self, identifiers: Any) -> None:
        """The alias names feed a host-side scan: missing, lacking the symbol, or holding
        anything but identifiers, the answer is refused."""
        result = self._result(_ok(identifiers=identifiers))
        assert isinstance(result, str)
        assert "identifier" in result

    def test_no_declaration_is_not_found_only_when_nothing_else_is_unknown(self) -> None:
        """No definition and nothing else unknown: reason not_found (the operation raises);
        with another unknown beside it, an incomplete boundary naming both."""
        missing = "no declaration of chargeCard was found"
        alone = self._result(_ok(definitions=[], complete=False, unknowns=[missing]))
        assert (alone.status, alone.reason) == ("incomplete", "not_found")
        broken = "src/a.ts: does not parse (line 1: ';' expected.)"
        both = self._result(_ok(definitions=[], complete=False, unknowns=[missing, broken]))
        assert (both.status, both.reason) == ("incomplete", None)
        assert both.unknowns == (missing, broken)

    def test_implementations_are_listed_and_counted(self) -> None:
        """An implementation site is listed apart, and it is part of the result identity."""
        honest = self._result(_ok())
        data = _ok()
        data["implementations"] = [{**data["consumers"][0], "role": "implementation"}]
        with_one = self._result(data)
        assert [s.role for s in with_one.implementations] == ["implementation"]
        assert with_one.result_fingerprint != honest.result_fingerprint

    def test_span_outside_the_file_is_refused(self) -> None:
        """A span past the end of the file, or in a file not materialized, is a mismatch."""
        past = _ok()
        past["consumers"] = [{**past["consumers"][0], "end": 10_000}]
        assert "does not match" in self._result(past)
        elsewhere = _ok()
        elsewhere["consumers"] = [{**elsewhere["consumers"][0], "path": "../etc/passwd"}]
        assert "does not match" in self._result(elsewhere)


_SITE = st.fixed_dictionaries(
    {
        "path": st.sampled_from(["a.ts", "b.ts", "src/c.tsx"]),
        "role": st.sampled_from(["import", "call", "reference"]),
        "sha256": st.sampled_from(["1" * 64, "2" * 64]),
        "start": st.integers(0, 10_000),
    }
)


def _fields(consumers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"definitions": [], "consumers": consumers, "status": "complete"} | {
        "complete": True,
        "truncated": False,
    }


class TestResultIdentity:
    @given(st.lists(_SITE, max_size=8), st.randoms())
    def test_order_and_offsets_do_not_count(self, sites: list[dict[str, Any]], rnd: Any) -> None:
        """Reordering consumers or moving them within their files keeps the identity."""
        moved = [{**s, "start": s["start"] + 7} for s in sites]
        rnd.shuffle(moved)
        assert result_identity(_fields(sites)) == result_identity(_fields(moved))

    @given(st.lists(_SITE, max_size=8), _SITE)
    def test_an_added_consumer_changes_it(
        self, sites: list[dict[str, Any]], extra: dict[str, Any]
    ) -> None:
        """One more consumer (anywhere) is another identity."""
        assert result_identity(_fields(sites)) != result_identity(_fields([*sites, extra]))

    @given(st.lists(_SITE, max_size=8))
    def test_completeness_counts(self, sites: list[dict[str, Any]]) -> None:
        """The same sites, incomplete or truncated, are another identity."""
        complete = result_identity(_fields(sites))
        assert complete != result_identity({**_fields(sites), "complete": False})
        assert complete != result_identity({**_fields(sites), "truncated": True})
