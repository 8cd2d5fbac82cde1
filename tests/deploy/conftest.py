"""Fixtures of the deployment checks: the repository's compose file, Dockerfile, units, and
the real `byte-probe` command tree; none needs a Docker engine (none runs here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer._click.core import Command, Context
from typer.core import TyperGroup as Group

from probe_service.cli import app

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "probe_service"
UNITS = ROOT / "examples" / "systemd"
#: Where the units say the service is installed (README, "A farm on several hosts").
INSTALLED_BYTE_PROBE = "/opt/byte-probe/.venv/bin/byte-probe"
#: This checkout's own entry point, which the tests put in its place.
BYTE_PROBE = ROOT / ".venv" / "bin" / "byte-probe"


@pytest.fixture(scope="session")
def compose_text() -> str:
    """compose.yaml as written."""
    return (ROOT / "compose.yaml").read_text()


@pytest.fixture(scope="session")
def compose(compose_text: str) -> dict[str, Any]:
    """The parsed compose.yaml."""
    document: dict[str, Any] = yaml.safe_load(compose_text)
    return document


@pytest.fixture(scope="session")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    """Its services by name."""
    found: dict[str, Any] = compose["services"]
    return found


@pytest.fixture(scope="session")
def dockerfile() -> str:
    """The Dockerfile's text."""
    return (ROOT / "Dockerfile").read_text()


@pytest.fixture(scope="session")
def cli_root() -> Group:
    """The real `byte-probe` command tree."""
    root = typer.main.get_command(app)
    assert isinstance(root, Group)
    return root


def resolve_command(root: Group, args: list[str]) -> Command:
    """Walk subcommands and parse the options as `byte-probe` would; raises on anything
    unknown."""
    command: Command = root
    ctx = Context(root, info_name="byte-probe")
    while isinstance(command, Group):
        name, *args = args
        sub = command.get_command(ctx, name)
        assert sub is not None, f"byte-probe has no command {name!r}"
        command = sub
        ctx = Context(command, info_name=name, parent=ctx)
    command.make_context(command.name or "", list(args), parent=ctx.parent)
    return command


def env_names_read_by_package() -> set[str]:
    """Every upper-case string literal of the package: the environment names it may read."""
    source = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    return set(re.findall(r'"([A-Z][A-Z0-9_]+)"', source))


def unit_settings(path: Path) -> dict[str, list[str]]:
    """The active ``Key=value`` settings of a unit file (comments left out), by key."""
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line.startswith(("#", ";", "[")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found
