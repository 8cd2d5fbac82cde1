"""Launch lanes: at most N runs of a process inside the sandbox at once (docs/ARCHITECTURE.md,
"Pipelined worker"; the ordering through a worker is tests/queue/test_pipeline.py)."""

from __future__ import annotations

import pytest

from probe_service.errors import InvalidInput
from probe_service.plans.lanes import LaunchLanes


class TestLaunchLanes:
    def test_zero_lanes_are_refused(self) -> None:
        """Lanes that nothing could hold are refused, naming the count."""
        with pytest.raises(InvalidInput, match="lanes: 0 is below 1"):
            LaunchLanes(0)

    def test_a_lane_is_given_back_when_the_launch_raises(self) -> None:
        """A launch that raises frees its lane for the next run."""
        lanes = LaunchLanes(1)
        with pytest.raises(RuntimeError), lanes.hold():
            raise RuntimeError("launch failed")
        with lanes.hold():
            assert lanes.busy == 1
        assert (lanes.busy, lanes.entered, lanes.peak) == (0, 2, 1)
