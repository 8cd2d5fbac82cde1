"""Count the tests that launch the real sandbox, and so need root.

Run as ``pytest -p tests.sandbox_census [--sandbox-census=FILE]``.

Every launch through the real runtime makes a run directory (``byte-probe-run-…``) or a
canary directory (``byte-probe-canary-…``) with ``tempfile.mkdtemp``, in the test's own
process or in any process it starts (a CLI, a host, a worker farm), or is handed its run
slot's kept one (``SlotResources.ready``; a process's first run in a slot makes it). In
this process the census wraps ``mkdtemp`` (a test may point ``tempfile`` elsewhere) and
``ready``; for the processes it starts, an inotify watch on the temporary directory sees
each one being made. A test during
whose setup, call or
teardown one appeared launched the real sandbox, and so does every test using a module-
or session-wide fixture whose setup launched. Tests of the stub sandbox make none.
The session gets a temporary directory of its own (``TMPDIR``, inherited by the processes
it starts; short, for the runtime's sockets live below it), so runs of other users of the
machine are not counted. At the end of the
session one line says how many, and ``--sandbox-census=FILE`` writes their node ids.
"""

from __future__ import annotations

import ctypes
import os
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.rundirs import RUN_DIR_PREFIX
from probe_service.sandbox.limits import RunCgroup
from probe_service.sandbox.results import LimitsApplied
from probe_service.sandbox.slot_resources import SlotResources

_IN_CREATE = 0x00000100
_IN_Q_OVERFLOW = 0x00004000
_EVENT = struct.Struct("iIII")
_PREFIXES = (RUN_DIR_PREFIX.encode(), b"byte-probe-canary-")


class _Watch:
    """An inotify watch on the temporary directory for directories made in it."""

    def __init__(self, directory: str) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if self._libc.inotify_add_watch(self._fd, directory.encode(), _IN_CREATE) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")

    def launched(self) -> bool | None:
        """Whether a run or canary directory was made since the last call (None: the
        kernel's queue overflowed, so it cannot say)."""
        seen: bool | None = False
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return seen
            offset = 0
            while offset < len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & _IN_Q_OVERFLOW:
                    seen = None
                elif seen is not None and name.startswith(_PREFIXES):
                    seen = True


class _Census:
    def __init__(self, out: str | None) -> None:
        self.watch = _Watch(tempfile.gettempdir())
        self.made_here = False
        original = tempfile.mkdtemp

        def mkdtemp(
            suffix: str | None = None, prefix: str | None = None, dir: str | None = None
        ) -> str:
            if prefix is not None and prefix.encode().startswith(_PREFIXES):
                self.made_here = True
            return original(suffix, prefix, dir)

        tempfile.mkdtemp = mkdtemp  # type: ignore[assignment]
        ready = SlotResources.ready

        def handed(resources: SlotResources, limits: LimitsApplied) -> tuple[Path, RunCgroup]:
            self.made_here = True
            return ready(resources, limits)

        SlotResources.ready = handed  # type: ignore[method-assign,assignment]
        self.out = out
        self.launched: list[str] = []
        self.unknown: list[str] = []
        self.total = 0
        #: Fixtures wider than one test whose setup launched: every test using one needs
        #: the sandbox too, though only the first of them saw the launch.
        self.launching_fixtures: set[tuple[str, str]] = set()
        self.seen: bool | None = False

    def _drain(self) -> bool | None:
        seen = self.watch.launched()
        if seen is not None and self.made_here:
            seen, self.made_here = True, False
        if seen is None or self.seen is None:
            self.seen = None
        else:
            self.seen = self.seen or seen
        return seen

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object]) -> Iterator[None]:
        if fixturedef.scope == "function":
            yield
            return
        self._drain()
        yield
        if self._drain():
            self.launching_fixtures.add((fixturedef.argname, fixturedef.baseid))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.watch.launched()  # whatever a previous test's leftovers made is not this test's
        self.seen, self.made_here = False, False
        yield
        self.total += 1
        self._drain()
        uses = {
            (name, base)
            for name, base in self.launching_fixtures
            if name in getattr(item, "fixturenames", ()) and item.nodeid.startswith(base)
        }
        if self.seen is None:
            self.unknown.append(item.nodeid)
        elif self.seen or uses:
            self.launched.append(item.nodeid)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        share = 100 * len(self.launched) / self.total if self.total else 0.0
        terminalreporter.write_line(
            f"sandbox census: {len(self.launched)} of {self.total} tests launched the real "
            f"sandbox or use a fixture that did ({share:.1f}%); "
            f"{len(self.unknown)} unknown (inotify overflow)"
        )
        if self.out:
            Path(self.out).write_text("".join(f"{n}\n" for n in self.launched))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--sandbox-census", default=None, help="write the launching tests here")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # Tests' own tmp_path stays where pytest puts it: a longer path would push the runtime's
    # socket paths below a test's directory past their 108-byte limit.
    config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    private = tempfile.mkdtemp(prefix="sc-", dir="/tmp")
    # Probe uids pass through it to the directories tests make in it, as through /tmp.
    os.chmod(private, 0o711)  # noqa: S103 - search only, as /tmp gives it
    os.environ["TMPDIR"] = private
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    config.pluginmanager.register(_Census(config.getoption("--sandbox-census")), "sandbox-census")
