"""Waits with deadlines: every wait in the tests ends, and says what it waited for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(what: str, check: Callable[[], T | None], deadline: float = 5.0, every: float = 0.01) -> T:
    """Polls ``check`` until it returns something other than None or False;
    fails with ``what`` after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while True:
        got = check()
        if got is not None and got is not False:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline} s")
        await asyncio.sleep(every)
