"""The web view's turns page: decisions listed, what the agent sent shown as inert text."""

from __future__ import annotations

from pathlib import Path

from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store

from ..claims.helpers import WorkTree
from ..web.conftest import serving
from ..web.test_guard import fetch


def test_the_turns_page_lists_decisions_as_text(
    sqlite_store: Store, work: WorkTree, policy_path: Path
) -> None:
    """A turn's decision appears with its posture and verdict; a hostile tool name is escaped."""
    svc = ProbeService(sqlite_store, settings=read_settings({}), policy_file=policy_path)
    turn = svc.call("turn_begin", {"root": str(work.root), "scope": "payments"})["turn_id"]
    svc.call("dispatch_check", {"turn": turn, "tool": "<script>alert(1)</script>\x1b[31m"})
    web = ProbeService(sqlite_store, interface="web", settings=read_settings({}))
    with serving(web) as url:
        status, _, body = fetch(f"{url}/turns")
    assert status == 200
    assert turn[:12] in body
    assert "<script>alert(1)" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[31m" in body
    assert '<td>block</td><td class="verdict-allow">allow</td>' in body
