"""No silent waits: say on stderr when no worker has taken any run of a batch yet."""

from __future__ import annotations

import sys
import time
from typing import Annotated, TextIO

import typer

__all__ = ["NoWorkerNotice", "NoticeOption", "TimeoutOption"]

TimeoutOption = Annotated[
    float, typer.Option("--timeout", min=0, help="Seconds to wait for the runs to finish.")
]
NoticeOption = Annotated[
    float,
    typer.Option(
        "--notice-after", min=0, help="Seconds with no run taken by a worker before saying so."
    ),
]


class NoWorkerNotice:
    """A progress callback that writes one stderr line once no worker took a run in time.

    Written whether or not stderr is a terminal: CI logs are where silent waits hurt most.
    """

    def __init__(
        self, what: str, notice_after_s: float, timeout_s: float, stream: TextIO | None = None
    ) -> None:
        self.what, self.notice_after_s, self.timeout_s = what, notice_after_s, timeout_s
        self.stream = stream
        self.started = time.monotonic()
        self.said = False

    def __call__(self, counts: dict[str, int]) -> None:
        """Check the batch counts of one poll; say so once when nothing was taken yet."""
        taken = counts.get("running", 0) + counts.get("done", 0)
        waited = time.monotonic() - self.started
        if self.said or taken or waited < self.notice_after_s:
            return
        self.said = True
        stream = self.stream or sys.stderr
        stream.write(
            f"byte-probe: no worker has taken any run of {self.what} after {waited:.0f}s; "
            "is `byte-probe worker` running on this PROBE_REDIS_URL and namespace? "
            f"still waiting (up to {self.timeout_s:g}s)\n"
        )
        stream.flush()
