"""compose.yaml and the Dockerfile, checked without a Docker engine (none runs here): the
Compose Specification's own schema, then what the worker needs and what must never hold."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer._click.exceptions import UsageError
from typer.core import TyperGroup as Group

from probe_service.sandbox.requirements import REQUIRED_CAPABILITIES
from probe_service.sandbox.runtime import _OWN_FILES as RUNTIME_FILES
from probe_service.typescript.install import _OWN_FILES as WORKER_FILES

from .conftest import PACKAGE, ROOT, UNITS, env_names_read_by_package, resolve_command

SCHEMA = Path(__file__).with_name("compose-spec.json")
SCHEMA_SOURCE = Path(__file__).with_name("compose-spec.source.md")
OUR_SERVICES = ("migrate", "worker", "metrics", "web")
UNPRIVILEGED = ("migrate", "metrics", "web")
#: The image's unprivileged account (Dockerfile) that every service but the worker runs as.
PROBE_ACCOUNT = "10001:10001"
#: The worker's security options, each commented in compose.yaml with its reason.
WORKER_SECURITY_OPT = {
    "seccomp=unconfined",
    "apparmor=unconfined",
    "systempaths=unconfined",
    "no-new-privileges:true",
}
#: Where a published port may bind (README, "A farm on several hosts").
BIND_ADDRESSES = ("127.0.0.1", "${FARM_BIND_ADDRESS:-127.0.0.1}")


def _violations(document: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(document)
    ]


def _copy_sources(dockerfile: str) -> list[str]:
    """Every source path of the Dockerfile's COPY instructions (continued lines joined)."""
    sources: list[str] = []
    for match in re.finditer(r"^COPY ((?:[^\n]*\\\n)*[^\n]*)", dockerfile, re.MULTILINE):
        sources += match.group(1).replace("\\\n", " ").split()[:-1]
    return sources


def _volumes(service: dict[str, Any]) -> list[dict[str, Any]]:
    """The service's volumes, long syntax (the farm's file uses no short syntax there)."""
    volumes = service.get("volumes", [])
    assert all(isinstance(v, dict) for v in volumes), "use the long volume syntax"
    return list(volumes)


class TestSchema:
    def test_compose_file_follows_the_compose_specification(self, compose: dict[str, Any]) -> None:
        """compose.yaml validates against the vendored Compose Specification schema."""
        assert _violations(compose) == []

    def test_the_schema_check_has_teeth(self, compose: dict[str, Any]) -> None:
        """A misspelled service key and a wrong type both fail the schema check."""
        broken = copy.deepcopy(compose)
        broken["services"]["worker"]["cap_ad"] = ["SYS_ADMIN"]
        broken["services"]["redis"]["healthcheck"]["interval"] = 5
        found = _violations(broken)
        assert any("cap_ad" in v for v in found)
        assert any(v.startswith("services/redis/healthcheck/interval") for v in found)

    def test_vendored_schema_matches_its_recorded_source(self) -> None:
        """The schema file is the one its source record names (sha256, commit, URL)."""
        record = SCHEMA_SOURCE.read_text()
        digest = hashlib.sha256(SCHEMA.read_bytes()).hexdigest()
        assert f"sha256: `{digest}`" in record
        assert "https://github.com/compose-spec/compose-spec/blob/" in record
        assert json.loads(SCHEMA.read_text())["title"] == "Compose Specification"


class TestServices:
    def test_every_service_is_declared(self, services: dict[str, Any]) -> None:
        """Redis, PostgreSQL, the migration, the workers, the store-wide metrics and the web
        view are all there."""
        assert set(services) == {"redis", "postgres", "migrate", "worker", "metrics", "web"}

    def test_redis_persists_never_evicts_and_wants_a_password(
        self, services: dict[str, Any]
    ) -> None:
        """Redis runs with an append-only file, the noeviction policy and a password."""
        command = " ".join(services["redis"]["command"])
        assert "--appendonly yes" in command
        assert "--maxmemory-policy noeviction" in command
        assert '--requirepass "$$REDIS_PASSWORD"' in command
        assert services["redis"]["environment"]["REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?")
        assert any(v.endswith(":/data") for v in services["redis"]["volumes"])

    def test_postgres_keeps_its_data_in_a_volume(
        self, compose: dict[str, Any], services: dict[str, Any]
    ) -> None:
        """PostgreSQL's data directory is a named volume; its password must be given."""
        volume = services["postgres"]["volumes"][0].split(":")[0]
        assert volume in compose["volumes"]
        password = services["postgres"]["environment"]["POSTGRES_PASSWORD"]
        assert password.startswith("${POSTGRES_PASSWORD:?")

    def test_every_service_has_a_health_check(self, services: dict[str, Any]) -> None:
        """Every long-running service polls a health check; the one-shot says its exit
        status is its health instead (and is never restarted)."""
        for name, service in services.items():
            check = service["healthcheck"]
            if service["restart"] == "no":
                assert check == {"disable": True}, name
            else:
                assert check["test"][0] in {"CMD", "CMD-SHELL"}, name
                assert service["restart"] in {"always", "unless-stopped", "on-failure"}, name

    def test_migrate_is_the_only_one_shot(self, services: dict[str, Any]) -> None:
        """The migration runs once and is never restarted."""
        assert [n for n, s in services.items() if s["restart"] == "no"] == ["migrate"]

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

    def test_web_is_opt_in(self, services: dict[str, Any]) -> None:
        """The web view starts only with its profile."""
        assert services["web"]["profiles"] == ["web"]


class TestWorkerGrants:
    def test_worker_runs_as_root(self, services: dict[str, Any]) -> None:
        """The worker's container user is root: it starts each probe as its slot uid."""
        assert services["worker"]["user"] == "0:0"

    def test_capabilities_are_exactly_the_documented_ones(self, services: dict[str, Any]) -> None:
        """Every default capability is dropped and exactly the containment's are added."""
        worker = services["worker"]
        assert worker["cap_drop"] == ["ALL"]
        added = [f"CAP_{name}" for name in worker["cap_add"]]
        assert sorted(added) == sorted(REQUIRED_CAPABILITIES)

    def test_security_options_are_exactly_the_documented_ones(
        self, services: dict[str, Any]
    ) -> None:
        """seccomp, AppArmor and the masked /proc are off for bubblewrap; no_new_privs on."""
        assert set(services["worker"]["security_opt"]) == WORKER_SECURITY_OPT
        assert len(services["worker"]["security_opt"]) == len(WORKER_SECURITY_OPT)

    def test_no_grant_beyond_them(self, services: dict[str, Any]) -> None:
        """Not privileged, no devices, no host pid/ipc/network/user namespace."""
        worker = services["worker"]
        for key in ("privileged", "devices", "device_cgroup_rules", "pid", "ipc"):
            assert key not in worker, key
        for key in ("network_mode", "userns_mode", "uts"):
            assert key not in worker, key

    def test_every_grant_is_commented_with_its_reason(self, compose_text: str) -> None:
        """Each added capability carries a comment; each security option has one above it."""
        lines = compose_text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip() == "cap_add:")
        for line in lines[start + 1 : start + 1 + len(REQUIRED_CAPABILITIES)]:
            assert re.match(r"^\s+- [A-Z_]+\s+# \S", line), line
        start = next(i for i, line in enumerate(lines) if line.strip() == "security_opt:")
        options = [i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("- ")]
        for index in options[: len(WORKER_SECURITY_OPT)]:
            assert lines[index - 1].strip().startswith("#"), lines[index]

    def test_only_the_two_cgroup_controllers_are_writable(self, services: dict[str, Any]) -> None:
        """The memory and pids v1 hierarchies are bound writable with the host's cgroup
        namespace (so /proc/self/cgroup names their paths); nothing else of /sys is."""
        worker = services["worker"]
        assert worker["cgroup"] == "host"
        system = [v for v in _volumes(worker) if v["target"].startswith("/sys")]
        assert {(v["source"], v["target"]) for v in system} == {
            ("/sys/fs/cgroup/memory", "/sys/fs/cgroup/memory"),
            ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/pids"),
        }
        assert not any(v.get("read_only") for v in system)
        assert all(v["bind"]["create_host_path"] is False for v in system)

    def test_slot_locks_are_the_hosts(self, services: dict[str, Any]) -> None:
        """Every worker container on a kernel shares the host's slot locks, so no two runs
        on one kernel share a slot uid."""
        (slots,) = [v for v in _volumes(services["worker"]) if "slots" in v["target"]]
        assert (slots["type"], slots["source"]) == ("bind", "/run/byte-probe/slots")
        assert slots["target"] == "/run/byte-probe/slots"

    def test_state_is_per_container(self, services: dict[str, Any]) -> None:
        """The worker's state (runtime copy, snapshot cache, run dirs via TMPDIR) is an
        anonymous volume: never a named volume two workers' pid-based sweeps would share."""
        worker = services["worker"]
        (state,) = [v for v in _volumes(worker) if v["target"] == "/var/lib/byte-probe"]
        assert state["type"] == "volume"
        assert "source" not in state
        assert worker["environment"]["TMPDIR"].startswith("/var/lib/byte-probe/")

    def test_init_reaps_and_forwards_signals(self, services: dict[str, Any]) -> None:
        """An init process runs in front of the worker."""
        assert services["worker"]["init"] is True

    @pytest.mark.parametrize("name", UNPRIVILEGED)
    def test_other_services_stay_unprivileged(self, services: dict[str, Any], name: str) -> None:
        """migrate and web run as the image's unprivileged account with no added grant."""
        service = services[name]
        assert service["user"] == PROBE_ACCOUNT
        for key in ("cap_add", "security_opt", "privileged", "cgroup", "devices", "pid"):
            assert key not in service, key
        assert not any(str(v).startswith("/sys") for v in service.get("volumes", []))


class TestSecrets:
    @pytest.mark.parametrize(
        ("variable", "name"),
        [
            ("BYTE_PROBE_POLICY_FILE", "probe-policies.json"),
            ("BYTE_PROBE_SIGNING_KEY", "signing-key.pem"),
        ],
    )
    def test_policy_file_and_key_are_mounted_read_only(
        self, services: dict[str, Any], variable: str, name: str
    ) -> None:
        """The file the environment names is a read-only bind of the host's own file in
        /etc/byte-probe (as on a systemd host; never in the checkout), which must exist (no
        directory is made in its place)."""
        worker = services["worker"]
        path = worker["environment"][variable]
        (mount,) = [v for v in _volumes(worker) if v["target"] == path]
        expected = ("bind", f"/etc/byte-probe/{name}", True)
        assert (mount["type"], mount["source"], mount["read_only"]) == expected
        assert mount["bind"]["create_host_path"] is False
        env_file = (UNITS / "worker.env.example").read_text()
        assert f"{variable}={mount['source']}" in env_file

    def test_secrets_stay_out_of_the_build_context(self) -> None:
        """.dockerignore keeps the policy file, keys and env files out of every build."""
        patterns = set((ROOT / ".dockerignore").read_text().split())
        assert {"probe-policies.json", "**/probe-policies.json", "**/*.pem", "**/*.key"} <= patterns
        assert {".env", "**/.env", "**/*.env"} <= patterns

    def test_nothing_copied_into_the_image_can_hold_them(self, dockerfile: str) -> None:
        """The Dockerfile copies only named sources, none of which is or holds a policy
        file or a key."""
        assert not re.search(r"^ADD ", dockerfile, re.MULTILINE)
        sources = _copy_sources(dockerfile)
        assert "." not in sources
        assert "./" not in sources
        allowed = ("sandbox/", "tsboundary/", "pyproject.toml", "README.md", "probe_service")
        assert all(s.startswith(allowed) or s == "scripts/docker-entrypoint.sh" for s in sources)
        copied_tree = list(PACKAGE.rglob("*"))
        assert not [p for p in copied_tree if p.suffix in {".pem", ".key", ".env"}]
        assert not [p for p in copied_tree if p.name == "probe-policies.json"]


class TestPorts:
    def test_ports_bind_where_the_readme_says(
        self, services: dict[str, Any], compose_text: str
    ) -> None:
        """Every published port binds loopback, or FARM_BIND_ADDRESS, which the README
        documents; the metrics port is exposed on the compose network only."""
        readme = (ROOT / "README.md").read_text()
        published = [(n, p) for n, s in services.items() for p in s.get("ports", [])]
        assert published
        for name, port in published:
            assert port.rpartition(":")[0].rpartition(":")[0] in BIND_ADDRESSES, (name, port)
        assert "FARM_BIND_ADDRESS" in readme
        assert "127.0.0.1:8470" in readme
        worker = services["worker"]
        base = int(worker["environment"]["PROBE_METRICS_PORT"])
        processes = int(worker["command"][worker["command"].index("--processes") + 1])
        assert worker["expose"] == [str(base + i) for i in range(processes)]
        assert services["metrics"]["expose"] == ["9190"]
        assert "ports" not in services["metrics"]

    def test_readme_scrape_configuration_targets_the_metrics_port(
        self, services: dict[str, Any]
    ) -> None:
        """The README's Prometheus jobs scrape every port a worker process serves its
        counters on, and the one store-wide endpoint."""
        readme = (ROOT / "README.md").read_text()
        block = re.search(r"```yaml\n(scrape_configs:.*?)```", readme, re.DOTALL)
        assert block is not None, "the README shows a scrape_configs block"
        for port in services["worker"]["expose"]:
            assert f"worker:{port}" in block.group(1)
        assert "metrics:9190" in block.group(1)


class TestConfiguration:
    @pytest.mark.parametrize("name", OUR_SERVICES)
    def test_env_names_are_read_by_the_code(self, services: dict[str, Any], name: str) -> None:
        """Every environment variable given to our image is one the package reads."""
        given = set(services[name]["environment"])
        assert given - env_names_read_by_package() == set()

    def test_worker_is_configured_by_environment(self, services: dict[str, Any]) -> None:
        """The worker gets its store, broker, policy file, key and metrics port from the env."""
        env = services["worker"]["environment"]
        names = {"PROBE_DATABASE_URL", "PROBE_REDIS_URL", "BYTE_PROBE_POLICY_FILE"}
        assert names | {"BYTE_PROBE_SIGNING_KEY", "PROBE_METRICS_PORT"} <= set(env)

    def test_worker_health_check_needs_the_store(self, services: dict[str, Any]) -> None:
        """The worker's health check asks its metrics port and wants its store_up at 1;
        the metrics service's wants `byte_probe_up 1`."""
        worker = services["worker"]
        port = worker["environment"]["PROBE_METRICS_PORT"]
        check = " ".join(worker["healthcheck"]["test"])
        assert f":{port}/metrics" in check
        assert "byte_probe_worker_store_up" in check
        store_wide = " ".join(services["metrics"]["healthcheck"]["test"])
        assert ":9190/metrics" in store_wide
        assert "byte_probe_up 1.0" in store_wide

    @pytest.mark.parametrize("name", OUR_SERVICES)
    def test_commands_are_real_cli_commands(
        self, services: dict[str, Any], cli_root: Group, name: str
    ) -> None:
        """Each service's command -- what the entrypoint hands `byte-probe` -- resolves,
        options included, in the real CLI."""
        service = services[name]
        assert "entrypoint" not in service, "the image's entrypoint (doctor first) is used"
        resolve_command(cli_root, list(service["command"]))


class TestDockerfile:
    def test_base_image(self, dockerfile: str) -> None:
        """The image builds on python:3.11-slim."""
        assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)

    def test_sandbox_tools_are_installed(self, dockerfile: str) -> None:
        """bubblewrap, socat, ripgrep, nodejs, npm and util-linux come from apt."""
        install = re.search(r"apt-get install[^\n]*", dockerfile)
        assert install is not None
        wanted = {"bubblewrap", "socat", "ripgrep", "nodejs", "npm", "util-linux"}
        assert wanted <= set(install.group().split())

    def test_pinned_runtime_and_package_are_installed(self, dockerfile: str) -> None:
        """The runtime comes from the lock file (npm ci) and the service from pip."""
        assert "cd sandbox && npm ci" in dockerfile
        assert "pip install ." in dockerfile

    def test_every_file_the_digests_cover_is_copied(self, dockerfile: str) -> None:
        """The runtime's and the TypeScript worker's own files, which their pinned digests
        cover, are all in the image (doctor's digest line fails otherwise)."""
        sources = _copy_sources(dockerfile)
        wanted = [f"sandbox/{name}" for name in (*RUNTIME_FILES, "runtime.sha256")]
        wanted += [f"tsboundary/{name}" for name in (*WORKER_FILES, "worker.sha256")]
        assert [name for name in wanted if name not in sources] == []

    def test_the_image_user_is_root_for_the_worker(self, dockerfile: str) -> None:
        """The last USER is root (the worker's requirement)."""
        users = re.findall(r"^USER (\S+)$", dockerfile, re.MULTILINE)
        assert users[-1] in {"root", "0"}

    def test_entrypoint_is_the_doctor_first_script(self, dockerfile: str) -> None:
        """The entrypoint is scripts/docker-entrypoint.sh, copied in under its exec name."""
        (entry,) = re.findall(r"^ENTRYPOINT (.+)$", dockerfile, re.MULTILINE)
        (target,) = json.loads(entry)
        assert f"COPY scripts/docker-entrypoint.sh {target}" in dockerfile
        assert "doctor" in (ROOT / "scripts" / "docker-entrypoint.sh").read_text()

    def test_the_unprivileged_account_is_the_one_compose_names(self, dockerfile: str) -> None:
        """The image's `probe` account has the uid and gid compose.yaml runs services as."""
        uid, gid = PROBE_ACCOUNT.split(":")
        assert f"groupadd --gid {gid} probe" in dockerfile
        assert f"useradd --uid {uid} --gid {gid}" in dockerfile
        entrypoint = (ROOT / "scripts" / "docker-entrypoint.sh").read_text()
        assert f"PROBE_ACCOUNT={uid}" in entrypoint

    def test_the_worker_state_directories_exist_in_the_image(self, dockerfile: str) -> None:
        """TMPDIR's directory is made in the image (tempfile falls back to /tmp silently)."""
        assert "/var/lib/byte-probe/tmp" in dockerfile


class TestResolver:
    def test_unknown_option_is_rejected(self, cli_root: Group) -> None:
        """The command check has teeth: an option the CLI lacks fails it."""
        with pytest.raises(UsageError):
            resolve_command(cli_root, ["worker", "--no-such-option"])

    def test_unknown_command_is_rejected(self, cli_root: Group) -> None:
        """The command check has teeth: a command the CLI lacks fails it."""
        with pytest.raises(AssertionError, match="no command 'frobnicate'"):
            resolve_command(cli_root, ["frobnicate"])
