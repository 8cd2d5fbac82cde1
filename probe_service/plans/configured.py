"""A run under the administrator's configuration: the settings' policy file, signing key
and frozen copy of the environment (docs/ARCHITECTURE.md, "Settings").

The one place a run's configuration is read from ``Settings``: the service's embedded run,
the queue's workers and the embedded mode all go through ``run_configuration``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..policies import PolicyFile, load_policy_file
from ..sandbox import SandboxRuntime
from ..settings import Settings
from ..store import Store
from .backend import SandboxBackend
from .run import ProbeRunResult, probe_run
from .signing import SigningKey, configured_signing_key

__all__ = ["RunConfiguration", "run_configuration", "run_configured"]


@dataclass(frozen=True)
class RunConfiguration:
    """What the administrator configured for a run: policies, signing key, environment."""

    policy_file: PolicyFile
    signing_key: SigningKey | None
    environ: Mapping[str, str]


def run_configuration(settings: Settings, store: Store) -> RunConfiguration:
    """Load the settings' policy file and signing key (never one inside ``store``'s root).

    Raises PolicyError (the policy file is missing, unsafe or malformed) or KeyFileError.
    """
    return RunConfiguration(
        policy_file=load_policy_file(settings.policy_file),
        signing_key=configured_signing_key(settings, forbidden_roots=(store.root,)),
        environ=settings.environment,
    )


def run_configured(
    store: Store,
    settings: Settings,
    plan_id: str,
    policy_id: str,
    *,
    reuse: bool = True,
    runtime: SandboxRuntime | None = None,
    backend: SandboxBackend | None = None,
) -> ProbeRunResult:
    """Run a stored plan in this process under the settings' configuration, through
    ``backend`` (the real sandbox by default; docs/ARCHITECTURE.md, "Seams").

    Raises NotFound, PolicyError or KeyFileError; sandbox failures end inconclusive.
    """
    setup = run_configuration(settings, store)
    return probe_run(
        store,
        plan_id,
        policy_id,
        policy_file=setup.policy_file,
        signing_key=setup.signing_key,
        environ=setup.environ,
        runtime=runtime,
        sandbox_dir=settings.sandbox_dir,
        backend=backend,
        reuse=reuse,
    )
