"""The one exception tree of the probe service.

Every refusal the service makes is one of these, so an interface needs a single
``except ProbeServiceError`` to turn it into an exit code or an error frame.
Branches are grouped by what the caller does next::

    ProbeServiceError
    ├── InvalidInput                  bad input: fix the request, do not retry
    │   ├── InvalidPlan               a plan field is wrong (names the field)
    │   ├── InvalidClaim              a claim, dependency or evidence is wrong
    │   │   └── EvidenceMismatch      a receipt is not evidence for this claim/snapshot
    │   ├── PolicyError               policy file missing, unsafe or malformed
    │   ├── SettingsError             an environment setting is malformed or set twice
    │   ├── UnsafePath                a path escapes, links, or is not a regular file
    │   │   └── LinkEscapes           a snapshot link points outside its tree (names it)


    │   ├── KeyFileError              a signing key file is unsafe, misplaced or malformed
    │   ├── JunitReportInvalid        a probe's JUnit XML report is unsafe, too big or malformed
    │   ├── LimitExceeded             a size or count limit was crossed (names the limit)
    │   ├── NotFound                  an id that the store does not hold
    │   ├── AmbiguousId               an id prefix that matches more than one id
    │   └── Conflict                  the request contradicts stored, immutable state
    ├── UnstableWorkingTree           files moved while a snapshot was captured
    ├── InfrastructureError           retry later: the dependency was unavailable
    │   ├── StoreUnavailable          the database could not be reached or answered
    │   └── BrokerUnavailable         the queue broker could not be reached
    ├── SandboxUnavailable            a sandbox prerequisite is missing or unverified
    │   └── LauncherUnavailable       the persistent launcher failed: use the CLI path
    │                                 (sandbox/helper.py; never seen outside the runner)
    └── ReceiptInvalid                a receipt does not match its commitment or signature

Errors from libraries underneath (SQLAlchemy, Redis, subprocess) are translated
once, at the edge that calls them, with ``raise Mapped(...) from exc``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AmbiguousId",
    "BrokerUnavailable",
    "Conflict",
    "EvidenceMismatch",
    "InfrastructureError",
    "InvalidClaim",
    "InvalidInput",
    "InvalidPlan",
    "JunitReportInvalid",
    "KeyFileError",
    "LimitExceeded",
    "LinkEscapes",
    "NotFound",
    "PolicyError",
    "ProbeServiceError",
    "ReceiptInvalid",
    "SandboxUnavailable",
    "SettingsError",
    "StoreUnavailable",
    "UnsafePath",
    "UnstableWorkingTree",
]


class ProbeServiceError(Exception):
    """Root of every error the probe service raises on purpose."""

    #: A short machine-readable code, stable across releases, for JSON error frames.
    code = "error"


class InvalidInput(ProbeServiceError):
    """The request itself is wrong; retrying it unchanged fails the same way."""

    code = "invalid_input"


class InvalidPlan(InvalidInput):
    """A probe plan field is missing, malformed or outside its limits."""

    code = "invalid_plan"


class InvalidClaim(InvalidInput):
    """A claim, its evidence or one of its dependencies is malformed."""

    code = "invalid_claim"


class EvidenceMismatch(InvalidClaim):
    """A receipt ran elsewhere (another snapshot or plan) or says another outcome."""

    code = "evidence_mismatch"


class PolicyError(InvalidInput):
    """The policy file is missing, unsafe, malformed, or names no such policy."""

    code = "policy_error"


class SettingsError(InvalidInput):
    """An environment setting has a bad value, or is set under two names to different
    values; the message names the variable (probe_service/settings.py)."""

    code = "invalid_setting"


class UnsafePath(InvalidInput):
    """A path escapes its root, passes through a link, or is not a regular file."""

    code = "unsafe_path"


class LinkEscapes(UnsafePath):
    """A snapshot symlink is absolute or resolves outside the snapshot; ``path`` names it."""

    code = "link_escapes"

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        #: The link's path inside the snapshot.
        self.path = path


class JunitReportInvalid(InvalidInput):
    """A JUnit XML report a probe wrote is over its size limit, has a DOCTYPE or is malformed."""

    code = "junit_report_invalid"


class KeyFileError(InvalidInput):
    """A key file is missing, unsafe (permissions, link, location) or not an Ed25519 key."""

    code = "key_file_error"


class LimitExceeded(InvalidInput):
    """A documented size or count limit was crossed."""

    code = "limit_exceeded"


class NotFound(InvalidInput):
    """An id names nothing the store holds."""

    code = "not_found"


class AmbiguousId(InvalidInput):
    """An id prefix matches more than one stored id; the message names the field and lists
    (some of) the candidates."""

    code = "ambiguous_id"

    def __init__(
        self,
        kind: str,
        prefix: str,
        matches: int,
        *,
        field: str | None = None,
        candidates: Sequence[str] = (),
    ) -> None:
        listed = ", ".join(candidates) + (", …" if matches > len(candidates) else "")
        super().__init__(
            f"{field or kind}: {kind} id prefix {prefix!r} is ambiguous: it matches "
            f"{matches} ids" + (f" ({listed})" if candidates else "") + "; type more characters"
        )
        self.kind, self.prefix, self.matches = kind, prefix, matches
        self.field, self.candidates = field, tuple(candidates)


class Conflict(InvalidInput):
    """The request contradicts immutable state already stored."""

    code = "conflict"


class UnstableWorkingTree(ProbeServiceError):
    """The working tree kept changing while a snapshot was being captured."""

    code = "unstable_working_tree"


class InfrastructureError(ProbeServiceError):
    """A service the probe service depends on failed; the same request may succeed later."""

    code = "infrastructure"


class StoreUnavailable(InfrastructureError):
    """The database could not be reached, or failed mid-transaction."""

    code = "store_unavailable"


class BrokerUnavailable(InfrastructureError):
    """The queue broker could not be reached."""

    code = "broker_unavailable"


class SandboxUnavailable(ProbeServiceError):
    """A sandbox prerequisite is missing or failed verification; nothing was run."""

    code = "sandbox_unavailable"

    def __init__(self, message: str, reason: str = "sandbox_prerequisite_missing") -> None:
        super().__init__(message)
        #: The machine-readable ``inconclusive`` reason this failure maps to.
        self.reason = reason


class ReceiptInvalid(ProbeServiceError):
    """A receipt's content no longer matches its commitment."""

    code = "receipt_invalid"
