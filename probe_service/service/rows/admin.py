"""Administrator rows: policies, toolchains and signing keys. Those that take a path stay
on the CLI and the Python API (``ADMIN``); ``policy_list`` gives ids and digests only."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ... import policies, toolchains
from ...errors import NotFound, PolicyError
from ...plans.models import TRUSTED_SOURCES
from ...policies.clearing import ClearingRule
from ...policies.describe import PolicyDescription, describe_policy
from ...policies.loader import clearing_of
from ...sandbox.policy_check import PolicyReport, verify_policy_file
from ..registry import ADMIN, AGENT, WEB, Request, operation
from ..session import ProbeService
from .common import Frozen

__all__: list[str] = []


class PolicyListRequest(Request):
    """No parameters."""


class PolicySummary(Frozen):
    id: str
    digest: str


class PolicyList(Frozen):
    policies: list[PolicySummary]


@operation("policy_list", faces=AGENT | WEB)
def policy_list(svc: ProbeService, req: PolicyListRequest) -> PolicyList:
    """The ids and digests of the administrator's policies (never their bodies), so a
    plan can name one. Refuses when the policy file is missing, unsafe or malformed."""
    found = policies.load_policy_file(svc.policy_file).policies
    return PolicyList(
        policies=[PolicySummary(id=p.id, digest=policies.policy_digest(p)) for p in found]
    )


class PolicyDescribeRequest(Request):
    policy_id: str = Field(
        min_length=1,
        max_length=128,
        description="The id of one of the administrator's policies (policy_list names them).",
        examples=["local-python-no-network"],
    )


@operation("policy_describe", faces=AGENT | WEB)
def policy_describe(svc: ProbeService, req: PolicyDescribeRequest) -> PolicyDescription:
    """What one policy allows, to plan against it. It lists executables, timeout, output,
    memory, process, open-file and scratch limits, domains and ports, toolchain names, the
    environment (fixed values, names from the worker, names a plan may set), whether
    refutations are confirmed, and the oracle sources that need a reference. Never a path
    of the administrator's. Refuses an unknown id (not_found, naming policy_id)."""
    path = svc.policy_file
    try:
        found = policies.load_policy_file(path)
    except PolicyError as exc:
        # The file's location is the administrator's, not the caller's.
        raise PolicyError(str(exc).replace(str(path), "the policy file")) from None
    for policy in found.policies:
        if policy.id == req.policy_id:
            return describe_policy(policy, TRUSTED_SOURCES)
    raise NotFound(f"policy_id: no policy {req.policy_id!r} (policy_list names them)")


class PolicyCheckRequest(Request):
    file: str | None = Field(None, description="The policy file (default: the configured one).")


class PolicyChecked(Frozen):
    file: str
    policies: list[PolicyReport]
    #: Who may clear what (schema 3; docs/ARCHITECTURE.md, "Principals and clearing").
    principals: dict[str, str] = Field(default_factory=dict)
    clearing: list[ClearingRule] = Field(default_factory=list)


@operation("policy_check", faces=ADMIN)
def policy_check(svc: ProbeService, req: PolicyCheckRequest) -> PolicyChecked:
    """Validate a policy file (administrators only: it takes a path), verify every pin and
    toolchain on disk, and list each policy's id and digest with theirs, and the file's
    principal kinds and clearing rules in force."""
    path = Path(req.file) if req.file else svc.policy_file
    reports = verify_policy_file(path)
    rules, kinds = clearing_of(path)
    return PolicyChecked(
        file=str(path), policies=reports, principals=dict(kinds), clearing=list(rules)
    )


class ToolchainCreateRequest(Request):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$", description="Toolchain name.")
    python: str = Field(description="Absolute path of the base interpreter.")
    requirements_file: str = Field(description="pip requirements file.")
    dest: str = Field(description="New directory for the toolchain (must not exist).")
    index_url: str | None = Field(None, description="Package index (default: pip's own).")


@operation("toolchain_create", faces=ADMIN, long_running=True)
def toolchain_create(svc: ProbeService, req: ToolchainCreateRequest) -> toolchains.ToolchainDigest:
    """Build a Python toolchain (administrators only: it runs pip and takes paths): a
    virtualenv of ``python`` with the requirements installed, readable by the probe uids,
    and its digest. Refuses an existing or in-repository ``dest``."""
    from ...toolchains.create import create_python_toolchain

    return create_python_toolchain(
        Path(req.python),
        Path(req.requirements_file),
        Path(req.dest),
        environ=svc.settings.environment,
        index_url=req.index_url,
    )


class ToolchainDigestRequest(Request):
    path: str = Field(description="The toolchain's root directory.")


@operation("toolchain_digest", faces=ADMIN)
def toolchain_digest(svc: ProbeService, req: ToolchainDigestRequest) -> toolchains.ToolchainDigest:
    """Check a toolchain root against the policy file's safety rules (administrators only)
    and return its content digest."""
    root = toolchains.check_toolchain_root(Path(req.path).name, str(Path(req.path).absolute()))
    return toolchains.digest_toolchain(root)


class KeyCreateRequest(Request):
    out: str = Field(min_length=1, description="Directory for the new key pair.")


class KeyCreated(Frozen):
    private_key: str
    public_key: str
    keyid: str


@operation("key_create", faces=ADMIN)
def key_create(svc: ProbeService, req: KeyCreateRequest) -> KeyCreated:
    """Create an Ed25519 receipt signing key pair in a directory (administrators only: it
    writes to a path): signing-key.pem (0600) and signing-key.pub.pem. Refuses to overwrite
    a key or to write inside a git repository."""
    from ...plans.signing import create_key_pair

    private, public, fingerprint = create_key_pair(Path(req.out))
    return KeyCreated(private_key=str(private), public_key=str(public), keyid=fingerprint)
