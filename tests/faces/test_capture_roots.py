"""A machine face captures only inside the administrator's capture roots
(docs/ARCHITECTURE.md, "Faces": capture roots).

The attack: a caller of ``byte-probe host`` or ``byte-probe mcp`` captures a root-only
directory (``/etc``, ``/root``) as the service's root user, then plans a probe that prints
it. The capture must be refused, whatever path spelling or link leads there.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from probe_service.errors import SettingsError, UnsafePath
from probe_service.plans.signing import SIGNING_KEY_ENV
from probe_service.policies import POLICY_FILE_ENV
from probe_service.service import ProbeService
from probe_service.service.capture_roots import (
    CAPTURE_ROOTS_ENV,
    allowed_capture_roots,
    confine_capture_root,
)
from probe_service.settings import read_settings
from probe_service.store import open_store
from probe_service.store.schema import snapshots

from .blocking import DEADLOCK_GUARD_S
from .drivers import cli_argv, open_mcp


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A session root with a repository, and a root-only secret directory beside it."""
    monkeypatch.delenv(CAPTURE_ROOTS_ENV, raising=False)
    state = tmp_path / "state"
    (state / "repo").mkdir(parents=True)
    (state / "repo" / "README").write_text("hello\n")
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    (secret / "key").write_text("TOPSECRET\n")
    (secret / "key").chmod(0o600)
    (state / "link").symlink_to(secret)
    (state / "repo" / "up").symlink_to("../..")
    return {"state": state, "repo": state / "repo", "secret": secret}


def host_frames(root: Path, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``byte-probe host --root ROOT`` on ``requests`` and return its frames."""
    lines = "".join(json.dumps(r) + "\n" for r in requests).encode()
    done = subprocess.run(
        cli_argv("host", "--root", str(root)),
        input=lines,
        capture_output=True,
        timeout=DEADLOCK_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return [json.loads(line) for line in done.stdout.splitlines()]


def stored_snapshots(root: Path) -> int:
    store = open_store(root)
    try:
        with store.reading() as conn:
            return int(conn.execute(select(func.count()).select_from(snapshots)).scalar_one())
    finally:
        store.close()


def escapes(layout: dict[str, Path]) -> list[str]:
    """Every spelling of a directory outside the session root."""
    state = layout["state"]
    return [
        str(layout["secret"]),
        f"{state}/../secret",
        str(state / "link"),
        str(layout["repo"] / "up"),
        "/etc",
        "/",
        f"{state}x",  # a sibling sharing the root's name as a prefix
    ]


class TestHost:
    def test_roots_outside_the_session_root_are_refused(self, layout: dict[str, Path]) -> None:
        """Absolute, ``..``, linked and prefix-sharing spellings of an outside directory
        are refused as unsafe_path naming the setting; nothing is stored."""
        (layout["state"].parent / "statex").mkdir()
        requests = [
            {"id": i, "op": "snapshot_capture", "params": {"root": root}}
            for i, root in enumerate(escapes(layout))
        ]
        # Captures are long operations: their answers may come in any order.
        frames = sorted(host_frames(layout["state"], requests), key=lambda f: f["id"])
        assert [f["id"] for f in frames] == list(range(len(requests)))
        for frame in frames:
            assert frame["ok"] is False, frame
            assert frame["error"]["code"] == "unsafe_path"
            assert CAPTURE_ROOTS_ENV in frame["error"]["message"]
        assert stored_snapshots(layout["state"]) == 0

    def test_a_nul_in_the_root_is_a_typed_refusal(self, layout: dict[str, Path]) -> None:
        """A root with a NUL byte is unsafe_path, not an internal error."""
        (frame,) = host_frames(
            layout["state"],
            [{"id": 1, "op": "snapshot_capture", "params": {"root": f"{layout['repo']}\0x"}}],
        )
        assert frame["error"]["code"] == "unsafe_path", frame

    def test_the_session_root_is_the_default(self, layout: dict[str, Path]) -> None:
        """Without the setting, a repository under ``--root`` is captured."""
        (frame,) = host_frames(
            layout["state"],
            [{"id": 1, "op": "snapshot_capture", "params": {"root": str(layout["repo"])}}],
        )
        assert frame["ok"] is True, frame
        assert frame["result"]["files"] == 1

    def test_configured_roots_replace_the_default(
        self, layout: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With BYTE_PROBE_CAPTURE_ROOTS only its directories may be captured."""
        work = tmp_path / "work"
        (work / "a").mkdir(parents=True)
        (work / "a" / "f").write_text("x")
        monkeypatch.setenv(CAPTURE_ROOTS_ENV, f"{tmp_path / 'none'}{os.pathsep}{work}")
        inside, default = sorted(
            host_frames(
                layout["state"],
                [
                    {"id": 1, "op": "snapshot_capture", "params": {"root": str(work / "a")}},
                    {"id": 2, "op": "snapshot_capture", "params": {"root": str(layout["repo"])}},
                ],
            ),
            key=lambda f: f["id"],
        )
        assert inside["ok"] is True, inside
        assert default["error"]["code"] == "unsafe_path"

    def test_a_relative_setting_stops_the_host_before_it_serves(
        self, layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A relative entry is a one-line error naming the setting and a non-zero exit."""
        monkeypatch.setenv(CAPTURE_ROOTS_ENV, "repos")
        done = subprocess.run(
            cli_argv("host", "--root", str(layout["state"])),
            input=b'{"id":1,"op":"capabilities"}\n',
            capture_output=True,
            timeout=DEADLOCK_GUARD_S,
            check=False,
        )
        assert done.returncode != 0
        assert done.stdout == b""
        assert CAPTURE_ROOTS_ENV in done.stderr.decode()


def test_mcp_refuses_a_root_outside_the_session_root(layout: dict[str, Path]) -> None:
    """The MCP tool is confined the same way."""
    with open_mcp(layout["state"]) as client:
        refused = client.call("snapshot_capture", {"root": str(layout["secret"])})
        allowed = client.call("snapshot_capture", {"root": str(layout["repo"])})
    assert refused["error"]["code"] == "unsafe_path"
    assert "snapshot_id" in allowed


class TestRules:
    def test_python_api_is_not_confined(self, layout: dict[str, Path]) -> None:
        """The local user of the Python API captures any directory it names."""
        with ProbeService.open(layout["state"]) as svc:
            assert svc.capture_roots is None
            assert svc.snapshot_capture(root=str(layout["secret"])).files == 1

    def test_a_session_built_for_a_machine_face_is_confined(self, layout: dict[str, Path]) -> None:
        """Constructing a host session directly still confines it to the store's root."""
        store = open_store(layout["state"])
        with ProbeService(store, interface="host") as svc, pytest.raises(UnsafePath):
            svc.call("snapshot_capture", {"root": str(layout["secret"])})

    def test_resolved_path_is_what_gets_captured(self, layout: dict[str, Path]) -> None:
        """``..`` inside the root resolves before the comparison and is returned resolved."""
        roots = allowed_capture_roots((), layout["state"])
        spelled = f"{layout['repo']}/../repo"
        home = Path("/nonexistent-home")
        assert confine_capture_root(spelled, roots, (), home) == layout["repo"].resolve()

    def test_relative_entry_is_refused(self, layout: dict[str, Path]) -> None:
        """A relative entry in the setting is a SettingsError naming it, when the settings
        are read (before any face serves)."""
        with pytest.raises(SettingsError, match="BYTE_PROBE_CAPTURE_ROOTS: 'rel' is not an"):
            read_settings({CAPTURE_ROOTS_ENV: "/srv:rel"})


class TestAdministratorFiles:
    """Inside an allowed root, the service's own secrets are still never captured."""

    @pytest.fixture
    def admin_files(
        self, layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, Path]:
        """A signing key and a policy file under the session root, outside ``.zyte``."""
        admin = layout["state"] / "admin"
        admin.mkdir(mode=0o700)
        key = admin / "signing-key.pem"
        key.write_text("-----BEGIN PRIVATE KEY-----\n")
        policies = layout["state"] / "etc" / "probe-policies.json"
        policies.parent.mkdir()
        policies.write_text("{}")
        monkeypatch.setenv(SIGNING_KEY_ENV, str(key))
        monkeypatch.setenv(POLICY_FILE_ENV, str(policies))
        return {"key": key, "policies": policies}

    def test_a_root_holding_the_signing_key_or_policy_file_is_refused(
        self, layout: dict[str, Path], admin_files: dict[str, Path]
    ) -> None:
        """Capturing the key's directory, the policy file's, or an ancestor that would
        include them (the session root itself) is refused naming neither's content."""
        store = open_store(layout["state"])
        with ProbeService(store, interface="host") as svc:
            for root in (
                admin_files["key"].parent,
                admin_files["policies"].parent,
                layout["state"],
            ):
                with pytest.raises(UnsafePath, match="signing key or policy file"):
                    svc.call("snapshot_capture", {"root": str(root)})
            assert svc.call("snapshot_capture", {"root": str(layout["repo"])})["files"] == 1

    def test_the_default_state_directory_is_refused(self, layout: dict[str, Path]) -> None:
        """``.zyte`` (the store, the default key and policy file) is never a capture root,
        though a tree holding it may be captured: ``.zyte`` is skipped there."""
        zyte = layout["state"] / ".zyte" / "agent"
        zyte.mkdir(parents=True)
        (zyte / "signing-key.pem").write_text("secret")
        store = open_store(layout["state"])
        with ProbeService(store, interface="host") as svc:
            with pytest.raises(UnsafePath, match=r"\.zyte"):
                svc.call("snapshot_capture", {"root": str(zyte)})
            captured = svc.call("snapshot_capture", {"root": str(layout["state"])})
            entries = svc.call("snapshot_get", {"snapshot_id": captured["snapshot_id"]})
        assert not [e for e in entries["entries"] if ".zyte" in e["path"]]

    def test_a_root_holding_the_service_users_home_is_refused(
        self, layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A capture root that is, or contains, the service user's home directory (SSH
        keys, ``.pgpass``) is refused; a project inside the home is not."""
        home = layout["state"] / "home"
        (home / "project").mkdir(parents=True)
        (home / "project" / "main.py").write_text("x = 1\n")
        (home / ".pgpass").write_text("db:5432:*:postgres:secret\n")
        monkeypatch.setenv("HOME", str(home))
        store = open_store(layout["state"])
        with ProbeService(store, interface="host") as svc:
            for root in (home, layout["state"]):
                with pytest.raises(UnsafePath, match="home directory"):
                    svc.call("snapshot_capture", {"root": str(root)})
            assert svc.call("snapshot_capture", {"root": str(home / "project")})["files"] == 1
