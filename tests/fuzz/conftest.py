"""Each fuzzer records how many inputs it fed its decoder (read by scripts/security_summary.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .strategies import Tally


@pytest.fixture(autouse=True)
def _count_inputs(request: pytest.FixtureRequest) -> Iterator[None]:
    before = Tally.count
    yield
    request.node.user_properties.append(("inputs_fuzzed", Tally.count - before))
