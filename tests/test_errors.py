"""The one error tree: every exception class of the package, its drawing and its table."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel, ValidationError, model_validator

import probe_service
from probe_service import errors

README = Path(__file__).resolve().parent.parent / "README.md"
#: A drawn line: the tree's indentation, a connector (none for the root), the class, its
#: code, and the module (relative to the package) when the class is defined elsewhere.
DRAWN = re.compile(
    r"^    (?P<rails>(?:│   |    )*)(?:[├└]── )?(?P<name>[A-Z]\w*) +(?P<code>[a-z_]+)"
    r"(?::[^(]*)?(?: \((?P<module>[\w/]+)\.py\))?\s*$"
)
ROW = re.compile(
    r"^\| `(?P<code>[a-z_]+)` \| `(?P<name>\w+)` \| (?P<exit>\d+) \| (?P<status>\d+) \| .+ \|$"
)


def _modules() -> list[ModuleType]:
    """Every module of the package, imported (``__main__`` would run the CLI)."""
    found = pkgutil.walk_packages(probe_service.__path__, f"{probe_service.__name__}.")
    names = [m.name for m in found if not m.name.endswith(".__main__")]
    return [probe_service, *(importlib.import_module(name) for name in names)]


def _defined_exceptions() -> list[type[BaseException]]:
    return [
        value
        for module in _modules()
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module.__name__
    ]


PUBLIC = [c for c in _defined_exceptions() if not c.__name__.startswith("_")]


@dataclass(frozen=True)
class Drawn:
    """One class as the docstring of ``probe_service.errors`` draws it."""

    name: str
    code: str
    parent: str | None
    module: str


def _drawing() -> dict[str, Drawn]:
    """Parse the tree in the errors module's docstring (after its ``::``)."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    drawn: dict[str, Drawn] = {}
    stack: list[str] = []
    for line in block.splitlines():
        match = DRAWN.match(line)
        assert match is not None, f"not a drawn class: {line!r}"
        depth = len(match["rails"]) // 4 + (1 if "──" in line else 0)
        assert depth <= len(stack), f"{match['name']} is drawn below no parent"
        del stack[depth:]
        module = (match["module"] or "errors").replace("/", ".")
        parent = stack[-1] if stack else None
        drawn[match["name"]] = Drawn(match["name"], match["code"], parent, module)
        stack.append(match["name"])
    return drawn


class TestEveryClass:
    def test_the_walk_finds_the_classes(self) -> None:
        """The walk sees classes of errors.py and of other parts (it is not vacuous)."""
        names = {c.__name__ for c in PUBLIC}
        assert {"ProbeServiceError", "ToolchainUnsafe", "BlobMissing", "Refused"} <= names

    @pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
    def test_a_public_exception_is_under_the_root(self, cls: type[BaseException]) -> None:
        """Every public exception class of the package is a ProbeServiceError."""
        assert issubclass(cls, errors.ProbeServiceError)

    @pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
    def test_each_class_says_what_every_face_shows(self, cls: type[BaseException]) -> None:
        """A class sets its own code; its exit code and HTTP status are real ones."""
        assert issubclass(cls, errors.ProbeServiceError)
        assert "code" in vars(cls), f"{cls.__name__} inherits its code"
        assert re.fullmatch(r"[a-z][a-z_]*", cls.code)
        assert 1 <= cls.exit_code <= 255
        assert cls.exit_code not in (1, 2)  # the verdicts of run, gate, submit --wait
        assert 400 <= cls.status <= 599

    def test_codes_are_unique(self) -> None:
        """No two classes share a code, so a code names one class on every face."""
        codes = [getattr(c, "code", None) for c in PUBLIC]
        assert len(set(codes)) == len(codes)


class TestDrawing:
    def test_the_drawing_holds_every_public_class(self) -> None:
        """The tree drawn in errors.py names exactly the public exception classes."""
        assert set(_drawing()) == {c.__name__ for c in PUBLIC}

    @pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
    def test_each_drawn_line_is_true(self, cls: type[BaseException]) -> None:
        """A class is drawn under its direct base, with its code and its module."""
        drawn = _drawing()[cls.__name__]
        base = None if cls is errors.ProbeServiceError else cls.__bases__[0].__name__
        assert (drawn.parent, drawn.code) == (base, getattr(cls, "code", None))
        assert f"probe_service.{drawn.module}" == cls.__module__

    def test_the_parser_refuses_a_stale_line(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A drawing that moves a class under another parent is seen as wrong."""
        doc = (errors.__doc__ or "").replace(
            "    │   │   └── BlobMissing", "    │   └── BlobMissing"
        )
        assert doc != errors.__doc__
        monkeypatch.setattr(errors, "__doc__", doc)
        assert _drawing()["BlobMissing"].parent != "NotFound"


class TestReadme:
    @staticmethod
    def _rows() -> dict[str, tuple[str, int, int]]:
        section = README.read_text(encoding="utf-8").split("## Errors and exit codes", 1)[1]
        section = section.split("\n## ", 1)[0]
        rows = {}
        for line in section.splitlines():
            match = ROW.match(line)
            if match:
                rows[match["name"]] = (match["code"], int(match["exit"]), int(match["status"]))
        return rows

    def test_the_table_lists_every_class(self) -> None:
        """The README's error table has one row per public exception class."""
        assert set(self._rows()) == {c.__name__ for c in PUBLIC}

    @pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
    def test_each_row_is_the_class(self, cls: type[BaseException]) -> None:
        """A row's code, exit code and HTTP status are the class's own."""
        assert issubclass(cls, errors.ProbeServiceError)
        assert self._rows()[cls.__name__] == (cls.code, cls.exit_code, cls.status)


class Teapot(errors.InvalidInput):
    """An error no face knows by name: a face can show it only from its attributes."""

    code = "teapot"
    exit_code = 42
    status = 418


class Raising:
    """A session whose every call raises ``error`` (the faces only call ``call``)."""

    interface = "host"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def call(self, name: str, params: object) -> object:
        raise self.error


class TestFacesReadTheClass:
    @pytest.mark.parametrize("as_json", [False, True])
    def test_cli_exit_code_and_frame_come_from_the_class(
        self, as_json: bool, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The CLI's one reporting place exits with the class's exit_code and its code."""
        from probe_service.cli.main import _reporting

        with _reporting(["--json"] if as_json else []) as code:
            raise Teapot("teapot: short and stout")
        out, err = capsys.readouterr()
        assert code == [42]
        assert err == "byte-probe: error: teapot: short and stout\n"
        expected = '{"error": "teapot", "message": "teapot: short and stout"}\n'
        assert out == (expected if as_json else "")

    @pytest.mark.parametrize(
        ("raised", "code", "exit_code"),
        [
            (OSError(2, "No such file or directory", "/x/plan.json"), "os_error", 3),
            (RuntimeError("boom"), "internal", 70),
        ],
    )
    def test_cli_translates_what_is_not_ours_into_the_tree(
        self,
        raised: Exception,
        code: str,
        exit_code: int,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """An OSError and a bug get their class's code and exit code, one line each."""
        from probe_service.cli.main import _reporting

        monkeypatch.delenv("BYTE_PROBE_DEBUG", raising=False)
        with _reporting(["--json"]) as cell:
            raise raised
        out, err = capsys.readouterr()
        assert cell == [exit_code]
        assert out.startswith(f'{{"error": "{code}", ')
        assert len(err.splitlines()) == 1

    def test_cli_still_raises_a_bug_for_debugging(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """BYTE_PROBE_DEBUG=1 lets a bug's trace through, never a refusal's."""
        from probe_service.cli.main import _reporting

        monkeypatch.setenv("BYTE_PROBE_DEBUG", "1")
        with pytest.raises(RuntimeError), _reporting([]):
            raise RuntimeError("boom")
        with _reporting([]) as cell:
            raise Teapot("refused")
        assert cell == [42]

    def test_host_frame_carries_the_class_code(self) -> None:
        """The NDJSON host answers an error frame with the class's code and message."""
        from probe_service.faces.frames import HostRequest
        from probe_service.faces.host import NdjsonHost

        host = NdjsonHost(Raising(Teapot("refused")), io.BytesIO())  # type: ignore[arg-type]
        frame = host.answer(HostRequest(7, "capabilities", {}))
        assert frame == {"id": 7, "ok": False, "error": {"code": "teapot", "message": "refused"}}

    def test_mcp_tool_error_carries_the_class_code(self) -> None:
        """The MCP server answers a tool error with the class's code and message."""
        from probe_service.faces.mcp_server import tool_result

        result = tool_result(Raising(Teapot("refused")), "byte_capabilities", {})  # type: ignore[arg-type]
        assert result.is_error
        assert result.structured_content == {"error": {"code": "teapot", "message": "refused"}}


class _Pair(BaseModel):
    low: int
    high: int

    @model_validator(mode="after")
    def _ordered(self) -> _Pair:
        if self.low > self.high:
            raise ValueError("low is above high")
        return self


class TestValidationMessage:
    def test_names_the_field(self) -> None:
        """A field's error reads ``field.path: message``."""
        with pytest.raises(ValidationError) as caught:
            _Pair.model_validate({"low": "x", "high": 1})
        assert errors.validation_message(caught.value, "pair") == (
            "low: Input should be a valid integer, unable to parse string as an integer"
        )

    def test_names_the_whole_and_drops_pydantic_prefix(self) -> None:
        """An error about the whole value names ``whole``; a validator's words stay bare."""
        with pytest.raises(ValidationError) as caught:
            _Pair.model_validate({"low": 2, "high": 1})
        assert errors.validation_message(caught.value, "pair") == "pair: low is above high"

    def test_claims_and_requests_word_it_alike(self) -> None:
        """A claim's and an operation's request refusal read ``what: field: message``
        (plans and policies: their own tests)."""
        from probe_service.claims.models import parse_request
        from probe_service.service import operations

        with pytest.raises(errors.InvalidClaim) as claim:
            parse_request(_Pair, {"low": 2, "high": 1}, "pair")
        probe_get = next(op for op in operations() if op.name == "probe_get")
        with pytest.raises(errors.InvalidInput) as request:
            probe_get.parse({"plan_id": 5})
        assert str(claim.value) == "pair: pair: low is above high"
        assert str(request.value) == "probe_get: plan_id: Input should be a valid string"
