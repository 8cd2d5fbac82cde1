"""The probe's timeout counts from the start marker; sandbox start-up has its own bound.

These run ``run_bounded`` on plain ``/bin/sh`` (the clock logic is the runner's, not the
sandbox's). Each case leaves a margin of many seconds between the right answer and the
wrong one, so a loaded machine cannot change the outcome.
"""

from __future__ import annotations

from pathlib import Path

from probe_service.sandbox.process import run_bounded

MARKER = b"start-marker-0123"


def _run(script: str, *, timeout: float, startup: float) -> tuple[str, str, float | None]:
    outcome = run_bounded(
        ["/bin/sh", "-c", script],
        env={"PATH": "/usr/bin:/bin"},
        cwd=Path("/"),
        timeout_seconds=timeout,
        budget=4096,
        skip_stdout_prefix=len(MARKER),
        start_marker=MARKER,
        startup_seconds=startup,
    )
    return outcome.status, outcome.start_detail, outcome.launch_seconds


class TestStartupBound:
    def test_slow_startup_is_not_charged_to_the_probe(self) -> None:
        """A start-up longer than the probe's timeout still lets a quick probe finish ok."""
        status, _, launch = _run(
            f"sleep 3; printf %s {MARKER.decode()}; exit 0", timeout=2, startup=60
        )
        assert status == "ok"
        assert launch is not None
        assert launch >= 3

    def test_startup_past_its_bound_is_start_timeout(self) -> None:
        """A sandbox that never prints its marker ends start_timeout, with its own detail."""
        status, detail, launch = _run(
            f"sleep 60; printf %s {MARKER.decode()}", timeout=120, startup=1
        )
        assert status == "start_timeout"
        assert "did not start the probe within 1 s" in detail
        assert launch is None

    def test_probe_time_counts_from_the_marker(self) -> None:
        """After the marker, the probe's own timeout applies and ends it as timeout."""
        status, detail, launch = _run(
            f"printf %s {MARKER.decode()}; sleep 60", timeout=1, startup=60
        )
        assert status == "timeout"
        assert detail == ""
        assert launch is not None
