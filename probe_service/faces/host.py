"""``byte-probe host``: the operation table over NDJSON on stdin and stdout.

One session is opened before the first line is read and serves every request (nothing is
imported or opened per request). Short operations are answered in line by the reader;
operations the table marks ``long_running`` go to a pool of ``MAX_LONG_RUNNING`` threads
so they never hold up short ones, and their responses may come out of order (matched by
id). EOF ends the host once every accepted request is answered. See docs/ARCHITECTURE.md,
"Faces".
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import IO, Any

from ..errors import LimitExceeded, ProbeServiceError
from ..service import ProbeService
from ..service.catalog import listings
from .frames import (
    MAX_LINE_BYTES,
    HostRequest,
    Refused,
    decode_request,
    encode_frame,
    error_frame,
    internal_frame,
    ok_frame,
    oversized,
)

__all__ = [
    "MAX_LONG_RUNNING",
    "MAX_LONG_WAITING",
    "NdjsonHost",
    "claimed_stdio",
    "read_lines",
]

log = logging.getLogger("probe_service.host")

#: Long operations (a sandboxed run, a capture) executing at once.
MAX_LONG_RUNNING = 2
#: Long operations accepted beyond those, waiting for a slot; more are refused.
MAX_LONG_WAITING = 64
#: Bytes read at a time while skipping the rest of an oversized line.
SKIP_CHUNK = 64 * 1024


def read_lines(stream: IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """Each line of ``stream`` (at most ``limit`` bytes plus its newline), or None for a
    longer line, which is skipped in ``SKIP_CHUNK`` reads and never held whole."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = stream.readline(SKIP_CHUNK)
        yield None


class NdjsonHost:
    """Answers request lines through one session; writes only response lines to ``out``."""

    def __init__(
        self,
        svc: ProbeService,
        out: IO[bytes],
        *,
        long_running: int = MAX_LONG_RUNNING,
        long_waiting: int = MAX_LONG_WAITING,
    ) -> None:
        self.svc = svc
        self._out = out
        self._write_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(long_running, thread_name_prefix="byte-probe-long")
        self._slots = threading.BoundedSemaphore(long_running + long_waiting)
        self._limit = long_running + long_waiting
        self._out_broken = False
        self._long_ops = frozenset(op.name for op in listings(svc.interface) if op.long_running)

    def serve(self, stream: IO[bytes]) -> None:
        """Answer every line of ``stream`` until EOF, then wait for the long operations."""
        try:
            for line in read_lines(stream):
                self.handle_line(line)
        finally:
            self._pool.shutdown(wait=True)

    def handle_line(self, line: bytes | None) -> None:
        """Answer one line (None: an oversized one): in line, or later from the pool."""
        decoded = oversized() if line is None else decode_request(line)
        if not (isinstance(decoded, HostRequest) and decoded.op in self._long_ops):
            self._write(self.answer(decoded))
        elif self._slots.acquire(blocking=False):
            self._pool.submit(self._answer_long, decoded)
        else:
            busy = LimitExceeded(f"op: {self._limit} long operations are already in flight")
            self._write(self.answer(Refused(decoded.id, busy)))

    def answer(self, request: HostRequest | Refused) -> dict[str, Any]:
        """The response to one request: the one place a ProbeServiceError becomes an
        error frame, and a bug becomes code ``internal`` (its trace goes to stderr)."""
        try:
            if isinstance(request, Refused):
                raise request.error
            return ok_frame(request.id, self.svc.call(request.op, request.params))
        except ProbeServiceError as exc:
            return error_frame(request.id, exc)
        except Exception as exc:
            log.exception("internal error answering request %r", request.id)
            return internal_frame(request.id, exc)

    def _answer_long(self, request: HostRequest) -> None:
        try:
            self._write(self.answer(request))
        finally:
            self._slots.release()

    def _write(self, frame: dict[str, Any]) -> None:
        try:
            data = encode_frame(frame)
        except (TypeError, ValueError) as exc:  # a result JSON cannot carry (NaN)
            log.exception("response to %r is not JSON", frame.get("id"))
            data = encode_frame(internal_frame(frame.get("id"), exc))
        with self._write_lock:
            if self._out_broken:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except OSError as exc:  # the client closed its end; keep draining requests
                self._out_broken = True
                log.warning("stdout closed (%s); later responses are dropped", exc)


@contextmanager
def claimed_stdio() -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """Take the process's stdin and stdout for the protocol, restored on exit.

    While held, fd 0 reads /dev/null and fd 1 writes to stderr (and ``sys.stdout`` is
    ``sys.stderr``), so a library's print, a warning or a child process can neither eat
    a request nor write a line that is not a response.
    """
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_stdout = sys.stdout
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    sys.stdout = sys.stderr
    reader = os.fdopen(wire_in, "rb", closefd=False)
    writer = os.fdopen(wire_out, "wb", closefd=False)
    try:
        yield reader, writer
    finally:
        sys.stdout = saved_stdout
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        reader.close()
        writer.close()
        os.close(wire_in)
        os.close(wire_out)
