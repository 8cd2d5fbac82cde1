"""What the boundary does not follow, it names: the alias bound, escapes, computed imports,
files that do not parse; and what it must not miss: escaped identifiers, files no project
covers. Each through the real worker in the real sandbox."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from probe_service.sandbox import SandboxRuntime
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store
from probe_service.typescript.boundary import typescript_boundary
from probe_service.typescript.models import BoundaryResult
from tests.conftest import make_searchable

from .corpus import BASE, overlay, write_project

# Each test runs the sandboxed compiler (2-3 s): out of the quick loop, in `make test`.
pytestmark = pytest.mark.slow

Project = Callable[[dict[str, str | None]], BoundaryResult]
IMPORT = 'import { chargeCard } from "./payments";\n'


@pytest.fixture(scope="module")
def project(
    module_store: Store, runtime: SandboxRuntime, tmp_path_factory: pytest.TempPathFactory
) -> Project:
    """``project(files)``: the boundary of chargeCard (src/payments.ts) in BASE + files."""
    work = tmp_path_factory.mktemp("limits")
    count = iter(range(1_000))

    def boundary(files: dict[str, str | None]) -> BoundaryResult:
        root = work / f"p{next(count)}"
        write_project(root, overlay(BASE, files))
        make_searchable(root)
        snapshot = snapshot_capture(module_store, root).snapshot_id
        return typescript_boundary(
            module_store, snapshot, "chargeCard", "src/payments.ts", runtime=runtime
        )

    return boundary


def _chain(length: int) -> dict[str, str | None]:
    """Re-exports r1 .. r{length}, each renaming the last, and a consumer of the last."""
    files: dict[str, str | None] = {"src/r1.ts": 'export { chargeCard as c1 } from "./payments";\n'}
    for i in range(2, length + 1):
        files[f"src/r{i}.ts"] = f'export {{ c{i - 1} as c{i} }} from "./r{i - 1}";\n'
    files["src/use.ts"] = f'import {{ c{length} }} from "./r{length}";\nc{length}(-1);\n'
    return files


class TestAliasBound:
    def test_eight_hops_are_followed(self, project: Project) -> None:
        """A consumer 8 alias hops from the declaration (7 renaming re-exports and its own
        import) is listed, and the boundary is complete."""
        result = project(_chain(7))
        assert result.status == "complete", result.unknowns
        assert ("src/use.ts", "call") in {(s.path, s.role) for s in result.consumers}

    def test_past_eight_hops_is_incomplete_and_says_where(self, project: Project) -> None:
        """One hop more: not listed, and the boundary is incomplete naming the place."""
        result = project(_chain(8))
        assert result.status == "incomplete"
        assert "src/use.ts" not in {s.path for s in result.consumers}
        assert (
            "src/use.ts:1: c8 reaches chargeCard through more than 8 alias hops; "
            "it and what uses it are not followed" in result.unknowns
        )


class TestEscapes:
    @pytest.mark.parametrize(
        ("code", "unknown"),
        [
            (
                "export const all = [1, 2].map(chargeCard);\n",
                "src/use.ts:2: chargeCard escapes (passed as an argument)",
            ),
            (
                "export function pick() {\n  return chargeCard;\n}\n",
                "src/use.ts:3: chargeCard escapes (returned)",
            ),
            (
                "declare const registry: any;\nregistry.handler = chargeCard;\n",
                "src/use.ts:3: chargeCard escapes (assigned to something the checker cannot name)",
            ),
        ],
    )
    def test_a_value_that_escapes_makes_it_incomplete(
        self, project: Project, code: str, unknown: str
    ) -> None:
        """Passed on, returned, stored where the checker cannot follow: incomplete, naming
        the place (never a complete boundary missing what the value reaches)."""
        result = project({"src/use.ts": IMPORT + code})
        assert result.status == "incomplete"
        assert any(u.startswith(unknown) for u in result.unknowns), result.unknowns

    def test_a_namespace_that_escapes_makes_it_incomplete(self, project: Project) -> None:
        """The module object holding chargeCard, passed to a function: incomplete."""
        code = 'import * as billing from "./payments";\n\ndeclare function keep(x: object): void;\n'
        result = project({"src/use.ts": code + "keep(billing);\n"})
        assert result.status == "incomplete"
        escaped = "src/use.ts:4: billing (holding chargeCard) escapes"
        assert any(u.startswith(escaped) for u in result.unknowns), result.unknowns

    def test_a_computed_import_makes_it_incomplete(self, project: Project) -> None:
        """`import(name)` may load the symbol's module: an unknown, naming the place."""
        code = "export const load = (name: string) => import(name);\n"
        result = project({"src/loader.ts": code})
        assert result.status == "incomplete"
        assert (
            "src/loader.ts:1: a module is loaded by a computed specifier; not followed"
            in result.unknowns
        )


class TestWhatItMustSee:
    def test_an_escaped_identifier_is_a_consumer(self, project: Project) -> None:
        """`\\u0063hargeCard` is chargeCard to the compiler: a file that never spells the
        name is still scanned, and its call is listed."""
        code = 'import { \\u0063hargeCard as pay } from "./payments";\n\npay(-1);\n'
        result = project({"src/escaped.ts": code})
        assert result.status == "complete", result.unknowns
        assert ("src/escaped.ts", "call") in {(s.path, s.role) for s in result.consumers}

    def test_a_file_with_syntax_errors_makes_it_incomplete(self, project: Project) -> None:
        """A corpus file that does not parse: incomplete, naming it."""
        result = project({"src/broken.ts": IMPORT + "export const r = chargeCard(-1;\n"})
        assert result.status == "incomplete"
        assert "src/broken.ts: does not parse (line 2: ')' expected.)" in result.unknowns

    def test_a_loose_file_that_does_not_parse_is_named(self, project: Project) -> None:
        """A file outside every project that does not parse: incomplete, naming it."""
        code = 'import { chargeCard } from "../src/payments";\nchargeCard(;\n'
        result = project({"scripts/batch.ts": code})
        assert result.status == "incomplete"
        assert any(u.startswith("scripts/batch.ts: does not parse") for u in result.unknowns)

    def test_loose_files_are_analyzed_in_an_inferred_project(self, project: Project) -> None:
        """A `.ts` outside `include` and a `.js` with `allowJs` off are read by an inferred
        project, listed among the projects, and their consumers are listed."""
        result = project(
            {
                "scripts/batch.ts": 'import { chargeCard } from "../src/payments";\n'
                "chargeCard(1);\n",
                "src/legacy.js": IMPORT + "chargeCard(2);\n",
            }
        )
        assert result.status == "complete", result.unknowns
        assert [(p.config, p.files) for p in result.projects] == [
            ("tsconfig.json", 2),
            (None, 3),
        ]
        paths = {s.path for s in result.consumers if s.role == "call"}
        assert {"scripts/batch.ts", "src/legacy.js"} <= paths


def test_write_project_leaves_only_the_files_given(tmp_path: Path) -> None:
    """write_project leaves exactly the files it is given (the corpus relies on it)."""
    write_project(tmp_path, {"a.ts": "1", "b/c.ts": "2"})
    write_project(tmp_path, {"a.ts": "3"})
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.ts")) == ["a.ts"]
