"""The boundary semantics on fixture repositories, through the real worker in the sandbox."""

from __future__ import annotations

import hashlib

import pytest

from probe_service.errors import NotFound
from probe_service.typescript.models import BoundaryResult

from .conftest import FIXTURES, Boundary

# Each test runs the sandboxed compiler (2-3 s): out of the quick loop, in `make test`.
pytestmark = pytest.mark.slow

CORE = "packages/core/src/payments.ts"


def _sites(result: BoundaryResult) -> list[tuple[str, str]]:
    return sorted((s.path, s.role) for s in result.consumers)


class TestAliasesAcrossProjects:
    def test_alias_consumer_in_another_project_has_the_definitions_identity(
        self, boundary_of: Boundary
    ) -> None:
        """A consumer importing through a `paths` alias of another tsconfig project is the
        same symbol as the definition: one identity across both projects."""
        result = boundary_of("aliases", "chargeCard", CORE)
        assert result.status == "complete", result.unknowns
        assert [p.config for p in result.projects] == [
            "packages/core/tsconfig.json",
            "packages/web/tsconfig.json",
        ]
        assert [(d.path, d.line) for d in result.definitions] == [(CORE, 2)]
        assert _sites(result) == [
            (CORE, "call"),
            ("packages/web/src/checkout.ts", "call"),
            ("packages/web/src/checkout.ts", "import"),
        ]
        assert {s.identity for s in (*result.definitions, *result.consumers)} == {
            result.definitions[0].identity
        }

    def test_same_name_in_another_file_is_another_symbol(self, boundary_of: Boundary) -> None:
        """A local function sharing the name is not a consumer of the requested declaration,
        and without --file it is reported under its own identity."""
        scoped = boundary_of("aliases", "chargeCard", CORE)
        assert "packages/web/src/local.ts" not in {s.path for s in scoped.consumers}
        everything = boundary_of("aliases", "chargeCard")
        assert len({d.identity for d in everything.definitions}) == 2
        local = [s for s in everything.consumers if s.path == "packages/web/src/local.ts"]
        assert [s.role for s in local] == ["call"]

    def test_spans_hash_the_snapshot_bytes(self, boundary_of: Boundary) -> None:
        """Every span is a byte range of the fixture file, and its SHA-256 is of those bytes."""
        result = boundary_of("aliases", "chargeCard", CORE)
        for site in (*result.definitions, *result.consumers):
            data = (FIXTURES / "aliases" / site.path).read_bytes()
            assert hashlib.sha256(data[site.start : site.end]).hexdigest() == site.sha256
            assert data[site.start : site.end].startswith(b"chargeCard")

    def test_repository_declaration_files_are_inputs(self, boundary_of: Boundary) -> None:
        """A repository-owned .d.ts is part of its project, and declared symbols resolve."""
        result = boundary_of("aliases", "BUILD_ID")
        assert result.status == "complete", result.unknowns
        assert [d.path for d in result.definitions] == ["packages/web/types/globals.d.ts"]


class TestFailClosed:
    def test_invalid_tsconfig_with_sources_is_applicable_and_incomplete(
        self, boundary_of: Boundary
    ) -> None:
        """A tsconfig that does not parse leaves the TypeScript beside it applicable, but the
        boundary incomplete, naming the configuration."""
        result = boundary_of("invalid_tsconfig", "chargeCard")
        assert (result.status, result.applicable, result.complete) == ("incomplete", True, False)
        assert not result.discovery_complete
        assert any("invalid configuration tsconfig.json" in u for u in result.unknowns)
        assert [d.path for d in result.definitions] == ["src/payments.ts"]

    def test_missing_internal_module_fails_closed(self, boundary_of: Boundary) -> None:
        """An import of a repository module that does not exist, and a configured `types`
        entry that resolves to nothing, each make the boundary incomplete."""
        result = boundary_of("missing_module", "chargeCard")
        assert result.status == "incomplete"
        assert "missing internal module src/checkout.ts: ./billing" in result.unknowns
        assert (
            "missing configured type: Cannot find type definition file for "
            "'byte-probe-missing-types'." in result.unknowns
        )

    def test_escaping_config_read_is_refused_and_incomplete(self, boundary_of: Boundary) -> None:
        """A tsconfig `extends` and an `include` reaching outside the materialization are
        neither read nor listed: each attempt is named and the boundary is incomplete."""
        result = boundary_of("escaping_config", "chargeCard")
        assert result.status == "incomplete"
        assert result.outside_reads == ("/etc", "/etc/byte-probe-outside.json")
        assert not result.discovery_complete

    def test_escaping_references_imports_and_aliases_are_refused(
        self, boundary_of: Boundary
    ) -> None:
        """Triple-slash references (absolute and climbing), an absolute import and a
        `paths` alias to /etc are never read: each is an outside read, the boundary is
        incomplete."""
        result = boundary_of("escaping_references", "chargeCard")
        assert result.status == "incomplete"
        assert not result.discovery_complete
        # The absolute import is refused at its directory (``/etc``) before any file in it.
        assert result.outside_reads == (
            "/etc",
            "/etc/byte-probe-alias",
            "/etc/byte-probe-climb.d.ts",
            "/etc/byte-probe-ref.d.ts",
        )


class TestThirdPartyPackages:
    def test_unrelated_unavailable_package_is_reported_not_a_gap(
        self, boundary_of: Boundary
    ) -> None:
        """A third-party package missing from an unrelated file is listed, and the
        repository-owned boundary of chargeCard stays complete."""
        result = boundary_of("unrelated_package", "chargeCard")
        assert result.status == "complete", result.unknowns
        assert result.unavailable_packages == ("dayjs",)
        assert _sites(result) == [("src/checkout.ts", "call"), ("src/checkout.ts", "import")]

    def test_unresolved_dependency_of_the_symbol_fails_closed(self, boundary_of: Boundary) -> None:
        """The same package in the declaration's own import closure makes it incomplete."""
        result = boundary_of("unrelated_package", "formatReceiptDate")
        assert result.status == "incomplete"
        assert any("dayjs" in u for u in result.unknowns)


class TestApplicability:
    def test_no_typescript_at_all_is_inapplicable(self, boundary_of: Boundary) -> None:
        """A complete discovery with no TS/JS source or configuration is language-inapplicable,
        and complete (nothing can consume the symbol)."""
        result = boundary_of("no_typescript", "chargeCard")
        assert (result.status, result.applicable, result.discovery_complete) == (
            "inapplicable",
            False,
            True,
        )
        assert result.complete
        assert not result.consumers

    def test_requested_declaration_missing_is_not_found(self, boundary_of: Boundary) -> None:
        """A symbol with no declaration in a TypeScript repository is `not_found`, naming
        the files searched; never an empty complete boundary."""
        with pytest.raises(NotFound) as caught:
            boundary_of("new_consumer", "noSuchFunction")
        assert caught.value.code == "not_found"
        assert str(caught.value) == (
            "symbol: no declaration of 'noSuchFunction' in the 2 TypeScript/JavaScript "
            "file(s) searched: src/checkout.ts, src/payments.ts"
        )

    def test_declaration_in_another_file_is_not_found(self, boundary_of: Boundary) -> None:
        """A symbol declared, but not in the requested file, is not_found for that file."""
        with pytest.raises(NotFound, match=r"no declaration of 'chargeCard' in src/checkout\.ts"):
            boundary_of("new_consumer", "chargeCard", "src/checkout.ts")
