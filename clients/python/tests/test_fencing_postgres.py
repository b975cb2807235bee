"""Fencing a real store: the README's recipe against a real PostgreSQL
refuses the write of a holder that was paused past its TTL (docs/protocol.md,
Holder rules and client libraries: "fence downstream writes")."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Stack
from dagnats_leases import Lease, LeaseClient, LeaseKeeper
from fenced_writer import FENCED_WRITE
from servers import Postgres

WRITER = Path(__file__).with_name("fenced_writer.py")
README = Path(__file__).parents[1] / "README.md"
TTL_MS = 2000


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    server = Postgres()
    yield server
    server.stop()


@pytest.fixture
async def db(postgres: Postgres) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    conn = await psycopg.AsyncConnection.connect(postgres.dsn, autocommit=True)
    await conn.execute("CREATE TABLE resources (id text PRIMARY KEY, data text NOT NULL, fence bigint NOT NULL)")
    yield conn
    await conn.close()


class Writer:
    """Holder A, a child process speaking fenced_writer.py's commands."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, command: str, timeout: float = 10) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command:
            self.proc.stdin.write(command.encode() + b"\n")
            await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        assert line, "the writer exited"
        answer: dict[str, Any] = json.loads(line)
        return answer


async def test_a_holder_paused_past_its_ttl_has_its_write_refused_by_the_database(
    stack: Stack, client: LeaseClient, db: psycopg.AsyncConnection[Any], postgres: Postgres, key: str
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        stack.url,
        postgres.dsn,
        key,
        "writer-a",
        str(TTL_MS),
        "row-1",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    a = Writer(proc)
    try:
        await a.ask("")  # owner
        fence_a = (await a.ask("take"))["fence"]
        assert isinstance(fence_a, int)
        assert (await a.ask("write from-a"))["rows"] == 1

        os.kill(proc.pid, signal.SIGSTOP)
        paused = time.monotonic()
        async with LeaseKeeper(client, key, "writer-b", TTL_MS) as b:
            fence_b = await b.wait_owner(timeout=TTL_MS / 1000 + 3)
            # B can only have it once A's lease ran out on the server.
            assert time.monotonic() - paused >= TTL_MS / 1000 - 0.1
            assert fence_b > fence_a
            cur = await db.execute(FENCED_WRITE, {"id": "row-1", "data": "from-b", "fence": fence_b})
            assert cur.rowcount == 1

            os.kill(proc.pid, signal.SIGCONT)
            stale = await a.ask("write from-a-again")
            # The database refused it: A wrote with the fence it had.
            assert stale == {"rows": 0, "fence_used": fence_a, "fence_now": None}

            row = await (await db.execute("SELECT data, fence FROM resources WHERE id = 'row-1'")).fetchone()
            assert row == ("from-b", fence_b)
            owner = await client.owner(key)
            assert isinstance(owner, Lease) and owner.holder == "writer-b"
        assert proc.stdin is not None
        proc.stdin.write(b"exit\n")
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            await proc.wait()


def test_the_readme_recipe_is_the_statement_tested() -> None:
    assert FENCED_WRITE in README.read_text()
