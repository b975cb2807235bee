"""Holder A of the PostgreSQL fencing test: a separate process (so the test
can SIGSTOP it) that holds a lease with a LeaseKeeper and writes one row
through the README's "fence your writes" statement.

Commands on stdin, one answer line (JSON) on stdout each:
- ``take``: read the keeper's fence now and keep it as the write fence;
- ``write DATA``: write DATA with the kept fence (the fence it had, not a
  fresh one: the database, not this library, must refuse a stale write);
- ``exit``.

Usage: fenced_writer.py NATS_URL DSN KEY HOLDER TTL_MS ROW_ID
"""

from __future__ import annotations

import asyncio
import json
import sys

import nats
import psycopg

from dagnats_leases import LeaseClient, LeaseKeeper

# The README's recipe: a row keeps the highest fence that wrote it, and one
# statement both checks and writes, so no newer write can land in between.
FENCED_WRITE = """\
INSERT INTO resources (id, data, fence) VALUES (%(id)s, %(data)s, %(fence)s)
ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data, fence = EXCLUDED.fence
WHERE resources.fence <= EXCLUDED.fence"""


def say(line: dict[str, object]) -> None:
    print(json.dumps(line), flush=True)


async def main(nats_url: str, dsn: str, key: str, holder: str, ttl_ms: int, row: str) -> None:
    nc = await nats.connect(nats_url)
    db = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    async with LeaseKeeper(LeaseClient(nc), key, holder, ttl_ms) as keeper:
        say({"owner": await keeper.wait_owner(timeout=30)})
        fence: int | None = None
        while line := (await asyncio.to_thread(sys.stdin.readline)).strip():
            command, _, data = line.partition(" ")
            if command == "take":
                fence = keeper.fence()
                say({"fence": fence})
            elif command == "write":
                cur = await db.execute(FENCED_WRITE, {"id": row, "data": data, "fence": fence})
                say({"rows": cur.rowcount, "fence_used": fence, "fence_now": keeper.fence()})
            elif command == "exit":
                break
    await db.close()
    await nc.close()


if __name__ == "__main__":
    url, dsn, key, holder, ttl, row = sys.argv[1:]
    asyncio.run(main(url, dsn, key, holder, int(ttl), row))
