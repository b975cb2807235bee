"""The conformance driver speaks clients/conformance/DRIVER.md: run as the
runner runs it (the installed package, JSON lines over stdin/stdout)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Stack

DRIVER = Path(__file__).with_name("conformance_driver.py")


class Session:
    """A running driver: send requests, read answers and events."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.answers: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.next_id = 0

    async def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), 10)
        assert raw, "the driver closed its stdout"
        got: dict[str, Any] = json.loads(raw)
        return got

    async def send(self, req: dict[str, Any]) -> int:
        assert self.proc.stdin is not None
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"id": self.next_id, **req}).encode() + b"\n")
        await self.proc.stdin.drain()
        return self.next_id

    async def answer(self, rid: int) -> dict[str, Any]:
        while rid not in self.answers:
            got = await self.line()
            if "event" in got:
                self.events.append(got)
            else:
                self.answers[got["id"]] = got
        return self.answers.pop(rid)

    async def ask(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self.answer(await self.send(req))


@pytest.fixture
async def driver(stack: Stack) -> AsyncIterator[Session]:
    env = {**os.environ, "NATS_URL": stack.url, "DRIVER_CALL_TIMEOUT_MS": "3000"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(DRIVER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
    )
    session = Session(proc)
    ready = await session.line()
    assert ready["ready"] is True and ready["library"] == "python"
    yield session
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def test_the_driver_answers_calls_with_the_wire_fields(driver: Session, key: str) -> None:
    got = await driver.ask({"op": "call", "method": "acquire", "args": {"key": key, "holder": "h-1", "ttl_ms": 3000}})
    lease = got["ok"]
    assert set(lease) == {"granted", "held", "key", "holder", "revision", "acquired_at", "expires_at", "ttl_ms"}
    assert lease["acquired_at"].endswith("Z") and len(lease["acquired_at"]) == 24
    owner = await driver.ask({"op": "call", "method": "owner", "args": {"key": key}})
    assert owner["ok"] == {k: v for k, v in lease.items() if k != "granted"}
    bad = await driver.ask({"op": "call", "method": "acquire", "args": {"key": key, "holder": "h-1", "ttl_ms": 1500}})
    assert bad["error"]["kind"] == "invalid" and bad["error"]["holder"] is None


async def test_the_driver_runs_keepers_inboxes_and_gates(driver: Session, key: str) -> None:
    assert (await driver.ask({"op": "keeper.start", "keeper": "k1", "key": key, "holder": "h-2", "ttl_ms": 3000, "wait": True}))["ok"] == {}
    fence = (await driver.ask({"op": "keeper.wait_owner", "keeper": "k1", "timeout_ms": 5000}))["ok"]["fence"]
    state = (await driver.ask({"op": "keeper.state", "keeper": "k1"}))["ok"]
    assert state["tenure"] == fence and state["fence"] >= fence
    assert driver.events[0] == {"event": "ownership", "keeper": "k1", "owner": True, "fence": fence, "tenure": fence}
    await driver.ask({"op": "inbox.serve", "inbox": "i1", "holder": "h-2", "tenures": {"keeper": "k1"}, "mode": "echo"})
    payload = base64.b64encode(b"hi").decode()
    forwarded = await driver.ask({"op": "call", "method": "forward", "args": {"key": key, "payload_b64": payload, "timeout_ms": 2000}})
    assert base64.b64decode(forwarded["ok"]["payload_b64"]) == b"echo:hi"
    assert any(e["event"] == "inbox" and e["key"] == key and e["payload_b64"] == payload for e in driver.events)
    assert (await driver.ask({"op": "inbox.stop", "inbox": "i1"}))["ok"] == {}
    assert (await driver.ask({"op": "keeper.stop", "keeper": "k1"}))["ok"] == {}
    # A stopped keeper is gone, and its name free again.
    assert (await driver.ask({"op": "keeper.state", "keeper": "k1"}))["error"]["kind"] == "not_found"
    assert (await driver.ask({"op": "gate.admit", "gate": "g", "fence": 5}))["ok"] == {}
    stale = await driver.ask({"op": "gate.admit", "gate": "g", "fence": 4})
    assert stale["error"]["kind"] == "stale_fence"
    assert (await driver.ask({"op": "keeper.state", "keeper": "nope"}))["error"]["kind"] == "not_found"
    assert (await driver.ask({"op": "nonsense"}))["error"]["kind"] == "bad_request"
    assert (await driver.ask({"op": "exit"}))["ok"] == {}
    assert await asyncio.wait_for(driver.proc.wait(), 5) == 0


async def test_the_driver_keeps_reading_while_a_request_waits(driver: Session, key: str) -> None:
    await driver.ask({"op": "call", "method": "acquire", "args": {"key": key, "holder": "h-3", "ttl_ms": 30000}})
    await driver.ask({"op": "keeper.start", "keeper": "w", "key": key, "holder": "h-4", "ttl_ms": 3000, "wait": True})
    waiting = await driver.send({"op": "keeper.wait_owner", "keeper": "w", "timeout_ms": None})
    owner = await driver.ask({"op": "call", "method": "owner", "args": {"key": key}})
    revision = owner["ok"]["revision"]
    await driver.ask({"op": "call", "method": "release", "args": {"key": key, "holder": "h-3", "revision": revision}})
    assert (await driver.answer(waiting))["ok"]["fence"] > revision
