"""Running `byte-probe doctor` as a farm worker would run: root, a given capability set,
no_new_privs, the worker's environment (a policy file, a signing key, an embedded store)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .conftest import BYTE_PROBE

#: What a plain `docker run` grants root (moby's default capability set).
DOCKER_DEFAULT_CAPABILITIES = (
    "CAP_AUDIT_WRITE",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_MKNOD",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SETFCAP",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_SETUID",
    "CAP_SYS_CHROOT",
)


def restricted(capabilities: Iterable[str], *, no_new_privs: bool = True) -> list[str]:
    """The argv prefix that runs a command as root holding only ``capabilities``."""
    names = ",".join(f"+{name.removeprefix('CAP_').lower()}" for name in capabilities)
    prefix = ["setpriv", f"--bounding-set=-all,{names}" if names else "--bounding-set=-all"]
    return [*prefix, *(["--no-new-privs"] if no_new_privs else []), "--"]


def worker_environment(work: Path) -> dict[str, str]:
    """A worker's environment in ``work``: a root-owned 0600 policy file and signing key,
    the embedded store, no broker."""
    policy = work / "probe-policies.json"
    document = {
        "schema": 1,
        "policies": [
            {
                "id": "deploy-shell",
                "allowed_executables": ["true"],
                "timeout_seconds": 20,
                "max_output_bytes": 10_000,
                "allowed_domains": [],
                "environment": [],
            }
        ],
    }
    policy.write_text(json.dumps(document))
    policy.chmod(0o600)
    keys = work / "keys"
    subprocess.run(
        [str(BYTE_PROBE), "key", "create", "--out", str(keys), "--json"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROBE_", "BYTE_PROBE_"))}
    env["BYTE_PROBE_POLICY_FILE"] = str(policy)
    env["BYTE_PROBE_SIGNING_KEY"] = str(keys / "signing-key.pem")
    return env


def doctor(
    prefix: Sequence[str], env: dict[str, str], root: Path
) -> tuple[int, dict[str, dict[str, Any]]]:
    """Run `doctor --json` behind ``prefix``; return its exit code and checks by name
    (a name that repeats, like ``mechanism``, keeps its first failing line)."""
    done = subprocess.run(
        [*prefix, str(BYTE_PROBE), "doctor", "--json", "--root", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    # An emulation that could not even start doctor says why, not a JSON decode error.
    assert done.stdout.strip(), f"doctor printed nothing (exit {done.returncode}): {done.stderr}"
    checks: dict[str, dict[str, Any]] = {}
    for check in json.loads(done.stdout)["checks"]:
        if check["name"] not in checks or not check["ok"]:
            checks[check["name"]] = check
    return done.returncode, checks
