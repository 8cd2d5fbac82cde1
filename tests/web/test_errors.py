"""The web view maps errors once, through Starlette's exception handlers, by the class."""

from __future__ import annotations

import pytest

from probe_service.errors import (
    BrokerUnavailable,
    InvalidInput,
    NotFound,
    ProbeServiceError,
    StoreUnavailable,
    UnstableWorkingTree,
)

from ..test_errors import Raising, Teapot
from .conftest import serving
from .test_guard import fetch


@pytest.mark.parametrize(
    "error",
    [
        Teapot("teapot: short and stout"),
        NotFound("run_id: no such run"),
        InvalidInput("limit: not a number"),
        UnstableWorkingTree("files moved"),
        StoreUnavailable("store unavailable"),
        # Was 400: the page compared codes by hand and knew only store_unavailable.
        BrokerUnavailable("broker unavailable"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_refusal_is_a_page_with_the_class_status(error: ProbeServiceError) -> None:
    """Every page answers a refusal with the class's status, its code and its message."""
    svc = Raising(error)
    with serving(svc) as url:  # type: ignore[arg-type]
        status, headers, body = fetch(url + "/")
    assert status == error.status
    assert error.code in body
    assert str(error) in body
    assert "content-security-policy" in {k.lower() for k in headers}


def test_a_run_without_a_receipt_is_shown_from_its_entry() -> None:
    """A queued run whose receipt is not found yet still renders (NotFound by class)."""
    entry = {"run_id": "r" * 32, "state": "queued", "receipt_sha256": None}

    class Listing(Raising):
        def call(self, name: str, params: object) -> object:
            if name == "run_list":
                return {"runs": [entry], "next_cursor": None}
            raise self.error

    with serving(Listing(NotFound("receipt: none"))) as url:  # type: ignore[arg-type]
        status, _, body = fetch(url + "/runs/" + "r" * 32)
    assert status == 200, body
    with serving(Listing(StoreUnavailable("store unavailable"))) as url:  # type: ignore[arg-type]
        status, _, _ = fetch(url + "/runs/" + "r" * 32)
    assert status == 503
