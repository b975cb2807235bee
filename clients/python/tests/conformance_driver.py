"""The conformance driver of the Python library: JSON lines over stdin and
stdout, as clients/conformance/DRIVER.md defines them.

A thin adapter: it decodes a request, calls the installed ``dagnats_leases``
library, and encodes what the library returned, reading every lease field
from the library's typed replies (their attributes), never from raw JSON.
Requests run concurrently; each answer and event is one whole line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

import nats

import dagnats_leases
from dagnats_leases import (
    FenceGate,
    FreeKey,
    Grant,
    InboxRequest,
    InboxServer,
    Lease,
    LeaseClient,
    LeaseError,
    LeaseKeeper,
    LeaseList,
    Released,
    StaleFence,
    serve_inbox,
)

Json = dict[str, Any]


class DriverError(Exception):
    """A driver-level failure: ``bad_request``, ``stale_fence`` or ``not_found``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def emit(line: Json) -> None:
    """Writes one whole line; nothing awaits between write and flush."""
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def wire_time(at: datetime) -> str:
    """A time as the wire carries it: RFC 3339, UTC, milliseconds, ``Z``."""
    return at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def lease_json(lease: Lease) -> Json:
    out: Json = {}
    if isinstance(lease, Grant):
        out["granted"] = lease.granted
    out.update(
        held=lease.held,
        key=lease.key,
        holder=lease.holder,
        revision=lease.revision,
        acquired_at=wire_time(lease.acquired_at),
        expires_at=wire_time(lease.expires_at),
        ttl_ms=lease.ttl_ms,
    )
    return out


def released_json(released: Released) -> Json:
    return {
        "released": released.released,
        "held": released.held,
        "key": released.key,
        "holder": released.holder,
        "revision": released.revision,
    }


def list_json(page: LeaseList) -> Json:
    return {"leases": [lease_json(lease) for lease in page.leases], "next": page.next}


def need(req: Json, field: str) -> Any:
    if field not in req:
        raise DriverError("bad_request", f"missing field {field!r}")
    return req[field]


class Driver:
    """The library objects the runner names: keepers, inboxes, gates."""

    def __init__(self, client: LeaseClient) -> None:
        self.client = client
        self.keepers: dict[str, LeaseKeeper] = {}
        self.inboxes: dict[str, InboxServer] = {}
        self.gates: dict[str, FenceGate] = {}
        self.watchers: set[asyncio.Task[None]] = set()

    def keeper(self, req: Json, forget: bool = False) -> LeaseKeeper:
        """The keeper the request names; ``forget`` drops the name (a keeper
        stopped or handed off is gone, and its name free again)."""
        name = need(req, "keeper")
        if name not in self.keepers:
            raise DriverError("not_found", f"no keeper named {name!r}")
        return self.keepers.pop(name) if forget else self.keepers[name]

    async def call(self, req: Json) -> Json:
        method, args = need(req, "method"), need(req, "args")
        if not isinstance(args, dict):
            raise DriverError("bad_request", "args must be an object")
        c = self.client
        if method == "acquire":
            return lease_json(await c.acquire(args["key"], args["holder"], args["ttl_ms"]))
        if method == "renew":
            return lease_json(await c.renew(args["key"], args["holder"], args["revision"], args["ttl_ms"]))
        if method == "release":
            return released_json(await c.release(args["key"], args["holder"], args["revision"]))
        if method == "owner":
            owner = await c.owner(args["key"])
            if isinstance(owner, FreeKey):
                return {"held": owner.held, "key": owner.key}
            return lease_json(owner)
        if method == "transfer":
            return lease_json(
                await c.transfer(args["key"], args["holder"], args["revision"], args["to"], args["ttl_ms"])
            )
        if method == "list":
            return list_json(await c.list(args.get("prefix"), args.get("after"), args.get("limit")))
        if method == "forward":
            payload = base64.b64decode(args.get("payload_b64") or "")
            timeout_ms = args.get("timeout_ms")
            reply = await c.forward(args["key"], payload, 5000 if timeout_ms is None else timeout_ms)
            return {"payload_b64": base64.b64encode(reply).decode("ascii")}
        raise DriverError("bad_request", f"unknown method {method!r}")

    async def keeper_start(self, req: Json) -> Json:
        name = need(req, "keeper")
        if name in self.keepers:
            raise DriverError("bad_request", f"a keeper named {name!r} already exists")
        keeper = LeaseKeeper(self.client, need(req, "key"), need(req, "holder"), need(req, "ttl_ms"), req.get("wait", True))
        changes = keeper.changes()
        self.keepers[name] = keeper.start()

        async def report() -> None:
            async for change in changes:
                emit({"event": "ownership", "keeper": name, "owner": change.owner, "fence": change.fence, "tenure": change.tenure})

        task = asyncio.ensure_future(report())
        self.watchers.add(task)
        task.add_done_callback(self.watchers.discard)
        return {}

    async def keeper_wait_owner(self, req: Json) -> Json:
        timeout_ms = req.get("timeout_ms")
        fence = await self.keeper(req).wait_owner(None if timeout_ms is None else timeout_ms / 1000)
        return {"fence": fence}

    async def inbox_serve(self, req: Json) -> Json:
        name, holder, tenures, mode = (need(req, f) for f in ("inbox", "holder", "tenures", "mode"))
        if name in self.inboxes:
            raise DriverError("bad_request", f"an inbox named {name!r} already exists")
        if mode not in ("echo", "hang", "large"):
            raise DriverError("bad_request", f"unknown mode {mode!r}")
        tenure: Callable[[str], int | None]
        if isinstance(tenures, dict) and "keeper" in tenures:
            keeper = self.keeper({"keeper": tenures["keeper"]})
            tenure = lambda key: keeper.tenure() if key == keeper.key else None  # noqa: E731
        elif isinstance(tenures, dict) and isinstance(tenures.get("fixed"), dict):
            fixed: dict[str, int] = tenures["fixed"]
            tenure = fixed.get
        else:
            raise DriverError("bad_request", "tenures must be {'keeper': name} or {'fixed': {key: revision}}")

        async def handler(request: InboxRequest) -> bytes:
            emit(
                {
                    "event": "inbox",
                    "inbox": name,
                    "key": request.key,
                    "fence": request.fence,
                    "payload_b64": base64.b64encode(request.payload).decode("ascii"),
                }
            )
            if mode == "hang":
                await asyncio.Event().wait()
            if mode == "large":
                return b"x" * 1_000_000
            return b"echo:" + request.payload

        self.inboxes[name] = await serve_inbox(self.client.nc, holder, tenure, handler)
        return {}

    async def inbox_stop(self, req: Json) -> Json:
        name = need(req, "inbox")
        if name not in self.inboxes:
            raise DriverError("not_found", f"no inbox named {name!r}")
        # A hanging handler never answers: it is cancelled, not waited for.
        await self.inboxes.pop(name).stop(grace=0.5)
        return {}

    def gate_admit(self, req: Json) -> Json:
        gate = self.gates.setdefault(need(req, "gate"), FenceGate())
        try:
            gate.admit(need(req, "fence"))
        except StaleFence as err:
            raise DriverError("stale_fence", str(err)) from None
        except ValueError as err:
            raise DriverError("bad_request", str(err)) from None
        return {}

    async def close(self) -> None:
        await asyncio.gather(*(keeper.stop() for keeper in self.keepers.values()))
        await asyncio.gather(*(inbox.stop(grace=0.5) for inbox in self.inboxes.values()))

    async def handle(self, req: Json) -> Json:
        op = need(req, "op")
        ops: dict[str, Callable[[Json], Awaitable[Json]]] = {
            "call": self.call,
            "keeper.start": self.keeper_start,
            "keeper.wait_owner": self.keeper_wait_owner,
            "inbox.serve": self.inbox_serve,
            "inbox.stop": self.inbox_stop,
        }
        if op in ops:
            return await ops[op](req)
        if op == "keeper.state":
            keeper = self.keeper(req)
            return {"fence": keeper.fence(), "tenure": keeper.tenure()}
        if op == "keeper.hand_off":
            to = need(req, "to")
            keeper = self.keeper(req, forget=True)
            try:
                return lease_json(await keeper.hand_off(to))
            except LeaseError as err:
                if err.kind == "invalid":  # refused before anything: it keeps running
                    self.keepers[req["keeper"]] = keeper
                raise
        if op == "keeper.stop":
            await self.keeper(req, forget=True).stop()
            return {}
        if op == "gate.admit":
            return self.gate_admit(req)
        raise DriverError("bad_request", f"unknown op {op!r}")


async def answer(driver: Driver, line: bytes) -> None:
    rid: Any = None
    try:
        req = json.loads(line)
        if not isinstance(req, dict):
            raise DriverError("bad_request", "a request is a JSON object")
        rid = req.get("id")
        emit({"id": rid, "ok": await driver.handle(req)})
    except LeaseError as err:
        emit({"id": rid, "error": {"kind": err.kind, "message": err.message, "holder": err.holder, "revision": err.revision}})
    except DriverError as err:
        emit({"id": rid, "error": {"kind": err.kind, "message": str(err), "holder": None, "revision": None}})
    except (ValueError, KeyError, TypeError) as err:
        emit({"id": rid, "error": {"kind": "bad_request", "message": repr(err), "holder": None, "revision": None}})
    except Exception as err:  # a library bug: answered, so the runner's report shows it
        emit({"id": rid, "error": {"kind": "unexpected", "message": repr(err), "holder": None, "revision": None}})


async def main() -> None:
    timeout_ms = int(os.environ.get("DRIVER_CALL_TIMEOUT_MS") or 5000)
    nc = await nats.connect(os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), max_reconnect_attempts=-1)
    driver = Driver(LeaseClient(nc, timeout=timeout_ms / 1000))
    emit({"ready": True, "library": "python", "version": dagnats_leases.__version__})

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        if not line.strip():
            continue
        try:
            exiting = json.loads(line).get("op") == "exit"
        except (ValueError, AttributeError):
            exiting = False
        if exiting:
            await driver.close()
            emit({"id": json.loads(line).get("id"), "ok": {}})
            break
        task = asyncio.ensure_future(answer(driver, line))
        running.add(task)
        task.add_done_callback(running.discard)
    else:
        await driver.close()
    for task in running:
        task.cancel()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
