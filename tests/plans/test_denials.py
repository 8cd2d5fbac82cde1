"""The possible_sandbox_denial hint: paths outside the grants, read from a failed probe."""

from __future__ import annotations

from probe_service.plans.denials import MAX_HINT_PATHS, Grants, sandbox_denial_hint

GRANTS = Grants(
    readable=("/usr", "/run/x/snapshot", "/run/x/scratch"), writable=("/run/x/scratch",)
)


def test_denied_reads_outside_the_grants_are_named() -> None:
    """Shell, Python and loader messages for ungranted paths are all recognised."""
    stderr = (
        b"cat: /root/secret: Permission denied\n"
        b"PermissionError: [Errno 13] Permission denied: '/home/dev/venv/lib/site.py'\n"
        b"python3: can't open file '/opt/tools/run.py': [Errno 2] No such file or directory\n"
    )
    hint = sandbox_denial_hint(stderr, GRANTS)
    assert hint is not None
    assert hint["reads"] == ["/root/secret", "/home/dev/venv/lib/site.py", "/opt/tools/run.py"]


def test_writes_outside_scratch_are_named() -> None:
    """A read-only-file-system error on the snapshot is a write outside the grants."""
    stderr = b"touch: cannot touch '/run/x/snapshot/out.txt': Read-only file system\n"
    hint = sandbox_denial_hint(stderr, GRANTS)
    assert hint is not None
    assert hint["writes"] == ["/run/x/snapshot/out.txt"]


def test_paths_inside_the_grants_give_no_hint() -> None:
    """A missing file inside the snapshot is the probe's own business, not a denial."""
    stderr = b"cat: /run/x/snapshot/missing.txt: No such file or directory\n"
    assert sandbox_denial_hint(stderr, GRANTS) is None


def test_ordinary_failures_give_no_hint() -> None:
    """An assertion failure mentions no denial."""
    assert sandbox_denial_hint(b"AssertionError: 3 != 4\n/usr/lib/x.py:3\n", GRANTS) is None


def test_the_hint_is_bounded() -> None:
    """However many denials, the hint names at most MAX_HINT_PATHS paths."""
    stderr = b"".join(b"cat: /root/f%d: Permission denied\n" % i for i in range(500))
    hint = sandbox_denial_hint(stderr, GRANTS)
    assert hint is not None
    assert len(hint["paths"]) == MAX_HINT_PATHS  # type: ignore[arg-type]
