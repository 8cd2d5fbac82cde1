"""`byte-probe ts boundary` and the worker's live output budget, through the real sandbox."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from probe_service.cli import main
from probe_service.sandbox import SandboxRuntime
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store, open_store
from probe_service.typescript.boundary import typescript_boundary
from probe_service.typescript.profile import MAX_OUTPUT_BYTES
from tests.fuzz.strategies import row_counts

from .conftest import FIXTURES


def _capture_cli(capsys: pytest.CaptureFixture[str], repo: Path) -> str:
    assert main(["snapshot", "capture", str(repo), "--root", str(repo), "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["snapshot_id"])


def test_cli_boundary_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, runtime: SandboxRuntime
) -> None:
    """`ts boundary --json` prints the snapshot's boundary and exits 0 for a complete one; a
    consumer written into the working tree after the capture is not seen (the worker reads
    the snapshot's materialization, never the working tree)."""
    del runtime  # marks the test `sandbox`; the CLI locates the runtime itself
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "new_consumer", repo)
    snapshot = _capture_cli(capsys, repo)
    (repo / "src" / "late.ts").write_text('import { chargeCard } from "./payments";\n')
    args = ["ts", "boundary", "--snapshot", snapshot[:12], "--symbol", "chargeCard"]
    code = main([*args, "--file", "src/payments.ts", "--root", str(repo), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["status"] == "complete"
    assert [c["path"] for c in out["consumers"]] == ["src/checkout.ts", "src/checkout.ts"]


def test_cli_refuses_a_bad_symbol_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A symbol that is not an identifier is an input error: one stderr line, exit 3."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.ts").write_text("export {}\n")
    snapshot = _capture_cli(capsys, repo)
    code = main(["ts", "boundary", "--snapshot", snapshot, "--symbol", "a b;", "--root", str(repo)])
    _, err = capsys.readouterr()
    assert code == 3
    assert err == "byte-probe: error: symbol: 'a b;' is not a TypeScript identifier\n"


def test_cli_unknown_symbol_is_not_found_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, runtime: SandboxRuntime
) -> None:
    """A symbol declared nowhere: `not_found` in one stderr line naming the files searched,
    exit 3, and not one row written anywhere in the store."""
    del runtime  # marks the test `sandbox`; the CLI locates the runtime itself
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "new_consumer", repo)
    snapshot = _capture_cli(capsys, repo)
    store = open_store(repo)
    try:
        before = row_counts(store)
        args = ["ts", "boundary", "--snapshot", snapshot, "--symbol", "chargeCrad"]
        message = (
            "symbol: no declaration of 'chargeCrad' in the 2 TypeScript/JavaScript file(s) "
            "searched: src/checkout.ts, src/payments.ts"
        )
        code = main([*args, "--root", str(repo)])
        out, err = capsys.readouterr()
        assert (code, out, err) == (3, "", f"byte-probe: error: {message}\n")
        code = main([*args, "--root", str(repo), "--json"])
        out, err = capsys.readouterr()
        assert (code, json.loads(out)) == (3, {"error": "not_found", "message": message})
        assert row_counts(store) == before
    finally:
        store.close()


@pytest.mark.slow
def test_output_over_the_shared_budget_is_unavailable(
    sqlite_store: Store, tmp_path: Path, runtime: SandboxRuntime
) -> None:
    """A repository whose answer would pass the 4 MiB stdout+stderr budget gets an
    unavailable boundary (output_budget), never a cut-off answer read as complete."""
    name = "x" * 200
    repo = tmp_path / "noisy"
    (repo / "src").mkdir(parents=True)
    (repo / "tsconfig.json").write_text('{"include": ["src"]}\n')
    # 20,000 references that do not resolve: each is an explicit unknown in the answer.
    (repo / "src" / "noise.ts").write_text(f"{name};\n" * 20_000)
    snapshot = snapshot_capture(sqlite_store, repo).snapshot_id
    result = typescript_boundary(sqlite_store, snapshot, name, runtime=runtime)
    assert (result.status, result.reason, result.complete) == (
        "unavailable",
        "output_budget",
        False,
    )
    assert result.truncated
    assert result.unknowns == (
        f"output_budget: {MAX_OUTPUT_BYTES // (1024 * 1024)} MiB stdout+stderr budget crossed",
    )


@pytest.mark.slow
def test_heap_ceiling_is_unavailable(
    sqlite_store: Store, tmp_path: Path, runtime: SandboxRuntime
) -> None:
    """60 MiB of TypeScript (inside the input cap) exhausts the 384 MiB V8 heap: the answer
    is unavailable (heap_budget), never a partial boundary."""
    repo = tmp_path / "huge"
    (repo / "src").mkdir(parents=True)
    (repo / "tsconfig.json").write_text('{"include": ["src"]}\n')
    with (repo / "src" / "big.ts").open("w", encoding="utf-8") as handle:
        for i in range(1_500_000):
            handle.write(f"export const v{i} = [{i}, {i}];\n")
    snapshot = snapshot_capture(sqlite_store, repo).snapshot_id
    result = typescript_boundary(sqlite_store, snapshot, "v1", runtime=runtime)
    assert (result.status, result.reason, result.complete) == ("unavailable", "heap_budget", False)
