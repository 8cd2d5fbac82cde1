"""Run one probe through ``run_sandboxed`` and print its result as JSON.

The tests start this module under ``unshare --mount`` with a private
``/etc/hosts`` bind-mounted, so names resolve to test addresses for this run
only and the machine's own ``/etc/hosts`` is never written.
Usage: ``python -m tests.security.hosts_runner REQUEST.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from probe_service.policies import Policy
from probe_service.sandbox import locate_runtime, run_sandboxed


def main(request_path: Path) -> None:
    """Run the request's probe; print ``{"status", "reason", "stdout"}``."""
    request = json.loads(request_path.read_text(encoding="utf-8"))
    root = Path(request["root"])
    (root / "snapshot").mkdir()
    (root / "scratch").mkdir()
    result = run_sandboxed(
        environment=os.environ,
        policy=Policy.model_validate(request["policy"]),
        executable=request["executable"],
        args=request["args"],
        snapshot_dir=root / "snapshot",
        scratch_dir=root / "scratch",
        runtime=locate_runtime(),
    )
    output = {"status": result.status, "reason": result.reason, "detail": result.detail}
    output["stdout"] = result.stdout.decode("latin-1")
    print(json.dumps(output))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
