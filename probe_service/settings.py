"""``Settings``: every environment variable the service reads, read in one place.

``read_settings()`` takes one frozen copy of the environment and parses each name in
``SETTINGS`` from it; nothing else in the package reads ``os.environ``
(tests/test_settings.py greps for it). The faces read the settings once at start and hand
the object down: ``ProbeService`` and the worker context carry it, and the values a policy
passes into the sandbox come from the copy it holds, never from the live environment
(docs/ARCHITECTURE.md, "Settings").

Every setting is also accepted under the compatibility prefix ``ZYTE_AGENT_``: the name's
own prefix (``PROBE_`` or ``BYTE_PROBE_``) replaced by it, so ``PROBE_REDIS_URL`` is also
``ZYTE_AGENT_REDIS_URL`` (docs/ARCHITECTURE.md, "Environment names kept for
compatibility"). Both spellings set to different values is refused; so is a bad value.
Both raise ``SettingsError`` naming the variable.

A frozen dataclass with one reader, in the style of starlette's ``Config``, rather than
pydantic-settings: the alias rule, the conflict refusal and the ``os.pathsep`` list need
code of their own anyway, and the reader must parse the one copy the run's environment
comes from, not read the process environment again.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import SettingsError

__all__ = [
    "CAPTURE_ROOTS_ENV",
    "COMPATIBILITY_PREFIX",
    "DATABASE_URL_ENV",
    "DEBUG_ENV",
    "METRICS_PORT_ENV",
    "NAMESPACE_ENV",
    "POLICY_FILE_ENV",
    "REDIS_URL_ENV",
    "SANDBOX_DIR_ENV",
    "SERVE_GROUP_ENV",
    "SERVE_SOCKET_ENV",
    "SETTINGS",
    "SIGNING_KEY_ENV",
    "TOKEN_ENV",
    "WORKER_DIR_ENV",
    "Setting",
    "Settings",
    "compatibility_name",
    "read_settings",
]

# The names other modules quote in their messages (each is spelled only here).
DATABASE_URL_ENV = "PROBE_DATABASE_URL"
REDIS_URL_ENV = "PROBE_REDIS_URL"
NAMESPACE_ENV = "PROBE_REDIS_NAMESPACE"
POLICY_FILE_ENV = "BYTE_PROBE_POLICY_FILE"
SIGNING_KEY_ENV = "BYTE_PROBE_SIGNING_KEY"
CAPTURE_ROOTS_ENV = "BYTE_PROBE_CAPTURE_ROOTS"
METRICS_PORT_ENV = "PROBE_METRICS_PORT"
SANDBOX_DIR_ENV = "BYTE_PROBE_SANDBOX_DIR"
WORKER_DIR_ENV = "BYTE_PROBE_TSBOUNDARY_DIR"
TOKEN_ENV = "BYTE_PROBE_WEB_TOKEN"  # noqa: S105 (the variable's name, not a secret)
DEBUG_ENV = "BYTE_PROBE_DEBUG"
SERVE_SOCKET_ENV = "PROBE_SERVE_SOCKET"
SERVE_GROUP_ENV = "PROBE_SERVE_GROUP"

#: The prefix every setting is also accepted under (docs/ARCHITECTURE.md, "Environment
#: names kept for compatibility").
COMPATIBILITY_PREFIX = "ZYTE_AGENT_"
_OWN_PREFIXES = ("BYTE_PROBE_", "PROBE_")
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    """The service's configuration, parsed from one frozen copy of the environment."""

    #: The service user's home: the default policy file and signing key live under it.
    home: Path
    #: The administrator's policy file (``BYTE_PROBE_POLICY_FILE``, else under ``home``).
    policy_file: Path
    #: The receipt signing key's file (``BYTE_PROBE_SIGNING_KEY``, else beside the default
    #: policy file).
    signing_key: Path
    #: True when the environment named the key: it must then load (the default may be absent).
    signing_key_named: bool = False
    database_url: str | None = field(default=None, repr=False)
    redis_url: str | None = field(default=None, repr=False)
    redis_namespace: str = "byte-probe"
    #: The directories a machine face may capture inside, as given (absolute, unresolved).
    capture_roots: tuple[str, ...] = ()
    lease_ms: int = 30_000
    max_attempts: int = 3
    resend_after_ms: int = 300_000
    janitor_interval_ms: int = 5_000
    metrics_port: int = 9191
    sandbox_dir: Path = _PACKAGE_PARENT / "sandbox"
    tsboundary_dir: Path = _PACKAGE_PARENT / "tsboundary"
    web_token: str | None = field(default=None, repr=False)
    debug: bool = False
    #: The local service's socket (``PROBE_SERVE_SOCKET``): where ``byte-probe serve``
    #: listens (``/run/byte-probe/serve.sock`` when None), and, when set, what the hook,
    #: the MCP server and the CLI talk to instead of running in-process.
    serve_socket: Path | None = None
    #: The group allowed to connect to the socket (mode 0660); None: every user (0666).
    serve_group: str | None = None
    #: ``XDG_CACHE_HOME``, else ``home/.cache`` (the CLI's capabilities cache).
    cache_home: Path | None = None
    #: The frozen copy of the environment these settings were read from: the only source
    #: of the values a policy passes into the sandbox (docs/ARCHITECTURE.md, "Probe
    #: environment") and of every subprocess's environment.
    environment: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (``ProbeService.open(policy_file=…)``, for example)."""
        return replace(self, **changes)

    @property
    def cache_dir(self) -> Path:
        """The user's cache directory (``XDG_CACHE_HOME`` or ``~/.cache``)."""
        return self.cache_home or self.home / ".cache"


@dataclass(frozen=True)
class Setting:
    """One environment name: the field it fills, how its text is parsed, what it does."""

    name: str
    field: str
    parse: Callable[[str, str], Any]
    description: str

    @property
    def alias(self) -> str | None:
        """Its ``ZYTE_AGENT_`` spelling (None for a name without our prefix)."""
        return compatibility_name(self.name)


def compatibility_name(name: str) -> str | None:
    """``name`` with its own prefix replaced by ``ZYTE_AGENT_``; None without one."""
    for prefix in _OWN_PREFIXES:
        if name.startswith(prefix):
            return COMPATIBILITY_PREFIX + name.removeprefix(prefix)
    return None


def _text(name: str, raw: str) -> str:
    return raw


def _path(name: str, raw: str) -> Path:
    return Path(raw)


def _absolute_path(name: str, raw: str) -> Path:
    if not os.path.isabs(raw):
        raise SettingsError(f"{name}: {raw!r} is not an absolute path")
    return Path(raw)


def _flag(name: str, raw: str) -> bool:
    return True  # any non-empty value turns it on (an empty one is unset)


def _integer(low: int, high: int | None = None) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise SettingsError(f"{name}: {raw!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise SettingsError(f"{name}: {value} must be {bound}")
        return value

    return parse


def _directories(name: str, raw: str) -> tuple[str, ...]:
    entries = tuple(entry for entry in raw.split(os.pathsep) if entry)
    for entry in entries:
        if not os.path.isabs(entry):
            raise SettingsError(f"{name}: {entry!r} is not an absolute path")
    return entries


#: Every environment name the service reads, in the order the README's table lists them.
#: Names the runner sets for the sandbox's own children (``BYTE_PROBE_SCRATCH``,
#: ``BYTE_PROBE_RUN_MARKER``, ``BYTE_PROBE_SECCOMP_FILTER`` …) are outputs, not settings.
SETTINGS: tuple[Setting, ...] = (
    Setting(DATABASE_URL_ENV, "database_url", _text, "shared store (else the embedded one)"),
    Setting(REDIS_URL_ENV, "redis_url", _text, "job queue broker (else runs are embedded)"),
    Setting(NAMESPACE_ENV, "redis_namespace", _text, "queue namespace (`byte-probe`)"),
    Setting(
        POLICY_FILE_ENV,
        "policy_file",
        _path,
        "the administrator's policy file (`~/.zyte/agent/probe-policies.json`)",
    ),
    Setting(
        SIGNING_KEY_ENV,
        "signing_key",
        _path,
        "receipt signing key (`~/.zyte/agent/signing-key.pem` when present)",
    ),
    Setting(
        CAPTURE_ROOTS_ENV,
        "capture_roots",
        _directories,
        "absolute directories the host and MCP faces may capture inside (`--root`)",
    ),
    Setting("PROBE_LEASE_MS", "lease_ms", _integer(1), "a running run's lease (30000)"),
    Setting(
        "PROBE_MAX_ATTEMPTS", "max_attempts", _integer(1), "lost workers before `worker_lost` (3)"
    ),
    Setting(
        "PROBE_RESEND_AFTER_MS",
        "resend_after_ms",
        _integer(0),
        "re-send a stale queued run (300000)",
    ),
    Setting(
        "PROBE_JANITOR_INTERVAL_MS", "janitor_interval_ms", _integer(1), "janitor period (5000)"
    ),
    Setting(
        METRICS_PORT_ENV,
        "metrics_port",
        _integer(0, 65535),
        "first worker process's metrics port (9191, process i on +i; 0 off)",
    ),
    Setting(SANDBOX_DIR_ENV, "sandbox_dir", _path, "the Sandbox Runtime (`sandbox/`)"),
    Setting(WORKER_DIR_ENV, "tsboundary_dir", _path, "the TypeScript worker (`tsboundary/`)"),
    Setting(TOKEN_ENV, "web_token", _text, "the web view's bearer token"),
    Setting(DEBUG_ENV, "debug", _flag, "print a traceback for an internal error"),
    Setting(
        SERVE_SOCKET_ENV,
        "serve_socket",
        _absolute_path,
        "the local service's socket: `serve` listens there (`/run/byte-probe/serve.sock`); "
        "when set, the hook, MCP server and CLI are its clients",
    ),
    Setting(
        SERVE_GROUP_ENV,
        "serve_group",
        _text,
        "the group that may connect to the local service's socket (every user)",
    ),
    Setting("XDG_CACHE_HOME", "cache_home", _path, "the CLI's capabilities cache (`~/.cache`)"),
)


def _raw(environ: Mapping[str, str], setting: Setting) -> tuple[str, str] | None:
    """The setting's non-empty value and the name it was found under, or None.

    Raises SettingsError naming both spellings when both are set to different values.
    """
    names = [name for name in (setting.name, setting.alias) if name]
    found = [(name, environ[name]) for name in names if environ.get(name)]
    if len(found) == 2 and found[0][1] != found[1][1]:
        raise SettingsError(
            f"{found[0][0]} and {found[1][0]} are both set, to different values; "
            f"unset one (they name the same setting)"
        )
    return (found[0][1], found[0][0]) if found else None


def _home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME")
    return Path(home) if home else Path(pwd.getpwuid(os.getuid()).pw_dir)


def read_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Parse ``environ`` (a frozen copy of this process's environment when None).

    An empty value counts as unset. Raises SettingsError naming the variable: a value that
    is not what the setting takes (an integer, an absolute directory), or a setting set
    under both its names to different values.
    """
    copy = MappingProxyType(dict(os.environ if environ is None else environ))
    home = _home(copy)
    default_policies = home / ".zyte" / "agent" / "probe-policies.json"
    values: dict[str, Any] = {
        "home": home,
        "policy_file": default_policies,
        "signing_key": default_policies.parent / "signing-key.pem",
        "environment": copy,
    }
    for setting in SETTINGS:
        found = _raw(copy, setting)
        if found is not None:
            raw, name = found
            values[setting.field] = setting.parse(name, raw)
    values["signing_key_named"] = _raw(copy, _SIGNING_KEY) is not None
    return Settings(**values)


_SIGNING_KEY = next(s for s in SETTINGS if s.field == "signing_key")
