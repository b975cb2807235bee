"""The example program, examples/leader.py, run as a separate process."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

EXAMPLE = Path(__file__).parents[1] / "examples" / "leader.py"


@asynccontextmanager
async def leader(nats_url: str, key: str, holder: str, ttl_ms: int) -> AsyncIterator[asyncio.subprocess.Process]:
    """examples/leader.py keeping ``key`` as ``holder``, its stdout piped;
    killed on the way out if it still runs."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--key",
        key,
        "--holder",
        holder,
        "--ttl-ms",
        str(ttl_ms),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "NATS_URL": nats_url},
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
