"""The one exception tree of the probe service.

Every refusal the service makes is one of these, so a face needs a single
``except ProbeServiceError`` to turn it into an exit code, an error frame or a page. Each
class carries what every face shows (click's ``ClickException.exit_code``, carried
further): ``code``, machine-readable, stable across releases and the same on every face;
``exit_code``, the CLI's; ``status``, the web view's HTTP status. A subclass inherits all
three unless it says otherwise: exit 3 and HTTP 400, but NotFound is 404,
UnstableWorkingTree exits 4, InfrastructureError exits 4 with 503, Aborted exits 130 and
InternalError exits 70 with 500 (README, "Errors and exit codes", lists every class).

Branches are grouped by what the caller does next. Each line names a class and its code;
a class defined in another module names it (``tests/test_errors.py`` checks this drawing
against the classes, so it cannot go stale)::

    ProbeServiceError                      error
    ├── InvalidInput                       invalid_input: fix the request, do not retry
    │   ├── UsageError                     usage: the CLI's form of a bad flag or argument
    │   ├── InvalidPlan                    invalid_plan
    │   ├── InvalidClaim                   invalid_claim
    │   │   ├── EvidenceMismatch           evidence_mismatch
    │   │   └── NotRerunnable              not_rerunnable: nothing of the claim runs again
    │   ├── PolicyError                    policy_error
    │   │   ├── ExecutableNotAllowed       executable_not_allowed (policies/executables.py)
    │   │   ├── ToolchainUnsafe            toolchain_unsafe (policies/toolchain_roots.py)
    │   │   └── ToolchainChanged           toolchain_changed (toolchains/resolve.py)
    │   ├── SettingsError                  invalid_setting: a bad or twice-set variable
    │   ├── UnsafePath                     unsafe_path
    │   │   ├── LinkEscapes                link_escapes
    │   │   ├── ExecutableUnresolved       executable_unresolved (policies/executables.py)
    │   │   └── ExecutableChanged          executable_changed (policies/executables.py)
    │   ├── KeyFileError                   key_file_error
    │   ├── JunitReportInvalid             junit_report_invalid
    │   ├── ToolchainBuildFailed           toolchain_build_failed (toolchains/create.py)
    │   ├── LimitExceeded                  limit_exceeded
    │   ├── BundleInvalid                  bundle_invalid: a bundle refused, naming the object
    │   ├── NotFound                       not_found
    │   │   └── BlobMissing                blob_missing (claims/views.py)
    │   ├── AmbiguousId                    ambiguous_id
    │   ├── NotPermitted                   not_permitted: the clearing rules refuse this actor
    │   └── Conflict                       conflict: contradicts stored, immutable state
    │       ├── TurnConflict                   turn_conflict: the turn already ended
    │       ├── LeaseHeld                      lease_held: another owner leases the workspace
    │       ├── CursorExpired                  cursor_expired: events below the gc floor are gone
    │       └── GcLocked                       gc_locked: another gc holds the store's gc lock
    ├── OSFailure                          os_error: the CLI's form of an OSError
    ├── UnstableWorkingTree                unstable_working_tree: capture again later
    ├── InfrastructureError                infrastructure: retry later
    │   ├── StoreUnavailable               store_unavailable
    │   ├── BrokerUnavailable              broker_unavailable
    │   └── ServiceUnavailable             service_unavailable: the local service's socket
    ├── SandboxUnavailable                 sandbox_unavailable: fix the host, nothing ran
    │   ├── LauncherUnavailable            launcher_unavailable (sandbox/helper.py)
    │   └── Refused                        launch_refused (sandbox/prepare.py)
    ├── ReceiptInvalid                     receipt_invalid
    ├── ConfirmationHandedOff              confirmation_handed_off (plans/confirm.py)
    ├── Aborted                            aborted: the CLI's input ended at a prompt
    └── InternalError                      internal: a face's form of a bug

Three never reach a face: LauncherUnavailable (the runner falls back to the CLI path),
Refused (the runner ends the run ``inconclusive`` with its reason) and
ConfirmationHandedOff (control flow, like dramatiq's ``Retry``: the queue's worker takes it).
UsageError, OSFailure, Aborted and InternalError are made only by a face, from what is not
a refusal of ours.

Errors from libraries underneath (SQLAlchemy, Redis and dramatiq, subprocess, pydantic)
are translated once, at the edge that calls them, with ``raise Mapped(...) from exc``; a
pydantic ``ValidationError`` becomes a message through ``validation_message``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "EXIT_INFRASTRUCTURE",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "Aborted",
    "AmbiguousId",
    "BrokerUnavailable",
    "BundleInvalid",
    "Conflict",
    "CursorExpired",
    "EvidenceMismatch",
    "GcLocked",
    "InfrastructureError",
    "InternalError",
    "InvalidClaim",
    "InvalidInput",
    "InvalidPlan",
    "JunitReportInvalid",
    "KeyFileError",
    "LeaseHeld",
    "LimitExceeded",
    "LinkEscapes",
    "NotFound",
    "NotPermitted",
    "NotRerunnable",
    "OSFailure",
    "PolicyError",
    "ProbeServiceError",
    "ReceiptInvalid",
    "SandboxUnavailable",
    "ServiceUnavailable",
    "SettingsError",
    "StoreUnavailable",
    "TurnConflict",
    "UnsafePath",
    "UnstableWorkingTree",
    "UsageError",
    "validation_message",
]

#: Exit code of a usage or input error (bad flag, bad file, unknown id, refused path).
EXIT_INPUT = 3
#: Exit code when the store, broker or working tree was unavailable; retrying may help.
EXIT_INFRASTRUCTURE = 4
#: Exit code of an unexpected internal error (EX_SOFTWARE).
EXIT_INTERNAL = 70


class ProbeServiceError(Exception):
    """Root of every error the probe service raises on purpose."""

    #: A short machine-readable code, stable across releases, for JSON error frames.
    code: ClassVar[str] = "error"
    #: The CLI's exit code for this error.
    exit_code: ClassVar[int] = EXIT_INPUT
    #: The web view's HTTP status for this error.
    status: ClassVar[int] = 400


class InvalidInput(ProbeServiceError):
    """The request itself is wrong; retrying it unchanged fails the same way."""

    code = "invalid_input"


class UsageError(InvalidInput):
    """The command line is wrong (a bad flag, a missing argument): click's refusal, as ours."""

    code = "usage"


class InvalidPlan(InvalidInput):
    """A probe plan field is missing, malformed or outside its limits."""

    code = "invalid_plan"


class InvalidClaim(InvalidInput):
    """A claim, its evidence or one of its dependencies is malformed."""

    code = "invalid_claim"


class EvidenceMismatch(InvalidClaim):
    """A receipt ran elsewhere (another snapshot or plan) or says another outcome."""

    code = "evidence_mismatch"


class NotRerunnable(InvalidClaim):
    """A recheck named an obligation whose claim rests on no evidence the service can run
    again (no receipt that carried its outcome, no declared plan): a person or an agent
    decides it."""

    code = "not_rerunnable"


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


class BundleInvalid(InvalidInput):
    """A bundle file, or an object in it, does not verify: the message names the member
    (docs/ARCHITECTURE.md, "Bundles"). Nothing was written."""

    code = "bundle_invalid"


class NotFound(InvalidInput):
    """An id names nothing the store holds."""

    code = "not_found"
    status = 404


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


class NotPermitted(InvalidInput):
    """The actor may not do this: a clearing rule of the policy file (docs/ARCHITECTURE.md,
    "Principals and clearing") or the rule that agents never accept a risk refuses it."""

    code = "not_permitted"
    status = 403


class Conflict(InvalidInput):
    """The request contradicts immutable state already stored."""

    code = "conflict"


class TurnConflict(Conflict):
    """A turn's answer was already recorded, by this call's twin or an earlier one: of two
    concurrent ``turn_end`` calls exactly one wins."""

    code = "turn_conflict"


class LeaseHeld(Conflict):
    """The workspace is leased by another owner (the message names it and the expiry)."""

    code = "lease_held"


class CursorExpired(Conflict):
    """An events cursor lies below the floor ``gc`` compacted the log to: the events it
    would resume after are gone, and the reader is told so rather than skipped forward
    (docs/ARCHITECTURE.md, "Retention and gc")."""

    code = "cursor_expired"


class GcLocked(Conflict):
    """Another ``gc`` holds the store's gc lock; the message names its holder. Nothing
    was removed."""

    code = "gc_locked"


class OSFailure(ProbeServiceError):
    """An operating-system call failed (a file that cannot be read, a full disk): the CLI's
    form of an ``OSError``, naming the file."""

    code = "os_error"


class UnstableWorkingTree(ProbeServiceError):
    """The working tree kept changing while a snapshot was being captured."""

    code = "unstable_working_tree"
    exit_code = EXIT_INFRASTRUCTURE


class InfrastructureError(ProbeServiceError):
    """A service the probe service depends on failed; the same request may succeed later."""

    code = "infrastructure"
    exit_code = EXIT_INFRASTRUCTURE
    status = 503


class StoreUnavailable(InfrastructureError):
    """The database could not be reached, or failed mid-transaction."""

    code = "store_unavailable"


class BrokerUnavailable(InfrastructureError):
    """The queue broker could not be reached."""

    code = "broker_unavailable"


class ServiceUnavailable(InfrastructureError):
    """The local service (``byte-probe serve``) did not answer on its socket."""

    code = "service_unavailable"


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


class Aborted(ProbeServiceError):
    """The CLI's input ended while a command was reading it."""

    code = "aborted"
    exit_code = 130


class InternalError(ProbeServiceError):
    """A bug, not a refusal: the form a face gives an unexpected exception (its message
    names only the type; the trace goes to stderr)."""

    code = "internal"
    exit_code = EXIT_INTERNAL
    status = 500


def validation_message(exc: ValidationError, whole: str) -> str:
    """The first error of ``exc`` as ``field.path: message``, ``whole`` naming the field
    when the error is about the whole value; the one wording every face prints."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or whole
    return f"{where}: {str(first['msg']).removeprefix('Value error, ')}"
