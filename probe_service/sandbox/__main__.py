"""``python -m probe_service.sandbox``: say which containment mechanism is in use here.

``make setup`` runs it, so a machine whose kernel does not enforce the limits
is reported (and setup fails) before any test or probe runs.
"""

from __future__ import annotations

import sys

from probe_service.sandbox.selfcheck import describe_mechanism


def main() -> int:
    """Print one line per mechanism; return 1 if the limits could not be verified."""
    report = describe_mechanism()
    for line in report:
        print(f"sandbox: {line}")
    return 1 if "NOT verified" in report[-1] else 0


if __name__ == "__main__":
    sys.exit(main())
