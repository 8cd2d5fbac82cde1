"""Fixture repositories of ours (tests/fixtures/typescript/) captured into a real store, and
their boundaries from the real worker in the real sandbox, computed once per module."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from probe_service.claims import LocalCaller, TreeView
from probe_service.sandbox import SandboxRuntime
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store, open_store
from probe_service.typescript.analyzer import TYPESCRIPT_BOUNDARY
from probe_service.typescript.boundary import typescript_boundary
from probe_service.typescript.models import BoundaryResult
from tests.conftest import make_searchable

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "typescript"

Boundary = Callable[..., BoundaryResult]

#: A caller whose snapshot views run the TypeScript analyzer, as every session's do.
TS_CALLER = LocalCaller(boundary=TYPESCRIPT_BOUNDARY)


def ts_view(files: dict[str, bytes], snapshot_id: str = "") -> TreeView:
    """An in-memory view that runs TypeScript boundary queries, as a session's views do."""
    return TreeView.from_files(files, snapshot_id, boundary=TYPESCRIPT_BOUNDARY)


@pytest.fixture(scope="module")
def module_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """An embedded store shared by one module's tests."""
    state = tmp_path_factory.mktemp("state")
    store = open_store(state)
    yield store
    store.close()


def capture_fixture(store: Store, name: str, workdir: Path) -> str:
    """Copy fixture repository ``name`` to ``workdir`` and capture it; return the snapshot id."""
    target = workdir / name
    shutil.copytree(FIXTURES / name, target)
    make_searchable(target)
    return snapshot_capture(store, target).snapshot_id


@pytest.fixture(scope="module")
def boundary_of(
    module_store: Store, runtime: SandboxRuntime, tmp_path_factory: pytest.TempPathFactory
) -> Boundary:
    """``boundary_of(fixture, symbol, file=None)``: the boundary, computed once per arguments."""
    workdir = tmp_path_factory.mktemp("repos")
    snapshots: dict[str, str] = {}
    results: dict[tuple[str, str, str | None], BoundaryResult] = {}

    def compute(name: str, symbol: str, file: str | None = None) -> BoundaryResult:
        key = (name, symbol, file)
        if key not in results:
            if name not in snapshots:
                snapshots[name] = capture_fixture(module_store, name, workdir)
            results[key] = typescript_boundary(
                module_store, snapshots[name], symbol, file, runtime=runtime
            )
        return results[key]

    return compute
