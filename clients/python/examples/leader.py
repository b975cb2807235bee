"""A replica that leads while it holds a lease.

It keeps the lease with a LeaseKeeper, prints each change of leadership,
answers forwarded requests while it leads (with the fence they came at),
and releases the lease on SIGINT or SIGTERM so another replica takes over
at once.

    NATS_URL=nats://127.0.0.1:4222 python leader.py --key orders-leader --holder replica-1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import nats

from dagnats_leases import InboxRequest, LeaseClient, LeaseKeeper, serve_inbox


async def lead(url: str, key: str, holder: str, ttl_ms: int) -> None:
    nc = await nats.connect(url)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)

    keeper = LeaseKeeper(LeaseClient(nc), key, holder, ttl_ms)
    changes = keeper.changes()  # before it starts: no change is missed

    async def report() -> None:
        leading: int | None = None  # the tenure; each renewal reports a new fence too
        async for change in changes:
            if change.owner and change.tenure != leading:
                print(f"leading at fence {change.fence}", flush=True)
            elif not change.owner and leading is not None:
                print("not leading", flush=True)
            leading = change.tenure

    def tenure(k: str) -> int | None:
        return keeper.tenure() if k == key else None

    async def handle(request: InboxRequest) -> bytes:
        return f"{holder} handled {request.payload.decode(errors='replace')!r} at fence {request.fence}".encode()

    reporter = asyncio.ensure_future(report())
    async with keeper, await serve_inbox(nc, holder, tenure, handle):
        print(f"{holder} waiting for {key}", flush=True)
        await stop.wait()
    await reporter
    await nc.close()
    print("released", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--key", default="orders-leader")
    parser.add_argument("--holder", default=f"replica-{os.getpid()}")
    parser.add_argument("--ttl-ms", type=int, default=15000)
    args = parser.parse_args()
    asyncio.run(lead(os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), args.key, args.holder, args.ttl_ms))


if __name__ == "__main__":
    main()
