"""The cyclic collector paused around work that makes many objects and no cycles (a parsed
store, a full check's rows, a catch-up's turns): its passes would walk them again and again
for nothing, and reference counting frees them as before. Restored as it was, whatever happens
inside, so a caller that had it off (a read command turns it off for good) keeps it off."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
