"""``byte-probe serve``: the host protocol on a unix socket, the caller from the kernel
(docs/ARCHITECTURE.md, "Local service"). A real ``serve`` process as root; clients as
root and as uid 65534 (a forked child that dropped to it), through the raw socket, the
hook and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import Conflict, ServiceUnavailable, UnsafePath
from probe_service.faces.claude_code import answer_hook, default_opener
from probe_service.faces.frames import MAX_LINE_BYTES
from probe_service.faces.serve import LocalService, bind_socket, peer_of
from probe_service.faces.serve_client import ServiceClient, error_from_frame
from probe_service.principals import user_name
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store

from ..conftest import seed_state
from .drivers import cli_argv, open_mcp

NOBODY = 65534
SCOPE = "payments"
SESSION = "0f5c6a4e-8d2f-4b1c-9a4e-0f1d2c3b4a59"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local service runs as root")


@dataclass
class Served:
    """A running ``byte-probe serve`` and the directories around it."""

    process: subprocess.Popen[bytes]
    socket: Path
    base: Path
    state: Path

    def env(self) -> dict[str, str]:
        """A client's environment: the socket named, nothing else of the service's."""
        return {"PATH": os.environ["PATH"], "HOME": str(self.base / "client-home")}


def _wait_for_socket(path: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60  # a bound on start-up, not a timing claim
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited {process.returncode}")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            return
        except OSError:
            time.sleep(0.05)
        finally:
            probe.close()
    raise AssertionError("serve never listened")


@dataclass
class _Service:
    """The module's one ``byte-probe serve``: its process, socket, state and base."""

    process: subprocess.Popen[bytes]
    socket: Path
    base: Path
    state: Path


@pytest.fixture(scope="module")
def service(migrated_sqlite_file: Path) -> Iterator[_Service]:
    """``byte-probe serve`` as root, started once for the module: one process serving many
    clients one after another is how it runs, and each start costs about a second of CPU.
    Its directories sit under one every user may traverse (the tests' own temporary
    directories are root's only)."""
    base = Path(tempfile.mkdtemp(prefix="serve-test-", dir="/tmp"))
    base.chmod(0o755)
    try:
        for name in ("run", "home"):
            (base / name).mkdir(mode=0o755)
        state = seed_state(base / "state", migrated_sqlite_file)
        path = base / "run" / "serve.sock"
        env = {"PATH": os.environ["PATH"], "HOME": str(base / "home")}
        with (base / "serve.log").open("wb") as log:
            process = subprocess.Popen(
                cli_argv("serve", "--root", str(state), "--socket", str(path)),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            _wait_for_socket(path, process)
            yield _Service(process, path, base, state)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        assert not path.exists(), "serve left its socket behind"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def served(service: _Service) -> Iterator[Served]:
    """The module's serve with this test's own project and client home beside it, so no
    test sees another's files (the store is shared; each test names what it made)."""
    assert service.process.poll() is None, f"serve exited {service.process.returncode}"
    base = Path(tempfile.mkdtemp(prefix="test-", dir=service.base))
    base.chmod(0o755)
    try:
        (base / "client-home").mkdir(mode=0o755)
        project = base / "project"
        (project / "src").mkdir(parents=True)
        (project / "src/parse.py").write_text("def parse(text):\n    return text\n")
        for path in (project, project / "src"):
            path.chmod(0o755)
        (project / "src/parse.py").chmod(0o644)
        yield Served(service.process, service.socket, base, service.state)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_uid(uid: int, work: Callable[[], object]) -> Any:
    """``work()``'s JSON result, run in a forked child that dropped to ``uid`` (its
    primary group the same number, no supplementary groups)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write_end, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data
    return json.loads(data)


def exchange(path: Path, *lines: bytes) -> list[dict[str, Any]]:
    """Send raw request lines on one connection; the response frames, in order."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(path))
        conn.sendall(b"".join(lines))
        conn.shutdown(socket.SHUT_WR)
        with conn.makefile("rb") as reader:
            return [json.loads(line) for line in reader]


def request(op: str, params: dict[str, Any] | None = None, request_id: int = 1) -> bytes:
    return json.dumps({"id": request_id, "op": op, "params": params or {}}).encode() + b"\n"


class TestPeerCredentials:
    def test_the_identity_is_the_kernels(self, tmp_path: Path) -> None:
        """peer_of reads the connecting process's uid, gid and pid from the socket."""
        path = tmp_path / "peer.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        path.chmod(0o666)
        tmp_path.chmod(0o755)
        listener.listen(1)
        seen: list[Any] = []

        def accept() -> None:
            conn, _ = listener.accept()
            with conn:
                seen.append(peer_of(conn))
                conn.sendall(b"x")

        thread = threading.Thread(target=accept)
        thread.start()

        def connect() -> int:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(str(path))
                conn.recv(1)
            return os.getpid()

        pid = as_uid(NOBODY, connect)
        thread.join()
        listener.close()
        (peer,) = seen
        assert (peer.uid, peer.gid, peer.pid) == (NOBODY, NOBODY, pid)
        assert peer.kind == "agent"


class TestBadInput:
    def test_malformed_json_and_oversized_frames_are_refused_and_serving_goes_on(
        self, served: Served
    ) -> None:
        """A line that is not JSON and one over 1 MiB each get one error frame; the next
        request on the same connection is answered."""
        frames = exchange(
            served.socket,
            b"{not json\n",
            b'{"id": 1, "op": "capabilities", "params": {"x": "' + b"a" * MAX_LINE_BYTES + b'"}}\n',
            request("capabilities", request_id=2),
        )
        assert [f["ok"] for f in frames] == [False, False, True]
        assert frames[0]["error"]["code"] == "invalid_input"
        assert frames[1]["error"]["code"] == "limit_exceeded"
        assert frames[2]["id"] == 2

    def test_a_request_naming_its_own_identity_is_refused(self, served: Served) -> None:
        """An identity in the frame or in the params is an unknown field, never used."""
        frames = exchange(
            served.socket,
            b'{"id": 1, "op": "capabilities", "peer": {"uid": 0}}\n',
            request("turn_list", {"uid": 0, "kind": "user"}, request_id=2),
        )
        assert [f["error"]["code"] for f in frames] == ["invalid_input", "invalid_input"]
        assert "peer: unknown request field" in frames[0]["error"]["message"]

    def test_admin_operations_are_not_served(self, served: Served) -> None:
        """The socket serves the host face: an operation that takes a path as the
        administrator's (policy_check) is unknown there."""
        (frame,) = exchange(served.socket, request("policy_check", {"file": "/etc/shadow"}))
        assert frame["error"]["code"] == "invalid_input"
        assert "unknown operation" in frame["error"]["message"]


class TestCapturesAsTheCaller:
    def test_a_non_root_caller_captures_what_it_may_read(self, served: Served) -> None:
        """uid 65534 captures a world-readable project through the service."""
        project = served.base / "project"
        frames = as_uid(
            NOBODY,
            lambda: exchange(served.socket, request("snapshot_capture", {"root": str(project)})),
        )
        assert frames[0]["ok"], frames
        assert frames[0]["result"]["files"] == 1

    def test_a_root_only_directory_is_refused_to_another_uid(self, served: Served) -> None:
        """A 0700 root-owned directory is refused to uid 65534, naming it; root captures it."""
        secret = served.base / "secret"
        secret.mkdir(mode=0o700)
        (secret / "key").write_text("root only\n")
        capture = request("snapshot_capture", {"root": str(secret)})
        (refused,) = as_uid(NOBODY, lambda: exchange(served.socket, capture))
        assert refused["error"]["code"] == "unsafe_path"
        assert str(secret) in refused["error"]["message"]
        assert "not readable by uid 65534" in refused["error"]["message"]
        (allowed,) = exchange(served.socket, capture)
        assert allowed["ok"], allowed

    def test_an_unreadable_file_inside_a_readable_tree_is_refused(self, served: Served) -> None:
        """One 0600 root-owned file in an otherwise readable project refuses the capture,
        naming the file, though an earlier capture cached its digest."""
        project = served.base / "project"
        private = project / "src" / "private.txt"
        private.write_text("root only\n")
        capture = request("snapshot_capture", {"root": str(project)})
        assert exchange(served.socket, capture)[0]["ok"]  # root's capture fills the cache
        private.chmod(0o600)
        (refused,) = as_uid(NOBODY, lambda: exchange(served.socket, capture))
        assert refused["error"]["code"] == "unsafe_path"
        assert "'src/private.txt' is not readable by uid 65534" in refused["error"]["message"]

    def test_git_reads_the_objects_as_the_caller(self, served: Served) -> None:
        """A ref capture runs git as uid 65534: a readable repository's HEAD is captured;
        once its object directory is root's only, the same capture is refused."""
        project = served.base / "project"
        git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], check=True, env={"PATH": os.environ["PATH"]})
        subprocess.run([*git, "add", "-A"], check=True, env={"PATH": os.environ["PATH"]})
        subprocess.run([*git, "commit", "-qm", "x"], check=True, env={"PATH": os.environ["PATH"]})
        capture = request("snapshot_capture", {"root": str(project), "ref": "HEAD"})
        (allowed,) = as_uid(NOBODY, lambda: exchange(served.socket, capture))
        assert allowed["ok"], allowed
        assert allowed["result"]["files"] == 1
        (project / ".git" / "objects").chmod(0o700)
        (refused,) = as_uid(NOBODY, lambda: exchange(served.socket, capture))
        assert refused["error"]["code"] == "unsafe_path", refused
        assert "git stopped" in refused["error"]["message"]

    def test_a_bundle_path_is_refused_to_another_uid(self, served: Served) -> None:
        """bundle_verify would read a file as root for the caller: refused to uid 65534,
        naming the field."""
        verify = request("bundle_verify", {"path": str(served.base / "project" / "b.tar")})
        (refused,) = as_uid(NOBODY, lambda: exchange(served.socket, verify))
        assert refused["error"]["code"] == "unsafe_path"
        assert refused["error"]["message"].startswith("path: a bundle file")


def _hook_event(project: Path, name: str, **fields: Any) -> bytes:
    document = {
        "session_id": SESSION,
        "cwd": str(project),
        "hook_event_name": name,
        **fields,
    }
    return json.dumps(document).encode()


class TestHookThroughTheService:
    def test_the_hook_begins_a_turn_and_allows_as_a_non_root_user(self, served: Served) -> None:
        """uid 65534's hook, with PROBE_SERVE_SOCKET set, begins a turn and gets allow on
        an unchanged tree, all in the service (no store in the project)."""
        project = served.base / "project"
        env = {**served.env(), "PROBE_SERVE_SOCKET": str(served.socket)}

        def hook() -> list[Any]:
            os.environ.clear()
            os.environ.update(env)
            prompt = _hook_event(project, "UserPromptSubmit", prompt="does parse trim?")
            tool = _hook_event(
                project, "PreToolUse", tool_name="Bash", tool_input={"command": "make"}
            )
            return [answer_hook(raw, SCOPE, default_opener) for raw in (prompt, tool)]

        begun, checked = as_uid(NOBODY, hook)
        assert "byte-probe turn trn_" in begun["hookSpecificOutput"]["additionalContext"]
        assert checked["hookSpecificOutput"]["permissionDecision"] == "allow", checked
        assert not (project / ".zyte").exists()
        # The turn is the peer's, as the kernel named it (docs/ARCHITECTURE.md, "Principals
        # and clearing"), not the service's root.
        with ProbeService.open(served.state) as svc:
            (turn,) = [t for t in svc.turn_list().turns if t.root == str(project)]
        assert turn.actor == user_name(NOBODY)

    def test_the_hook_command_answers_through_a_real_serve(self, served: Served) -> None:
        """`byte-probe hook claude-code` as a process, through the socket: a PreToolUse
        without a turn is denied under the default block posture, naming why."""
        env = {**served.env(), "PROBE_SERVE_SOCKET": str(served.socket)}
        project = served.base / "project"
        done = subprocess.run(
            cli_argv("hook", "claude-code", "--scope", SCOPE, "--project", str(project)),
            input=_hook_event(project, "PreToolUse", tool_name="Bash", tool_input={}),
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        output = json.loads(done.stdout)["hookSpecificOutput"]
        assert output["permissionDecision"] == "deny"
        assert "no turn begun" in output["permissionDecisionReason"]

    def test_an_unreachable_service_denies_under_block(self, tmp_path: Path) -> None:
        """With the socket named but nobody listening the hook answers deny, naming the
        socket (Claude Code would let a crash through)."""
        env = {"PATH": os.environ["PATH"], "PROBE_SERVE_SOCKET": str(tmp_path / "none.sock")}
        done = subprocess.run(
            cli_argv("hook", "claude-code", "--scope", SCOPE),
            input=_hook_event(tmp_path, "PreToolUse", tool_name="Bash", tool_input={}),
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0
        output = json.loads(done.stdout)["hookSpecificOutput"]
        assert output["permissionDecision"] == "deny"
        assert "service_unavailable" in output["permissionDecisionReason"]
        assert "none.sock" in output["permissionDecisionReason"]


class TestCliThroughTheService:
    def test_snapshot_capture_runs_in_the_service(self, served: Served) -> None:
        """`byte-probe snapshot capture` with PROBE_SERVE_SOCKET set stores the snapshot in
        the service's store and creates none where it runs."""
        cwd = served.base / "client-home"
        env = {**served.env(), "PROBE_SERVE_SOCKET": str(served.socket)}
        done = subprocess.run(
            cli_argv("snapshot", "capture", str(served.base / "project"), "--json"),
            env=env,
            cwd=cwd,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        snapshot_id = json.loads(done.stdout)["snapshot_id"]
        assert not (cwd / ".zyte").exists()
        with ServiceClient(served.socket) as client:
            stored = client.call("snapshot_get", {"snapshot_id": snapshot_id})
        assert [e["path"] for e in stored["entries"]] == ["src/parse.py"]

    def test_a_refusal_keeps_its_code_and_exit(self, served: Served) -> None:
        """A refusal in the service is the CLI's one line and exit code, as in-process."""
        env = {**served.env(), "PROBE_SERVE_SOCKET": str(served.socket)}
        cwd = served.base / "client-home"
        done = subprocess.run(
            cli_argv("snapshot", "show", "f" * 64),
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 3
        assert done.stderr.startswith("byte-probe: error: snapshot_id: no snapshot"), done.stderr
        assert not (cwd / ".zyte").exists()


class TestMcpThroughTheService:
    def test_tools_run_in_the_service_and_only_the_mcp_faces(self, served: Served) -> None:
        """`byte-probe mcp` with PROBE_SERVE_SOCKET set captures in the service (no store
        where it runs) and still refuses a tool its face does not offer."""
        cwd = served.base / "client-home"
        env = {**served.env(), "PROBE_SERVE_SOCKET": str(served.socket)}
        with open_mcp(cwd, env) as mcp:
            captured = mcp.call("snapshot_capture", {"root": str(served.base / "project")})
            host_only = mcp.call("turn_current", {"root": "/", "scope": SCOPE, "session": "s"})
        assert captured["files"] == 1, captured
        assert host_only["error"]["code"] == "invalid_input"
        assert not (cwd / ".zyte").exists()
        with ServiceClient(served.socket) as client:
            assert client.call("snapshot_get", {"snapshot_id": captured["snapshot_id"]})


class TestSocket:
    def test_a_directory_others_may_write_is_refused(self, tmp_path: Path) -> None:
        """The socket's directory must be root's and not group- or world-writable."""
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        with pytest.raises(UnsafePath, match="writable by others"):
            bind_socket(shared / "serve.sock")

    def test_a_linked_directory_is_refused(self, tmp_path: Path) -> None:
        """A socket directory that is a symbolic link is refused, naming it."""
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        with pytest.raises(UnsafePath, match="link"):
            bind_socket(tmp_path / "link" / "serve.sock")

    def test_a_file_that_is_not_a_socket_is_never_replaced(self, tmp_path: Path) -> None:
        """An existing regular file at the path is refused, not unlinked."""
        (tmp_path / "serve.sock").write_text("keep")
        with pytest.raises(UnsafePath, match="not a socket"):
            bind_socket(tmp_path / "serve.sock")
        assert (tmp_path / "serve.sock").read_text() == "keep"

    def test_a_live_service_is_not_displaced_but_a_stale_socket_is(self, tmp_path: Path) -> None:
        """A socket someone listens on is refused (Conflict); a dead one is replaced, and
        the new one is open to every user."""
        live = bind_socket(tmp_path / "serve.sock")
        with pytest.raises(Conflict, match="already listening"):
            bind_socket(tmp_path / "serve.sock")
        live.close()
        again = bind_socket(tmp_path / "serve.sock")
        assert (tmp_path / "serve.sock").stat().st_mode & 0o777 == 0o666
        again.close()


class TestLocalService:
    def test_connections_beyond_the_bound_are_refused(
        self, tmp_path: Path, sqlite_store: Store
    ) -> None:
        """With one connection allowed, a second is answered limit_exceeded and closed."""
        svc = ProbeService(sqlite_store, settings=read_settings({}), interface="host")
        service = LocalService(svc, bind_socket(tmp_path / "serve.sock"), max_connections=1)
        thread = threading.Thread(target=service.serve_forever)
        thread.start()
        try:
            with ServiceClient(tmp_path / "serve.sock") as first:
                first.call("capabilities")  # the first connection is being served
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as second:
                    second.connect(str(tmp_path / "serve.sock"))
                    with second.makefile("rb") as reader:
                        refused = json.loads(reader.readline())
                        assert reader.readline() == b""  # then closed
                assert refused["error"]["code"] == "limit_exceeded"
        finally:
            service.stop()
            thread.join()

    def test_each_connection_carries_its_peer(self, tmp_path: Path, sqlite_store: Store) -> None:
        """The session a connection is served by holds that connection's credentials."""
        svc = ProbeService(sqlite_store, settings=read_settings({}), interface="host")
        seen: list[Any] = []
        original = svc.for_peer

        def recording(peer: Any) -> ProbeService:
            view = original(peer)
            seen.append(view.context.peer)
            return view

        svc.for_peer = recording  # type: ignore[method-assign]
        service = LocalService(svc, bind_socket(tmp_path / "serve.sock"))
        thread = threading.Thread(target=service.serve_forever)
        thread.start()
        try:
            with ServiceClient(tmp_path / "serve.sock") as client:
                client.call("capabilities")
        finally:
            service.stop()
            thread.join()
        (peer,) = seen
        assert (peer.uid, peer.pid, peer.user) == (0, os.getpid(), "root")
        assert svc.context.peer is None  # the session itself is nobody's

    def test_an_absent_service_is_service_unavailable(self, tmp_path: Path) -> None:
        """Connecting to a socket nobody serves raises ServiceUnavailable naming it."""
        with pytest.raises(ServiceUnavailable, match=r"none\.sock"):
            ServiceClient(tmp_path / "none.sock")

    def test_error_frames_come_back_as_their_classes(self) -> None:
        """A refusal's code gives back its class (the face shows the same code)."""
        error = error_from_frame({"code": "unsafe_path", "message": "root: no"})
        assert isinstance(error, UnsafePath)
        assert str(error) == "root: no"
        assert error_from_frame({"code": "bogus", "message": "m"}).code == "internal"
