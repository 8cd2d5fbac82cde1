"""``byte-probe host``: NDJSON framing, limits, concurrency and the stdout discipline
(docs/ARCHITECTURE.md, "Faces")."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probe_service.faces.frames import MAX_LINE_BYTES
from probe_service.faces.host import NdjsonHost, read_lines
from probe_service.service import ProbeService, operations

from .blocking import DEADLOCK_GUARD_S, BlockingService
from .drivers import cli_argv, open_host


def run_host(root: Path, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """Run ``byte-probe host`` on ``stdin`` until EOF."""
    return subprocess.run(
        cli_argv("host", "--root", str(root)),
        input=stdin,
        capture_output=True,
        timeout=DEADLOCK_GUARD_S,
        check=False,
    )


def frames(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


class TestCommand:
    def test_capabilities_is_one_line_listing_every_host_operation(self, tmp_path: Path) -> None:
        """echo '{"id":1,"op":"capabilities"}' | byte-probe host prints exactly one line."""
        done = run_host(tmp_path, b'{"id":1,"op":"capabilities"}\n')
        assert done.returncode == 0, done.stderr
        assert done.stdout.count(b"\n") == 1
        (frame,) = frames(done.stdout)
        assert frame["id"] == 1
        assert frame["ok"] is True
        listed = [op["name"] for op in frame["result"]["operations"]]
        assert listed == [op.name for op in operations("host")]
        assert frame["result"]["interface"] == "host"

    def test_bad_lines_get_error_frames_and_the_host_keeps_serving(self, tmp_path: Path) -> None:
        """Malformed JSON, a non-object, a missing or unknown op, bad params and an unknown
        request field each get one error frame; the next request is still answered."""
        lines = [
            b"{not json",
            b"[1, 2]",
            b'{"id": 3}',
            b'{"id": 4, "op": "no_such_op"}',
            b'{"id": 5, "op": "probe_get", "params": {"plan_id": "x"}}',
            b'{"id": 6, "op": "probe_get", "params": [1]}',
            b'{"id": 7, "op": "knowledge_events", "policy": {}}',
            b'{"id": true, "op": "capabilities"}',
            b"\xff\xfe",
            b'{"id": 10, "op": "knowledge_events"}',
        ]
        done = run_host(tmp_path, b"\n".join(lines) + b"\n")
        assert done.returncode == 0, done.stderr
        got = frames(done.stdout)
        assert [f["id"] for f in got] == [None, None, 3, 4, 5, 6, 7, None, None, 10]
        assert all(f["ok"] is False for f in got[:-1])
        assert {f["error"]["code"] for f in got[:-1]} == {"invalid_input"}
        messages = [f["error"]["message"] for f in got[:-1]]
        for message, field in zip(
            messages,
            ["line", "line", "op", "op", "plan_id", "params", "policy", "id", "line"],
            strict=True,
        ):
            assert field in message
        assert got[-1] == {"id": 10, "ok": True, "result": {"events": [], "next_after": 0}}

    def test_oversized_line_is_refused_and_the_next_served(self, tmp_path: Path) -> None:
        """A line over the 1 MiB limit gets limit_exceeded (id null); the host goes on."""
        big = b'{"id": 1, "op": "capabilities", "params": {"x": "' + b"a" * MAX_LINE_BYTES + b'"}}'
        done = run_host(tmp_path, big + b'\n{"id": 2, "op": "knowledge_events"}\n')
        first, second = frames(done.stdout)
        assert first["id"] is None
        assert first["error"]["code"] == "limit_exceeded"
        assert str(MAX_LINE_BYTES) in first["error"]["message"]
        assert second["id"] == 2
        assert second["ok"] is True

    def test_admin_operation_is_unknown_on_the_host(self, tmp_path: Path) -> None:
        """policy_check (it reads a path) is not an operation of the host."""
        done = run_host(
            tmp_path, b'{"id": 1, "op": "policy_check", "params": {"file": "/etc/shadow"}}\n'
        )
        (frame,) = frames(done.stdout)
        assert frame["error"]["code"] == "invalid_input"
        assert "unknown operation 'policy_check'" in frame["error"]["message"]
        assert b"root:" not in done.stdout + done.stderr

    def test_policy_smuggled_as_a_param_is_refused(self, tmp_path: Path) -> None:
        """probe_run names its policy by id only; a policy body in params is refused."""
        params = {"plan_id": "a" * 64, "policy_id": "p", "policy": {"allowed_executables": ["sh"]}}
        request = {"id": 1, "op": "probe_run", "params": params}
        done = run_host(tmp_path, json.dumps(request).encode() + b"\n")
        (frame,) = frames(done.stdout)
        assert frame["error"]["code"] == "invalid_input"
        assert "policy: Extra inputs are not permitted" in frame["error"]["message"]

    def test_eof_without_requests_ends_cleanly(self, tmp_path: Path) -> None:
        """EOF at once: exit 0, nothing on stdout."""
        done = run_host(tmp_path, b"")
        assert (done.returncode, done.stdout) == (0, b"")

    def test_one_session_serves_many_requests(self, tmp_path: Path) -> None:
        """Requests on one running host are answered in turn by the same process."""
        with open_host(tmp_path) as host:
            pids = {host.process.pid}
            for _ in range(3):
                assert host.request("knowledge_events")["ok"] is True
            pids.add(host.process.pid)
        assert len(pids) == 1


class _Recorder(io.RawIOBase):
    """Collects response lines; releases the blocked operation on a chosen id."""

    def __init__(self, release_on: int | None) -> None:
        self.lines: list[dict[str, Any]] = []
        self.release_on = release_on

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        frame = json.loads(bytes(data))
        self.lines.append(frame)
        if frame["id"] == self.release_on:
            BlockingService.release.set()
        return len(data)


@pytest.fixture
def blocking(tmp_path: Path) -> Any:
    BlockingService.reset()
    svc = BlockingService.open(tmp_path, interface="host")
    yield svc
    BlockingService.release.set()
    svc.close()


def _lines(*requests: dict[str, Any]) -> io.BytesIO:
    return io.BytesIO(b"".join(json.dumps(r).encode() + b"\n" for r in requests))


def test_host_serves_a_postgresql_store_from_the_environment(tmp_path: Path, pg_url: str) -> None:
    """With PROBE_DATABASE_URL set the host opens that store: a capture (on the pool) and
    a read in line both land in PostgreSQL."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n", encoding="utf-8")
    lines = [
        {"id": 1, "op": "snapshot_capture", "params": {"root": str(repo)}},
        {"id": 2, "op": "capabilities"},
    ]
    done = subprocess.run(
        cli_argv("host", "--root", str(tmp_path)),
        input=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
        capture_output=True,
        timeout=DEADLOCK_GUARD_S,
        check=False,
        env={**os.environ, "PROBE_DATABASE_URL": pg_url},
    )
    by_id = {f["id"]: f for f in frames(done.stdout)}
    assert by_id[1]["ok"] is True, by_id[1]
    assert by_id[2]["ok"] is True
    assert not (tmp_path / ".zyte").exists()  # the embedded store was never opened
    with ProbeService.open(tmp_path, database_url=pg_url) as svc:
        snapshot = svc.call("snapshot_get", {"snapshot_id": by_id[1]["result"]["snapshot_id"]})
    assert [entry["path"] for entry in snapshot["entries"]] == ["a.py"]


class TestConcurrency:
    def test_long_operation_does_not_block_short_ones(self, blocking: ProbeService) -> None:
        """A capture still running does not hold up a later short request; its response
        comes after, matched by id, and EOF waits for it."""
        out = _Recorder(release_on=2)
        host = NdjsonHost(blocking, out)  # type: ignore[arg-type]
        host.serve(
            _lines(
                {"id": 1, "op": "snapshot_capture", "params": {"root": "/nonexistent"}},
                {"id": 2, "op": "knowledge_events"},
            )
        )
        assert [f["id"] for f in out.lines] == [2, 1]
        assert out.lines[1] == {"id": 1, "ok": True, "result": {"captured": True}}

    def test_long_operations_beyond_the_bound_are_refused(self, blocking: ProbeService) -> None:
        """With one slot and no waiting room, a second long request is refused at once."""
        out = _Recorder(release_on=3)
        host = NdjsonHost(blocking, out, long_running=1, long_waiting=0)  # type: ignore[arg-type]
        capture = {"op": "snapshot_capture", "params": {"root": "/x"}}
        host.serve(_lines({"id": 1, **capture}, {"id": 2, **capture}, {"id": 3, "op": "gate"}))
        by_id = {f["id"]: f for f in out.lines}
        assert by_id[2]["error"]["code"] == "limit_exceeded"
        assert by_id[3]["error"]["code"] == "invalid_input"  # gate without snapshot_id
        assert by_id[1]["ok"] is True

    def test_a_bug_is_code_internal_without_its_trace(
        self, blocking: ProbeService, capfd: pytest.CaptureFixture[str]
    ) -> None:
        """An unexpected exception answers code internal, names only its type, and the
        host keeps serving; the trace goes to the log (stderr)."""
        out = _Recorder(release_on=None)
        brief = {"snapshot_id": "a" * 64, "scope": "s", "text": "t"}
        NdjsonHost(blocking, out).serve(  # type: ignore[arg-type]
            _lines({"id": 1, "op": "knowledge_brief", "params": brief}, {"id": 2, "op": "gate"})
        )
        first, second = out.lines
        assert first["error"] == {
            "code": "internal",
            "message": "internal error (RuntimeError); the host's stderr has the details",
        }
        assert "/etc/x" not in json.dumps(first)
        assert second["id"] == 2


class TestFraming:
    def test_read_lines_never_holds_an_oversized_line(self) -> None:
        """A line over the limit is skipped in bounded reads and reported as None."""
        reads: list[int] = []

        class Counting(io.BytesIO):
            def readline(self, size: int | None = -1) -> bytes:
                reads.append(len(line := super().readline(size)))
                return line

        stream = Counting(b"ok\n" + b"x" * 100_000 + b"\nlast")
        assert list(read_lines(stream, limit=10)) == [b"ok\n", None, b"last"]
        assert max(reads) <= 64 * 1024

    def test_claimed_stdio_keeps_stray_output_off_the_wire(self, tmp_path: Path) -> None:
        """Inside the claim a print, a write to fd 1 and a child's output go to stderr;
        only what the host writes reaches the real stdout."""
        code = (
            "import os, subprocess, sys\n"
            "from probe_service.faces.host import claimed_stdio\n"
            "with claimed_stdio() as (wire_in, wire_out):\n"
            "    print('stray print'); os.write(1, b'stray fd write\\n')\n"
            "    subprocess.run(['echo', 'stray child'], check=True)\n"
            "    wire_out.write(wire_in.readline()); wire_out.flush()\n"
            "print('after, restored')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            input=b"response\n",
            capture_output=True,
            timeout=DEADLOCK_GUARD_S,
            check=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert done.stdout == b"response\nafter, restored\n"
        for stray in (b"stray print", b"stray fd write", b"stray child"):
            assert stray in done.stderr
