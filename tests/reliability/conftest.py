"""Every reliability test reaps the workers (and agent process groups) of its state dir, even
those killed or started behind the test's back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.util import reap_state


@pytest.fixture(autouse=True)
def _reap(state: Path) -> Iterator[None]:
    yield
    reap_state(state)
