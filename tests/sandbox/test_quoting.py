"""Probe arguments reach the executable byte-for-byte through every shell layer."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probe_service.sandbox import SandboxRuntime, run_sandboxed

from .conftest import make_policy

pytestmark = pytest.mark.sandbox

HOSTILE = st.sampled_from(
    [
        "'",
        '"',
        "$(id)",
        "`id`",
        "\n",
        ";",
        "*",
        "?",
        "[a]",
        "-",
        "--",
        "\\",
        "!",
        "&",
        "|",
        "${HOME}",
        "~",
        "#",
        " ",
        "\t",
        "%s",
        "<",
        ">",
        "é",
        "\u2028",
    ]
)
ARGUMENT = st.lists(
    st.one_of(
        HOSTILE, st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
    ),
    max_size=4,
).map("".join)


# Each example is one sandboxed launch (about a second), so each carries up to 16
# arguments: 5 examples (about 6 arguments each) pass as many hostile arguments through the
# shell layers as the 12 examples of up to 4 (about 2.5 each) did, in under half the launches.
# Its six launches made it the costliest test of the quick loop, so it is `slow` (make test
# still runs it).
@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=st.lists(ARGUMENT, min_size=1, max_size=16))
@example(args=["-n", "$(touch /tmp/pwned)", "`id`", "a'b\"c", "x\ny", "; rm -rf /", "*", "-e"])
def test_arguments_survive_quoting(runtime: SandboxRuntime, args: list[str]) -> None:
    """printf '%s\\0' echoes every hostile argument back exactly, nothing is interpreted."""
    with tempfile.TemporaryDirectory() as root:
        Path(root).chmod(0o711)  # the probe's own uid must reach its snapshot and scratch
        (Path(root) / "snap").mkdir()
        (Path(root) / "scratch").mkdir()
        result = run_sandboxed(
            environment=os.environ,
            policy=make_policy(),
            executable="printf",
            args=["%s\\0", *args],
            snapshot_dir=Path(root) / "snap",
            scratch_dir=Path(root) / "scratch",
            runtime=runtime,
        )
    assert result.status == "ok", result
    assert result.stdout == b"".join(arg.encode() + b"\0" for arg in args)


def test_nul_in_an_argument_is_refused(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """An argument with a NUL byte cannot be passed to exec and is refused."""
    result = run_sandboxed(
        environment=os.environ,
        policy=make_policy(),
        executable="printf",
        args=["a\0b"],
        snapshot_dir=tmp_path,
        scratch_dir=tmp_path,
        runtime=runtime,
    )
    assert (result.status, result.reason) == ("inconclusive", "invalid_argument")
