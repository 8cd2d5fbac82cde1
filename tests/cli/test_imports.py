"""The CLI is an adapter over the operation table: no CLI module reaches into another part.

Parsed from the source (every ``import`` and ``from … import``, top level or inside a
function), so a lazy import cannot slip past the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import probe_service.cli
from probe_service import errors

CLI_DIR = Path(probe_service.cli.__file__).parent

#: What every CLI module may import from this package: the service, the error tree, the
#: text guard, and the settings (the one reader of the environment, which a command reads
#: at start: docs/ARCHITECTURE.md, "Settings").
ALLOWED = (
    "probe_service.service",
    "probe_service.errors",
    "probe_service.safe_text",
    "probe_service.settings",
)

#: The exceptions, each with its reason (docs/ARCHITECTURE.md, "The operation table").
EXCEPTIONS: dict[str, dict[str, str]] = {
    "faces.py": {
        # `host` and `mcp` start the long-lived faces: adapters over the table like the CLI.
        "probe_service.faces": "the NDJSON host and the MCP server",
        "probe_service.faces.host": "the NDJSON host and its stdio guard",
        # `serve` starts the local service; `mcp` is its client when the socket is set.
        "probe_service.faces.serve": "the local service on its unix socket",
        "probe_service.faces.serve_client": "the MCP server as the local service's client",
    },
    "common.py": {
        # With PROBE_SERVE_SOCKET a command's operations run in the local service.
        "probe_service.faces.serve_client": "the local service's client for the CLI",
    },
    "hook.py": {
        # `hook claude-code` answers Claude Code's hook protocol: an adapter over the table.
        "probe_service.faces.claude_code": "the Claude Code hook face",
        # `hook git` and `hook install git`: the git hooks' face, the same kind of adapter.
        "probe_service.faces.git_hooks": "the git hooks face",
    },
    "web.py": {
        # `web` starts the read-only web view: an adapter over the table like the CLI.
        "probe_service.web": "public __init__ API: the token rule and the server",
    },
    "demo.py": {
        "probe_service.demo": "the package's walkthrough script; it drives the table itself",
    },
}


def _imports(path: Path) -> list[str]:
    """Absolute names of every module ``path`` imports from this package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against probe_service.cli
                base = ["probe_service", "cli"][: 2 - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
                if node.module is None:
                    found += [f"{module}.{alias.name}" for alias in node.names]
                    continue
            else:
                module = node.module or ""
            found.append(module)
    return [name for name in found if name.split(".")[0] == "probe_service"]


def _allowed(module: str, name: str) -> bool:
    if name == "probe_service.cli" or name.startswith("probe_service.cli."):
        return True
    if any(name == a or name.startswith(a + ".") for a in ALLOWED):
        return True
    return name in EXCEPTIONS.get(module, {})


@pytest.mark.parametrize("path", sorted(CLI_DIR.glob("*.py")), ids=lambda p: p.name)
def test_cli_module_imports_only_the_service(path: Path) -> None:
    """A CLI module imports the service package, errors, safe_text and its own modules."""
    bad = [name for name in _imports(path) if not _allowed(path.name, name)]
    assert bad == []


def test_the_rule_catches_an_internal_import(tmp_path: Path) -> None:
    """A module reaching into claims internals (lazily, inside a function) is caught."""
    module = tmp_path / "sneaky.py"
    module.write_text(
        "from ..service import ProbeService\n"
        "def f():\n"
        "    from ..claims.service import claim_show\n"
        "    import probe_service.store.schema\n"
    )
    bad = [name for name in _imports(module) if not _allowed(module.name, name)]
    assert bad == ["probe_service.claims.service", "probe_service.store.schema"]


def test_every_exception_is_still_used() -> None:
    """An exception no module needs any more is removed from the list, not kept."""
    unused = [
        (module, name)
        for module, names in EXCEPTIONS.items()
        for name in names
        if name not in _imports(CLI_DIR / module)
    ]
    assert unused == []


#: Refusals a command reports itself because they are its verdict, not an error.
VERDICTS = {
    ("plans.py", "ReceiptInvalid"),  # `receipt verify`: exit 1, "receipt invalid"
    ("policy.py", "PolicyError"),  # `policy check`: exit 1 on a refused file
    ("doctor.py", "ProbeServiceError"),  # a failing check is a line of the report
}
_SERVICE_ERRORS = {
    name
    for name in dir(errors)
    if isinstance(getattr(errors, name), type)
    and issubclass(getattr(errors, name), errors.ProbeServiceError)
}


def _caught(path: Path) -> set[str]:
    """Names of the service's errors that ``except`` clauses in ``path`` catch."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            for sub in ast.walk(node.type):
                if isinstance(sub, ast.Name) and sub.id in _SERVICE_ERRORS:
                    names.add(sub.id)
    return names


def test_one_place_turns_errors_into_exit_codes() -> None:
    """Only the root app catches the service's errors; the rest are documented verdicts."""
    caught = {
        (path.name, name)
        for path in CLI_DIR.glob("*.py")
        if path.name not in {"main.py"}
        for name in _caught(path)
    }
    assert caught <= VERDICTS
    # The root app catches every exception once and reports it as its class of the tree
    # says (cli/errors.as_refusal translates what is not ours).
    reporting = {path.name for path in CLI_DIR.glob("*.py") if _calls(path, "report_error")}
    assert reporting == {"main.py"}
    assert _calls(CLI_DIR / "main.py", "as_refusal")


def _calls(path: Path, function: str) -> bool:
    """Whether ``path`` calls ``function`` by its bare name."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )
