"""Per-phase timings: operational only, never part of the committed digest, shown safely."""

from __future__ import annotations

import io
import math

import pytest
from rich.console import Console

from probe_service.cli.results import print_receipt
from probe_service.errors import ReceiptInvalid
from probe_service.plans.phases import PHASES, PhaseClock, phase_seconds
from probe_service.plans.receipts import verify_receipt

from ..receipt_fields import committed_fields, operational_fields, receipt_of


class TestPhaseClock:
    def test_phases_come_out_in_run_order(self) -> None:
        """Phases are reported in the order a run passes through them, whatever the order
        they were measured in."""
        clock = PhaseClock(queued_seconds=2.0)
        clock.add("write", 0.5)
        clock.merge({"execute": 0.25, "canary": 0.125})
        assert list(clock.as_operational()) == ["queued", "canary", "execute", "write"]

    def test_unknown_phase_is_refused(self) -> None:
        """A phase outside the fixed list is a ValueError naming the phase."""
        with pytest.raises(ValueError, match="'upload'"):
            PhaseClock().add("upload", 1.0)

    def test_timing_counts_a_block_that_raises(self) -> None:
        """A block that raises still has its time recorded."""
        clock = PhaseClock()
        with pytest.raises(RuntimeError), clock.timing("materialize"):
            raise RuntimeError("boom")
        assert "materialize" in clock.as_operational()

    def test_negative_queue_time_is_clamped(self) -> None:
        """A clock skew between submitter and worker never yields a negative phase."""
        assert PhaseClock(queued_seconds=-3.0).as_operational() == {"queued": 0.0}


class TestReceiptPhases:
    def test_phases_do_not_change_the_committed_digest(self) -> None:
        """Two receipts that differ only in their phase timings have the same digest."""
        slow, fast = operational_fields(), operational_fields()
        slow["phases"] = dict.fromkeys(PHASES, 9.0)
        fast["phases"] = dict.fromkeys(PHASES, 0.001)
        first = receipt_of(committed_fields(), slow)
        second = receipt_of(committed_fields(), fast)
        assert first.receipt_sha256 == second.receipt_sha256
        assert verify_receipt(first) == verify_receipt(second)

    def test_unknown_and_negative_phases_are_dropped(self) -> None:
        """Unknown names and negative values never reach a reader."""
        operational = operational_fields()
        operational["phases"] = {"execute": 0.5, "\x1b[2Jhostile": 1.0, "launch": -1.0}
        receipt = receipt_of(committed_fields(), operational)
        assert phase_seconds(receipt) == {"execute": 0.5}

    @pytest.mark.parametrize("value", ["fast", True, None, [1]])
    def test_a_phase_that_is_not_a_number_is_refused(self, value: object) -> None:
        """A phase value that is not a JSON number makes no receipt; the refusal names it."""
        operational = {**operational_fields(), "phases": {"execute": 0.5, "canary": value}}
        with pytest.raises(ReceiptInvalid, match=r"operational\.phases\.canary"):
            receipt_of(committed_fields(), operational)

    def test_receipt_show_prints_phases_without_hostile_text(self) -> None:
        """The human view lists each phase and drops a name a writer of the store chose."""
        operational = operational_fields()
        operational["phases"] = {"canary": 0.25, "execute": 1.5, "\x1b]0;pwned\x07": 3.0}
        receipt = receipt_of(committed_fields(), operational)
        out = io.StringIO()
        print_receipt(Console(file=out, width=200, color_system=None), receipt, "receipt x")
        text = out.getvalue()
        assert "canary 0.250s, execute 1.500s" in text
        assert "\x1b" not in text
        assert "pwned" not in text

    def test_phase_values_are_finite(self) -> None:
        """A clock's phases are finite, non-negative numbers (JSON has no NaN)."""
        clock = PhaseClock(1.0)
        with clock.timing("evaluate"):
            pass
        assert all(math.isfinite(v) and v >= 0 for v in clock.as_operational().values())
