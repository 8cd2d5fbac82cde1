"""F17: arguments the plan limits allowed but the launch path could not carry.

Before: 31 arguments of 4 KiB ended ``sandbox_failed`` (E2BIG: srt hands the whole
command to the shell as one argument, capped at 128 KiB). Now the plan's arguments are
bounded by their quoted launch size (``sandbox/argsize.py``): the largest allowed plan
launches through the real sandbox, one byte more is refused at validation, and the
runner refuses anything over it as ``invalid_argument``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probe_service.errors import InvalidPlan
from probe_service.plans import parse_plan
from probe_service.policies import Policy
from probe_service.sandbox import SandboxRuntime, run_sandboxed
from probe_service.sandbox.argsize import MAX_LAUNCH_ARG_BYTES, launch_arg_bytes
from probe_service.store import Store

from .. import calls as service
from .attacks import RunProbe, leftovers, plan_for

pytestmark = pytest.mark.sandbox

ARG_BYTES = 4096


def _plain_args(total: int) -> list[str]:
    """Plain arguments of at most 4 KiB whose launch size is exactly ``total``."""
    args: list[str] = []
    while total > ARG_BYTES + 1:
        args.append("a" * ARG_BYTES)
        total -= ARG_BYTES + 1
    args.append("a" * (total - 1))
    return args


def _fill(prefix: list[str], unit: str) -> list[str]:
    """``prefix`` then ``unit`` arguments, as many as the launch limit holds."""
    args = list(prefix)
    while launch_arg_bytes([*args, unit]) <= MAX_LAUNCH_ARG_BYTES:
        args.append(unit)
    return args


#: Content whose quoting grows least, most (single quotes), and both ways (`'!`): each
#: filled to the limit and checked intact by the probe itself.
QUOTES = "'" * 8
BANGS = "'!" * 4
AT_THE_LIMIT = {
    "plain": ("true", _plain_args(MAX_LAUNCH_ARG_BYTES)),
    "quotes": (
        "sh",
        _fill(["-c", f'for a; do [ "$a" = "{QUOTES}" ] || exit 3; done', "sh"], QUOTES),
    ),
    "quote-bang": (
        "sh",
        _fill(["-c", f'for a; do [ "$a" = "{BANGS}" ] || exit 3; done', "sh"], BANGS),
    ),
}


@pytest.mark.parametrize("content", sorted(AT_THE_LIMIT))
def test_plan_at_the_launch_limit_launches(
    run_probe: RunProbe, small_snapshot: str, run_tmp: Path, content: str
) -> None:
    """Arguments filled to the launch limit run through the real sandbox, intact."""
    executable, args = AT_THE_LIMIT[content]
    assert MAX_LAUNCH_ARG_BYTES - 3000 < launch_arg_bytes(args) <= MAX_LAUNCH_ARG_BYTES
    result = run_probe(small_snapshot, executable, args)
    assert (result.status, result.exit_code, result.outcome) == ("ok", 0, "supports")
    assert leftovers(run_tmp) == []


def test_plain_plan_is_exactly_at_the_limit() -> None:
    """The plain plan above uses the whole limit, so one byte more is the next test."""
    assert launch_arg_bytes(AT_THE_LIMIT["plain"][1]) == MAX_LAUNCH_ARG_BYTES


class TestRefusals:
    def test_one_byte_more_refused_at_validation(self, small_snapshot: str) -> None:
        """The largest plan plus one byte is refused, naming `args` and the limit."""
        args = _plain_args(MAX_LAUNCH_ARG_BYTES + 1)
        with pytest.raises(InvalidPlan, match=rf"^args: .*{MAX_LAUNCH_ARG_BYTES}-byte launch"):
            parse_plan(plan_for(small_snapshot, "true", args))

    def test_red_team_plan_refused_at_validation(
        self, sqlite_store: Store, small_snapshot: str
    ) -> None:
        """31 arguments of 4 KiB (within the per-argument limits) are refused before storage."""
        with pytest.raises(InvalidPlan, match="launch limit"):
            service.probe_plan(sqlite_store, plan_for(small_snapshot, "true", ["a" * 4096] * 31))

    def test_runner_refuses_over_the_limit(
        self, runtime: SandboxRuntime, tmp_path: Path, run_tmp: Path
    ) -> None:
        """Called directly, the runner ends `invalid_argument`, never `sandbox_failed`."""
        (tmp_path / "snap").mkdir()
        (tmp_path / "scratch").mkdir()
        policy = Policy.model_validate(
            {
                "id": "direct",
                "allowed_executables": ["true"],
                "timeout_seconds": 20,
                "max_output_bytes": 1000,
                "allowed_domains": [],
                "environment": [],
            }
        )
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="true",
            args=["a" * ARG_BYTES] * 31,
            snapshot_dir=tmp_path / "snap",
            scratch_dir=tmp_path / "scratch",
            runtime=runtime,
        )
        assert (result.status, result.reason) == ("inconclusive", "invalid_argument")
        assert leftovers(run_tmp) == []
