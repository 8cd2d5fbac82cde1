"""The one recognizer of failures a run did not cause, and the rule that uses it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probe_service.plans.host_tables import HOST_TABLES, HostTableWatch, TableReading, read_table
from probe_service.plans.models import parse_plan
from probe_service.plans.oracle import CheckVerdict, decide_outcome
from probe_service.plans.refusals import (
    DENIED_SYSCALLS,
    MAX_REFUSALS,
    Refusal,
    RunFacts,
    recognize_refusals,
    refusal_reason,
)

from .conftest import plan_doc

FACTS = RunFacts(
    policy_id="pol",
    allowed_domains=(),
    readable=("/usr", "/etc/passwd", "/src"),
    writable=("/tmp/scr",),
    source="/src",
)
WITH_DOMAINS = RunFacts(**{**FACTS.__dict__, "allowed_domains": ("pypi.org", "github.com")})


def recognized(text: str, facts: RunFacts = FACTS) -> list[tuple[str, str | None]]:
    return [(r.operation, r.target) for r in recognize_refusals([text.encode()], facts)]


class TestWrites:
    @pytest.mark.parametrize(
        ("line", "target"),
        [
            ("OSError: [Errno 30] Read-only file system: 'out.txt'", "out.txt"),
            ("touch: cannot touch '/src/out': Read-only file system", "/src/out"),
            ("Error: EROFS: read-only file system, open '/src/a.json'", "/src/a.json"),
            ("open build/out.o: read-only file system", "build/out.o"),
            ("write failed: Read-only file system", None),
        ],
    )  # fmt: skip
    def test_a_write_to_the_read_only_source_is_recognized(
        self, line: str, target: str | None
    ) -> None:
        """Every read-only-file-system error is the sandbox's: C, Python, Node and Go forms."""
        (refusal,) = recognize_refusals([line.encode()], FACTS)
        assert (refusal.operation, refusal.target, refusal.kind) == (
            "write",
            target,
            "sandbox_denied",
        )
        assert refusal.fix == "the source is read-only: write under $BYTE_PROBE_SCRATCH"

    def test_a_write_elsewhere_names_scratch(self) -> None:
        """A read-only system directory gets the scratch fix, not the source's."""
        (refusal,) = recognize_refusals(
            [b"mkdir: cannot create '/usr/x': Read-only file system"], FACTS
        )
        assert refusal.fix == "only scratch is writable: write under $BYTE_PROBE_SCRATCH"

    @pytest.mark.parametrize(
        "line",
        [
            "  /usr/lib/python3/dist-packages/_pytest/cacheprovider.py:487: PytestCacheWarning: "
            "could not create cache path /src/.pytest_cache/v/cache/nodeids: [Errno 30] "
            "Read-only file system: '/src/pytest-cache-files-y7kadrzu'",
            "OSError: [Errno 30] Read-only file system: '/src/pkg/__pycache__/m.cpython-311.pyc'",
            "error: Read-only file system (os error 30): /src/.ruff_cache/0.5.0",
            "Read-only file system: '/src/.mypy_cache/3.11/cache.db'",
            "HypothesisWarning: [Errno 30] Read-only file system: '/src/.hypothesis'",
        ],
    )
    def test_a_tools_own_cache_is_no_refusal(self, line: str) -> None:
        """A cache a tool does without (pytest's, bytecode, mypy, ruff, Hypothesis) explains
        no failure: a failing suite that printed such a warning can still refute."""
        assert recognized(line) == []

    def test_a_cache_warning_beside_a_real_refusal_keeps_the_refusal(self) -> None:
        """Only the cache's own line is passed over; a real write refusal still counts."""
        text = (
            "PytestCacheWarning: could not create cache path /src/.pytest_cache/v: "
            "[Errno 30] Read-only file system: '/src/pytest-cache-files-1'\n"
            "OSError: [Errno 30] Read-only file system: 'results.csv'"
        )
        assert recognized(text) == [("write", "results.csv")]


class TestReads:
    def test_a_path_outside_the_grants_is_a_read_refusal(self) -> None:
        """The root deny shows as a missing or unreadable path outside the grants."""
        text = (
            "cat: /root/secret: No such file or directory\nopen /home/u/.netrc: permission denied"
        )
        assert recognized(text) == [("read", "/root/secret"), ("read", "/home/u/.netrc")]

    def test_a_missing_path_inside_the_grants_is_the_probes_business(self) -> None:
        """Snapshot, scratch and system paths that are missing are ordinary failures."""
        text = (
            "FileNotFoundError: [Errno 2] No such file or directory: '/src/gone'\n"
            "chown: changing ownership of '/tmp/scr/f': Operation not permitted\n"
            "ls: cannot access '/usr/share/nothing': No such file or directory\n"
            "sh: 1: ./run.sh: Permission denied\n"
        )
        assert recognized(text) == []


class TestNetwork:
    @pytest.mark.parametrize(
        ("line", "operation", "target"),
        [
            ("gaierror: [Errno -3] Temporary failure in name resolution", "name_lookup", None),
            ("curl: (6) Could not resolve host: example.com", "name_lookup", "example.com"),
            ("Error: getaddrinfo EAI_AGAIN npmjs.org", "name_lookup", "npmjs.org"),
            ("dial tcp: lookup go.dev on 127.0.0.53:53: no such host", "name_lookup", "go.dev"),
            ("OSError: [Errno 101] Network is unreachable", "connect", None),
            ("Error: connect ENETUNREACH 93.184.215.14:80", "connect", "93.184.215.14:80"),
        ],
    )  # fmt: skip
    def test_no_allowed_domain_means_no_network(
        self, line: str, operation: str, target: str | None
    ) -> None:
        """Under a policy without domains every lookup and connection failure is refused."""
        (refusal,) = recognize_refusals([line.encode()], FACTS)
        assert (refusal.operation, refusal.target) == (operation, target)
        assert refusal.fix == "no domain is allowed by policy pol: the probe has no network"

    def test_the_proxy_refusing_a_domain_names_the_allowed_ones(self) -> None:
        """The runtime's allowlist refusal (403 from the proxy) says what is allowed."""
        line = b"urllib.error.URLError: <urlopen error Tunnel connection failed: 403 Forbidden>"
        (refusal,) = recognize_refusals([line], WITH_DOMAINS)
        assert refusal.operation == "connect"
        assert "allows only pypi.org, github.com" in refusal.fix

    def test_the_network_guard_names_the_destination(self) -> None:
        """The guard's own report names the destination and why it was refused."""
        line = b"byte-probe network guard: refused: pypi.org:8080 (port 8080 is not allowed)"
        (refusal,) = recognize_refusals([line], WITH_DOMAINS)
        assert (refusal.operation, refusal.target) == ("connect", "pypi.org:8080")
        assert "port 8080 is not allowed" in refusal.fix

    def test_a_refused_loopback_connection_is_the_probes_business(self) -> None:
        """Nothing listening on the run's own loopback is not a refusal by the rules."""
        assert recognized("ConnectionRefusedError: [Errno 111] Connection refused") == []

    def test_a_real_servers_403_is_not_the_proxy(self) -> None:
        """An allowed server answering 403 is the server's answer, not the sandbox's."""
        assert recognized("urllib.error.HTTPError: HTTP Error 403: Forbidden", WITH_DOMAINS) == []


class TestSeccomp:
    def test_a_unix_socket_refused_by_seccomp(self) -> None:
        """EPERM from socket() (Python's traceback form) is the seccomp filter's."""
        text = (
            '  File "/usr/lib/python3.11/socket.py", line 232, in __init__\n'
            "    _socket.socket.__init__(self, family, type, proto, fileno)\n"
            "PermissionError: [Errno 1] Operation not permitted\n"
        )
        assert recognized(text) == [("socket", "AF_UNIX")]

    @pytest.mark.parametrize("syscall", DENIED_SYSCALLS)
    def test_each_denied_system_call(self, syscall: str) -> None:
        """A denied AIO call, reported as ENOSYS or EPERM, is ``sandbox_denied``."""
        assert recognized(f"{syscall}: Function not implemented") == [("syscall", syscall)]
        assert recognized(f"fio: {syscall} failed: EPERM") == [("syscall", syscall)]

    def test_the_names_are_the_sandbox_filters(self) -> None:
        """The recognizer reads the names the sandbox's seccomp filter denies: one list."""
        from probe_service.sandbox import seccomp

        assert DENIED_SYSCALLS is seccomp.DENIED_SYSCALLS
        assert {"io_setup", "io_submit", "io_getevents", "io_destroy"} <= set(DENIED_SYSCALLS)


class TestHostResources:
    @pytest.mark.parametrize(
        ("text", "table"),
        [
            ("OSError: [Errno 23] Too many open files in system", "fs.file-nr"),
            ("accept: ENFILE", "fs.file-nr"),
            ("io_setup: Resource temporarily unavailable", "fs.aio-nr"),
            ("openpty failed:\nOSError: [Errno 28] No space left on device", "kernel.pty.nr"),
        ],
    )
    def test_a_full_host_table_in_the_output_is_host_resource(self, text: str, table: str) -> None:
        """ENFILE, EAGAIN from io_setup and a full pty table are the host's, not the probe's."""
        (refusal,) = recognize_refusals([text.encode()], FACTS)
        assert (refusal.kind, refusal.target, refusal.evidence) == (
            "host_resource",
            table,
            "output",
        )

    def test_the_per_process_limit_is_not_the_host_table(self) -> None:
        """EMFILE (the run's own RLIMIT_NOFILE) is not ENFILE."""
        assert recognized("OSError: [Errno 24] Too many open files") == []

    def test_a_full_disk_without_a_terminal_is_not_the_pty_table(self) -> None:
        """ENOSPC alone is scratch's business (the runner's ``scratch_limit``), also beside
        words that merely contain ``pty``."""
        assert recognized("OSError: [Errno 28] No space left on device") == []
        assert recognized("writing the empty file:\nNo space left on device") == []


class TestDecoys:
    def test_words_that_contain_a_name_are_not_the_name(self) -> None:
        """``websocket`` is no socket, ``aio_setup_queue`` no denied call."""
        assert recognized("websocket closed: Operation not permitted") == []
        assert recognized("my_io_setup_helper: Function not implemented") == []

    def test_ordinary_test_failures_are_not_refusals(self) -> None:
        """Assertion messages, a missing dependency and a refused loopback connection."""
        text = (
            "AssertionError: expected 'Permission denied' to be raised\n"
            "ModuleNotFoundError: No module named 'requests'\n"
            "npm ERR! Failed to resolve dependency tree\n"
            "redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379.\n"
        )
        assert recognized(text) == []

    def test_a_table_the_runner_saw_full_comes_first(self) -> None:
        """The runner's own observation leads, named with its numbers."""
        full = TableReading(HOST_TABLES[1], 65500, 65536)
        facts = RunFacts(**{**FACTS.__dict__, "full_tables": (full,)})
        first, second = recognize_refusals([b"touch: 'x': Read-only file system"], facts)
        assert (first.evidence, first.target) == ("runner", "fs.aio-nr 65500 of 65536")
        assert refusal_reason((first, second)) == "host_resource"


class TestBounds:
    def test_at_most_max_refusals_each_named_once(self) -> None:
        """Thousands of denials give MAX_REFUSALS entries; a repeated one counts once."""
        text = "".join(f"cat: /root/f{i}: Permission denied\n" for i in range(5000))
        assert len(recognized(text)) == MAX_REFUSALS
        assert len(recognized("cat: /root/f: Permission denied\n" * 100)) == 1

    def test_a_huge_line_is_read_bounded(self) -> None:
        """A megabyte-long line is cut before any pattern runs; targets stay short."""
        text = "touch: cannot touch '" + "a" * (1 << 20) + "': Read-only file system"
        (refusal,) = recognize_refusals([text.encode()], FACTS)
        assert refusal.operation == "write"
        assert refusal.target is None or len(refusal.target) <= 512


VERDICTS = st.builds(CheckVerdict, passed=st.booleans(), detail=st.just("d"), error=st.booleans())
REFUSAL = Refusal(kind="sandbox_denied", operation="write", target="x", evidence="output", fix="f")


class TestDecision:
    @given(
        verdict=VERDICTS,
        failure_refutes=st.booleans(),
        source=st.sampled_from(["user_requirement", "model_inferred"]),
    )
    def test_refusals_only_ever_move_a_failure_to_inconclusive(
        self, verdict: CheckVerdict, failure_refutes: bool, source: str
    ) -> None:
        """With refusals the outcome is the same as without, or inconclusive for a failure."""
        reference = None if source == "model_inferred" else "r"
        doc = plan_doc(failure_refutes=failure_refutes)
        doc["oracle"]["source"] = source
        if reference is None:
            doc["oracle"].pop("reference", None)
        plan = parse_plan(doc)
        without = decide_outcome(plan, None, verdict)
        with_refusal = decide_outcome(plan, None, verdict, (REFUSAL,))
        if verdict.passed or verdict.error:
            assert with_refusal == without
        else:
            assert (with_refusal.outcome, with_refusal.reason) == ("inconclusive", "sandbox_denied")
            assert with_refusal.refusals == (REFUSAL,)

    def test_a_runner_reason_keeps_its_own_name(self) -> None:
        """A preflight failure or a limit kill is not renamed by refusals."""
        plan = parse_plan(plan_doc(failure_refutes=True))
        decision = decide_outcome(plan, "preflight_failed", None, (REFUSAL,))
        assert (decision.outcome, decision.reason) == ("inconclusive", "preflight_failed")


class TestHostTableWatch:
    def _proc(self, root: Path, file_nr: int, aio_nr: int, pty_nr: int) -> None:
        (root / "fs").mkdir(parents=True, exist_ok=True)
        (root / "kernel" / "pty").mkdir(parents=True, exist_ok=True)
        (root / "fs" / "file-nr").write_text(f"{file_nr}\t0\t10000\n")
        (root / "fs" / "file-max").write_text("10000\n")
        (root / "fs" / "aio-nr").write_text(f"{aio_nr}\n")
        (root / "fs" / "aio-max-nr").write_text("65536\n")
        (root / "kernel" / "pty" / "nr").write_text(f"{pty_nr}\n")
        (root / "kernel" / "pty" / "max").write_text("4096\n")

    def test_a_table_full_at_any_sample_is_reported_at_its_fullest(self, tmp_path: Path) -> None:
        """A table full in the middle of the run counts, though it emptied again."""
        self._proc(tmp_path, 100, 0, 1)
        with HostTableWatch(root=tmp_path, interval=3600) as watch:
            self._proc(tmp_path, 9990, 64000, 4095)
            watch.sample()
            self._proc(tmp_path, 100, 0, 1)
        assert sorted(r.describe() for r in watch.full()) == [
            "fs.aio-nr 64000 of 65536",
            "fs.file-nr 9990 of 10000",
            "kernel.pty.nr 4095 of 4096",
        ]

    def test_ordinary_use_is_not_full(self, tmp_path: Path) -> None:
        """Tables far from their limits give nothing; unreadable ones are skipped."""
        self._proc(tmp_path, 5000, 60000, 100)
        (tmp_path / "kernel" / "pty" / "max").unlink()
        with HostTableWatch(root=tmp_path, interval=3600) as watch:
            pass
        assert watch.full() == ()

    def test_the_real_tables_are_read(self) -> None:
        """On this host every table reads, with a positive limit (whether one is full
        depends on every other process, so that is not asserted)."""
        for table in HOST_TABLES:
            reading = read_table(table, Path("/proc/sys"))
            assert reading is not None, table.name
            assert reading.limit > 0
