"""The possible_sandbox_denial hint: the refused paths, from the refusals the verdict uses."""

from __future__ import annotations

from probe_service.plans.denials import MAX_HINT_PATHS, denial_hint, run_refusals
from probe_service.plans.oracle import CheckVerdict
from probe_service.plans.refusals import RunFacts, recognize_refusals
from probe_service.sandbox import SandboxResult

FACTS = RunFacts(
    policy_id="p",
    allowed_domains=(),
    readable=("/usr", "/run/x/snapshot"),
    writable=("/run/x/scratch",),
    source="/run/x/snapshot",
)


def hint_of(output: bytes) -> dict[str, object] | None:
    return denial_hint(recognize_refusals([output], FACTS))


def test_denied_reads_outside_the_grants_are_named() -> None:
    """Shell, Python and loader messages for ungranted paths are all recognised."""
    stderr = (
        b"cat: /root/secret: Permission denied\n"
        b"PermissionError: [Errno 13] Permission denied: '/home/dev/venv/lib/site.py'\n"
        b"python3: can't open file '/opt/tools/run.py': [Errno 2] No such file or directory\n"
    )
    hint = hint_of(stderr)
    assert hint is not None
    assert hint["reads"] == ["/root/secret", "/home/dev/venv/lib/site.py", "/opt/tools/run.py"]


def test_writes_outside_scratch_are_named() -> None:
    """A read-only-file-system error on the snapshot is a write outside the grants."""
    hint = hint_of(b"touch: cannot touch '/run/x/snapshot/out.txt': Read-only file system\n")
    assert hint is not None
    assert hint["writes"] == ["/run/x/snapshot/out.txt"]


def test_paths_inside_the_grants_give_no_hint() -> None:
    """A missing file inside the snapshot or scratch is the probe's own business."""
    assert hint_of(b"cat: /run/x/snapshot/missing.txt: No such file or directory\n") is None
    assert hint_of(b"cat: /run/x/scratch/out/missing.txt: No such file or directory\n") is None


def test_ordinary_failures_give_no_hint() -> None:
    """An assertion failure mentions no denial."""
    assert hint_of(b"AssertionError: 3 != 4\n/usr/lib/x.py:3\n") is None


def test_the_hint_is_bounded() -> None:
    """However many denials, the hint names at most MAX_HINT_PATHS paths."""
    hint = hint_of(b"".join(b"cat: /root/f%d: Permission denied\n" % i for i in range(500)))
    assert hint is not None
    assert len(hint["paths"]) == MAX_HINT_PATHS  # type: ignore[arg-type]


def _ok(stdout: bytes, stderr: bytes, exit_code: int) -> SandboxResult:
    return SandboxResult(status="ok", exit_code=exit_code, stdout=stdout, stderr=stderr)


def test_a_passing_check_has_neither_refusals_nor_hint() -> None:
    """Whatever a passing probe printed (and however it exited), nothing is recognized."""
    result = _ok(b"", b"cat: /root/secret: Permission denied\n", 1)
    refused = run_refusals(result, CheckVerdict(passed=True, detail="stdout"), FACTS)
    assert (refused.refusals, refused.hint) == ((), None)


def test_a_failing_check_reads_both_streams() -> None:
    """Test runners report failures on stdout: both streams are read."""
    result = _ok(b"E   OSError: [Errno 30] Read-only file system: 'x.db'\n", b"", 1)
    refused = run_refusals(result, CheckVerdict(passed=False, detail="exit code 1"), FACTS)
    assert [r.target for r in refused.refusals] == ["x.db"]
    assert refused.hint == {"paths": ["x.db"], "reads": [], "writes": ["x.db"]}
