"""The workspace lease (docs/ARCHITECTURE.md, "The agent's turn"): take, refuse, expire,
release, renew, with an injected clock; and through the table, where another turn's
captures are refused naming the holder. Each test tries to break one promise."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import LeaseHeld, NotFound, ProbeServiceError, UnsafePath
from probe_service.service import ProbeService
from probe_service.turns.lease import (
    LEASE_FILE,
    MAX_LEASE,
    LeaseHolder,
    lease_check,
    lease_release,
    lease_renew,
    lease_take,
    read_lease,
)

from ..claims.helpers import WorkTree
from .test_turns import begin, check, record_claim

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
ALICE = LeaseHolder(user="alice", pid=4242, host="laptop", face="mcp")
BOB = LeaseHolder(user="bob", pid=77, host="laptop", face="host")
TURN_A = "trn_" + "a" * 32
TURN_B = "trn_" + "b" * 32
#: A bound on waiting at the barrier, so a broken test fails instead of hanging.
BARRIER_BOUND_S = 120


@pytest.fixture
def root(tmp_path: Path) -> str:
    path = tmp_path / "work"
    (path / "src").mkdir(parents=True)
    return str(path)


class TestTake:
    def test_a_taken_lease_is_a_file_naming_its_owner(self, root: str) -> None:
        """The lease file holds the turn, the holder and the expiry."""
        lease, fresh = lease_take(root, TURN_A, ALICE, T0, 5 * MINUTE)
        assert fresh
        assert read_lease(root) == lease
        assert (lease.owner, lease.holder.user, lease.expires_at) == (
            TURN_A,
            "alice",
            (T0 + 5 * MINUTE).isoformat(timespec="microseconds"),
        )

    def test_another_owner_is_refused_naming_the_holder(self, root: str) -> None:
        """Bob's turn cannot take Alice's unexpired lease; the message names her turn,
        user, process and expiry, and the lease is unchanged."""
        lease, _ = lease_take(root, TURN_A, ALICE, T0, 5 * MINUTE)
        with pytest.raises(LeaseHeld) as refused:
            lease_take(root, TURN_B, BOB, T0 + 4 * MINUTE)
        message = str(refused.value)
        assert refused.value.code == "lease_held"
        for named in (TURN_A, "user alice", "pid 4242", lease.expires_at):
            assert named in message
        assert read_lease(root) == lease

    def test_its_owner_renews_it_keeping_when_it_was_taken(self, root: str) -> None:
        """Taking again (a re-dispatch) is the heartbeat: a later expiry, same taken_at."""
        first, _ = lease_take(root, TURN_A, ALICE, T0, 5 * MINUTE)
        again, fresh = lease_take(root, TURN_A, ALICE, T0 + 4 * MINUTE, 5 * MINUTE)
        assert not fresh
        assert again.taken_at == first.taken_at
        assert again.expires_at == (T0 + 9 * MINUTE).isoformat(timespec="microseconds")

    def test_an_expired_lease_is_taken_over(self, root: str) -> None:
        """At its expiry the lease is void: another owner takes it."""
        lease_take(root, TURN_A, ALICE, T0, 5 * MINUTE)
        lease, fresh = lease_take(root, TURN_B, BOB, T0 + 5 * MINUTE)
        assert (lease.owner, fresh) == (TURN_B, True)

    def test_no_lease_lasts_longer_than_the_bound(self, root: str) -> None:
        """A lease asked for a day lasts MAX_LEASE."""
        lease, _ = lease_take(root, TURN_A, ALICE, T0, timedelta(days=1))
        assert lease.expires_at == (T0 + MAX_LEASE).isoformat(timespec="microseconds")

    def test_of_two_takers_at_once_exactly_one_wins(self, root: str) -> None:
        """Two owners released together from a barrier: one lease, one LeaseHeld."""
        barrier = threading.Barrier(2, timeout=BARRIER_BOUND_S)
        outcomes: list[object] = []

        def take(owner: str, holder: LeaseHolder) -> None:
            barrier.wait()
            try:
                outcomes.append(lease_take(root, owner, holder, T0)[0].owner)
            except LeaseHeld as exc:
                outcomes.append(exc)

        threads = [
            threading.Thread(target=take, args=args) for args in ((TURN_A, ALICE), (TURN_B, BOB))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [o for o in outcomes if isinstance(o, str)]
        assert len(winners) == 1
        assert len([o for o in outcomes if isinstance(o, LeaseHeld)]) == 1
        lease = read_lease(root)
        assert lease is not None
        assert lease.owner == winners[0]

    def test_the_lease_file_is_written_under_the_exclusive_lock(
        self, root: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """While a lease is written, no other taker can hold the lock: the read and the
        write are one step for every cooperating client."""
        from probe_service.turns import lease as lease_module

        written = lease_module._write
        seen: list[bool] = []

        def write_checking(state: Path, lease: object) -> None:
            fd = os.open(state / "lease.lock", os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append(False)  # the lock was free: the write is not protected
            except BlockingIOError:
                seen.append(True)
            finally:
                os.close(fd)
            written(state, lease)  # type: ignore[arg-type]

        monkeypatch.setattr(lease_module, "_write", write_checking)
        lease_take(root, TURN_A, ALICE, T0)
        lease_take(root, TURN_A, ALICE, T0 + MINUTE)
        assert seen == [True, True]


class TestReleaseAndRenew:
    def test_release_frees_it_for_another_owner(self, root: str) -> None:
        """After its owner releases it, another owner takes it at once."""
        lease_take(root, TURN_A, ALICE, T0)
        assert lease_release(root, TURN_A, T0 + MINUTE)
        assert read_lease(root) is None
        assert lease_take(root, TURN_B, BOB, T0 + MINUTE)[0].owner == TURN_B

    def test_only_its_owner_releases_it_and_twice_is_harmless(self, root: str) -> None:
        """Bob cannot release Alice's lease; Alice's second release answers False."""
        lease_take(root, TURN_A, ALICE, T0)
        with pytest.raises(LeaseHeld, match="only its turn releases it"):
            lease_release(root, TURN_B, T0 + MINUTE)
        assert lease_release(root, TURN_A, T0 + MINUTE)
        assert not lease_release(root, TURN_A, T0 + MINUTE)

    def test_renew_extends_and_an_expired_lease_cannot_be_renewed(self, root: str) -> None:
        """The heartbeat moves the expiry; another owner cannot renew it; after expiry there
        is nothing to renew."""
        lease_take(root, TURN_A, ALICE, T0, 5 * MINUTE)
        renewed = lease_renew(root, TURN_A, ALICE, T0 + 4 * MINUTE, 5 * MINUTE)
        assert renewed.expires_at == (T0 + 9 * MINUTE).isoformat(timespec="microseconds")
        with pytest.raises(LeaseHeld):
            lease_renew(root, TURN_B, BOB, T0 + 5 * MINUTE)
        with pytest.raises(NotFound, match="holds no lease"):
            lease_renew(root, TURN_A, ALICE, T0 + 9 * MINUTE)


class TestCheck:
    def test_captures_by_others_are_refused_below_the_root_too(self, root: str) -> None:
        """Another turn and a capture outside any turn are refused, for the root and a
        directory below it; the owner's own capture is not."""
        lease_take(root, TURN_A, ALICE, T0)
        lease_check(root, TURN_A, T0 + MINUTE)
        for path in (root, str(Path(root) / "src")):
            with pytest.raises(LeaseHeld, match=f"turn {TURN_B} may not capture"):
                lease_check(path, TURN_B, T0 + MINUTE)
            with pytest.raises(LeaseHeld, match="a capture outside a turn"):
                lease_check(path, None, T0 + MINUTE)

    def test_an_expired_lease_holds_nothing(self, root: str) -> None:
        """Past its expiry the lease refuses no capture."""
        lease_take(root, TURN_A, ALICE, T0, 5 * MINUTE)
        lease_check(root, None, T0 + 5 * MINUTE)

    def test_a_lease_planted_far_ahead_is_void(self, root: str) -> None:
        """A lease file expiring further ahead than any lease is taken for (planted in a
        checkout, say) cannot hold the workspace for ever."""
        lease, _ = lease_take(root, TURN_A, ALICE, T0)
        planted = lease.model_copy(update={"expires_at": "2099-01-01T00:00:00+00:00"})
        (Path(root) / ".zyte" / LEASE_FILE).write_text(json.dumps(planted.model_dump()))
        lease_check(root, None, T0)
        assert lease_take(root, TURN_B, BOB, T0)[0].owner == TURN_B

    def test_a_linked_lease_file_is_refused(self, root: str, tmp_path: Path) -> None:
        """A lease file that is a symbolic link is never followed."""
        elsewhere = tmp_path / "elsewhere.json"
        lease, _ = lease_take(root, TURN_A, ALICE, T0)
        elsewhere.write_text(json.dumps(lease.model_dump()))
        path = Path(root) / ".zyte" / LEASE_FILE
        path.unlink()
        path.symlink_to(elsewhere)
        with pytest.raises(UnsafePath, match="lease file"):
            lease_check(root, None, T0)

    def test_a_file_that_is_not_a_lease_is_refused(self, root: str) -> None:
        """Garbage in the lease file is refused by name, not taken for no lease."""
        lease_take(root, TURN_A, ALICE, T0)
        (Path(root) / ".zyte" / LEASE_FILE).write_text('{"owner": 1}')
        with pytest.raises(UnsafePath, match="not a lease file"):
            lease_check(root, None, T0)


def error_of(call: Any) -> ProbeServiceError:
    with pytest.raises(ProbeServiceError) as refused:
        call()
    return refused.value


class TestThroughTheTable:
    def test_a_leased_check_holds_off_other_turns_and_captures_until_released(
        self, svc: ProbeService, work: WorkTree
    ) -> None:
        """dispatch_check(lease=True) answers the lease; another turn_begin and a plain
        snapshot_capture are refused naming the holder; the owner's capture is not;
        after lease_release both go through."""
        record_claim(svc, work)
        turn = begin(svc, work)["turn_id"]
        decided = svc.call(
            "dispatch_check", {"turn": turn, "tool": "Bash", "lease": True, "lease_seconds": 60}
        )
        assert (decided["verdict"], decided["lease"]["owner"]) == ("allow", turn)
        refused = error_of(lambda: begin(svc, work))
        assert (refused.code, turn in str(refused)) == ("lease_held", True)
        refused = error_of(lambda: svc.call("snapshot_capture", {"root": str(work.root)}))
        assert refused.code == "lease_held"
        svc.call("snapshot_capture", {"root": str(work.root), "turn": turn[:12]})
        assert check(svc, turn)["verdict"] == "allow"  # the owner's own check
        assert svc.call("lease_release", {"turn": turn})["released"] is True
        assert svc.call("lease_release", {"turn": turn})["released"] is False
        begin(svc, work)

    def test_a_block_gives_back_the_lease_it_took(self, svc: ProbeService, work: WorkTree) -> None:
        """A stale plan is blocked and holds nothing: another turn may begin."""
        record_claim(svc, work)
        turn = begin(svc, work)["turn_id"]
        work.write("src/parse.py", "def parse(text):\n    return []\n")
        decided = svc.call("dispatch_check", {"turn": turn, "tool": "Bash", "lease": True})
        assert (decided["verdict"], decided["lease"]) == ("block", None)
        begin(svc, work)

    def test_turn_end_releases_the_turns_lease(self, svc: ProbeService, work: WorkTree) -> None:
        """The turn's end ends its lease; the renew heartbeat then finds nothing."""
        turn = begin(svc, work)["turn_id"]
        svc.call("dispatch_check", {"turn": turn, "tool": "Bash", "lease": True})
        renewed = svc.call("lease_renew", {"turn": turn, "lease_seconds": 120})
        assert renewed["owner"] == turn
        ended = svc.call("turn_end", {"turn": turn, "answer": "it splits on commas"})
        assert ended["lease_released"] is True
        assert error_of(lambda: svc.call("lease_renew", {"turn": turn})).code == "not_found"
        begin(svc, work)

    def test_a_lease_of_another_turn_is_refused_on_dispatch(
        self, svc: ProbeService, work: WorkTree
    ) -> None:
        """Two turns on one tree: the second's leased check names the first's lease."""
        first = begin(svc, work)["turn_id"]
        second = begin(svc, work)["turn_id"]
        svc.call("dispatch_check", {"turn": first, "tool": "Bash", "lease": True})
        refused = error_of(
            lambda: svc.call("dispatch_check", {"turn": second, "tool": "Bash", "lease": True})
        )
        assert refused.code == "lease_held"
        assert first in str(refused)
        assert read_lease(str(work.root)) is not None
