"""A closed pipe on stdout never changes a command's exit code.

``byte-probe run … | head -1``: once the reader has gone, writing raises ``EPIPE``
(``BrokenPipeError``) in the middle of printing, which used to end the command with an
error's code instead of its outcome's. ``quiet_broken_pipe`` puts a stream in front of
stdout that, at the first ``EPIPE``, points file descriptor 1 at ``/dev/null`` and drops
everything after, quietly; the command goes on to its own exit code (docs/ARCHITECTURE.md,
"CLI output").
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["PipeSafeStream", "quiet_broken_pipe"]


class PipeSafeStream:
    """``stream``, except that once its reader has gone every write and flush succeeds
    and is dropped."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        """Write ``text``; after an EPIPE, drop it."""
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._broke()
        return len(text)

    def flush(self) -> None:
        """Flush; after an EPIPE, do nothing."""
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._broke()

    def _broke(self) -> None:
        self.broken = True
        # The interpreter flushes stdout once more at exit: aim what is still buffered
        # at /dev/null, so that flush cannot fail (and print a warning) either.
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def quiet_broken_pipe() -> Iterator[PipeSafeStream]:
    """Run the body with stdout behind a ``PipeSafeStream``; restore it after."""
    real = sys.stdout
    safe = PipeSafeStream(real)
    sys.stdout = safe
    try:
        yield safe
    finally:
        sys.stdout = real
