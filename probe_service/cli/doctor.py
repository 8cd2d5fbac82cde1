"""``byte-probe doctor``: one line per prerequisite of the sandbox and the store, with its fix.

Checks what `make setup` installs and the sandbox needs (docs/ARCHITECTURE.md,
"Containment" and "Storage and deployment"); at most 40 lines, one per check.

The checks look below the operation table, so they live at the service layer
(``service/diagnostics.py``); the store is reached through a ``cli`` session like everywhere.
A failing check is a line of the report, never an error.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer

from probe_service.errors import ProbeServiceError
from probe_service.safe_text import untrusted
from probe_service.service.diagnostics import Check, check_groups, worker_defaults
from probe_service.settings import DATABASE_URL_ENV, Settings, read_settings

from .common import JsonOption, RootOption, console, emit_json, local_session

__all__ = ["doctor"]

#: The most lines `doctor` prints.
MAX_LINES = 40


def _store(root: Path, settings: Settings) -> list[Check]:
    kind = "postgresql" if settings.database_url else "embedded"
    try:
        with local_session(root, settings) as svc:
            svc.store  # noqa: B018 (opening the store is the check)
    except ProbeServiceError as exc:
        fix = f"check {DATABASE_URL_ENV} or --root; `byte-probe store migrate`"
        return [Check(f"store ({kind})", False, str(exc), fix)]
    return [Check(f"store ({kind})", True, "reachable")]


def run_checks(root: Path) -> list[Check]:
    """Every check, in order; a check that crashes is reported as failing, never raised.

    The settings are read first; when they are refused that is the one failing line."""
    try:
        settings = read_settings()
    except ProbeServiceError as exc:
        return [Check("settings", False, str(exc), "correct or unset the variable it names")]
    checks: list[Check] = []
    groups = check_groups(settings, store=lambda: _store(root, settings))
    for name, group in groups:
        try:
            checks.extend(group())
        except Exception as exc:
            checks.append(Check(name, False, f"check failed: {type(exc).__name__}: {exc}"))
    return checks[:MAX_LINES]


def doctor(
    root: RootOption = Path("."),
    json_out: JsonOption = False,
) -> None:
    """Check the sandbox prerequisites, the policy file, the store and Redis; exit 1 if any fail.

    Example: byte-probe doctor --json
    """
    checks = run_checks(root)
    if json_out:
        emit_json(
            {
                "ok": all(c.ok for c in checks),
                "checks": [asdict(c) for c in checks],
                # What `byte-probe worker` starts each process with unless told otherwise.
                "worker": worker_defaults(),
            }
        )
    else:
        for c in checks:
            fix = f" — fix: {c.fix}" if c.fix and not c.ok else ""
            line = f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {' '.join(c.detail.split())}{fix}"
            console.print(untrusted(line, style="" if c.ok else "red"), soft_wrap=True)
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)
