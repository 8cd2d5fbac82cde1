"""``ProbeService``'s typed face: one method per row, typed from the row
(``service/methods.pyi``; docs/ARCHITECTURE.md, "The operation table")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probe_service.service import ProbeService, operations
from probe_service.service.rows import INDEX
from probe_service.service.stubs import STUB_PATH, method_signature, render


def _stub_methods() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(STUB_PATH.read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name != "invoke"}


def test_the_stub_is_current() -> None:
    """methods.pyi is exactly what the table generates (regenerate with
    ``python -m probe_service.service.stubs --write``)."""
    assert STUB_PATH.read_text(encoding="utf-8") == render()


def test_every_row_has_a_method_and_every_method_a_row() -> None:
    """The stub's methods are the table's operations, in the table's order."""
    assert list(_stub_methods()) == [op.name for op in operations()]


@pytest.mark.parametrize("op", list(operations()), ids=lambda op: op.name)
def test_each_method_takes_the_request_and_returns_the_response(op: Any) -> None:
    """A method's keyword parameters are its request's fields (required ones without a
    default) and its return annotation is its row's response type."""
    method = _stub_methods()[op.name]
    params, returns = method_signature(op)
    names = [a.arg for a in method.args.kwonlyargs]
    assert names == list(op.request.model_fields)
    required = [
        a.arg
        for a, d in zip(method.args.kwonlyargs, method.args.kw_defaults, strict=True)
        if d is None
    ]
    assert required == [n for n, f in op.request.model_fields.items() if f.is_required()]
    spelled = [_spelled(p.removesuffix(" = ...").partition(": ")[2]) for p in params]
    assert [ast.unparse(a.annotation) for a in method.args.kwonlyargs if a.annotation] == spelled
    assert method.returns is not None
    assert ast.unparse(method.returns) == _spelled(returns)


def _spelled(annotation: str) -> str:
    """``annotation`` as ``ast.unparse`` spells it (quotes and spacing normalized)."""
    return ast.unparse(ast.parse(annotation, mode="eval").body)


def test_every_method_exists_at_run_time() -> None:
    """Each row is a method of ``ProbeService`` without importing any row module."""
    code = (
        "import sys\n"
        "from probe_service.service import ProbeService\n"
        f"names = {list(INDEX)!r}\n"
        "assert all(callable(getattr(ProbeService, n)) for n in names)\n"
        "print(sorted(m for m in sys.modules if m.startswith('probe_service.service.rows.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_unknown_name_is_a_plain_attribute_error(tmp_path: Path) -> None:
    """A name that is no operation is an AttributeError, not an operation."""
    with ProbeService.open(tmp_path, lazy=True) as svc, pytest.raises(AttributeError):
        svc.no_such_operation  # type: ignore[attr-defined]  # noqa: B018


def test_a_row_module_that_fails_to_import_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row whose module does not import raises that import error when it is called,
    never a missing attribute (session.py swallowed it before)."""
    monkeypatch.setitem(INDEX, "capabilities", "no_such_rows_module")
    from probe_service.service import registry

    monkeypatch.delitem(registry._TABLE, "capabilities")
    with ProbeService.open(tmp_path, lazy=True) as svc, pytest.raises(ModuleNotFoundError):
        svc.capabilities()


@pytest.mark.slow
def test_mypy_checks_a_call_against_the_row(tmp_path: Path) -> None:
    """A call with a field of the wrong type or a field the request lacks is a mypy
    error; a right one is clean."""
    source = tmp_path / "caller.py"
    source.write_text(
        "from probe_service.service import ProbeService\n"
        "def ok(svc: ProbeService) -> str:\n"
        "    return svc.probe_get(plan_id='a' * 64).plan_id\n"
        "def wrong(svc: ProbeService) -> None:\n"
        "    svc.probe_get(plan_id=1)\n"
        "    svc.probe_get(plan_id='a', no_such_field=True)\n"
        "    svc.probe_run(plan_id='a', policy_id='p').no_such_attribute\n",
        encoding="utf-8",
    )
    from mypy import api

    out, _, code = api.run(
        [str(source), "--strict", "--follow-imports=silent", "--no-incremental",
         "--cache-dir", str(tmp_path / "cache")]
    )  # fmt: skip
    assert code == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    # probe_run answers a result or, once its bounded wait expires, a status: mypy names the
    # missing attribute on each member of the union, so line 7 may be reported twice.
    assert sorted({line.split(":")[1] for line in errors}) == ["5", "6", "7"], out
