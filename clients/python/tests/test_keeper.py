"""LeaseKeeper against the real gateway: the holder rules (docs/protocol.md,
Holder rules and client libraries), and what is particular to asyncio:
``async with``, cancellation, the ``changes()`` iterator."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from conftest import Stack
from dagnats_leases.keeper import CHANGES_KEPT
from dagnats_leases import NOT_OWNER, FreeKey, Lease, LeaseClient, LeaseError, LeaseKeeper, Ownership
from leader_process import leader
from waiting import eventually



async def test_a_keeper_acquires_and_its_fence_is_its_tenure(client: LeaseClient, key: str) -> None:
    async with LeaseKeeper(client, key, "holder-a", 3000) as keeper:
        fence = await keeper.wait_owner(timeout=5)
        assert keeper.fence() == fence == keeper.tenure()
        owner = await client.owner(key)
        assert isinstance(owner, Lease) and (owner.holder, owner.revision) == ("holder-a", fence)


async def test_a_keeper_renews_about_every_third_of_its_ttl(nc: NATS, client: LeaseClient, key: str) -> None:
    renewals: list[float] = []

    async def on_change(msg: Msg) -> None:
        if (msg.headers or {}).get("Dagnats-Lease-Event") == "renewed":
            renewals.append(time.monotonic())

    sub = await nc.subscribe(f"dagnats.lease.changed.{key}", cb=on_change)
    async with LeaseKeeper(client, key, "holder-a", 3000) as keeper:
        tenure = await keeper.wait_owner(timeout=5)
        await eventually("four renewals", lambda: len(renewals) >= 4, deadline=8)
        assert keeper.tenure() == tenure
        assert (keeper.fence() or 0) > tenure
    await sub.unsubscribe()
    gaps = [b - a for a, b in zip(renewals, renewals[1:])]
    assert all(0.8 <= gap <= 1.3 for gap in gaps), gaps


async def test_leaving_async_with_releases_the_lease(client: LeaseClient, key: str) -> None:
    async with LeaseKeeper(client, key, "holder-a", 3000) as keeper:
        await keeper.wait_owner(timeout=5)
    assert keeper.fence() is None and keeper.tenure() is None
    owner = await client.owner(key)
    assert owner.held is False


async def test_a_waiting_keeper_takes_over_within_a_second_of_a_release(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 30000)
    async with LeaseKeeper(client, key, "holder-b", 3000) as waiting:
        with pytest.raises(LeaseError) as caught:
            await waiting.wait_owner(timeout=0.3)
        assert caught.value.kind == "timeout"
        released_at = time.monotonic()
        await client.release(key, "holder-a", first.revision)
        fence = await waiting.wait_owner(timeout=1.0)
        assert time.monotonic() - released_at < 1.0
        assert fence > first.revision


async def test_without_wait_a_keeper_gives_up_on_a_held_key(client: LeaseClient, key: str) -> None:
    await client.acquire(key, "holder-a", 5000)
    async with LeaseKeeper(client, key, "holder-b", 3000, wait=False) as keeper:
        with pytest.raises(LeaseError) as caught:
            await keeper.wait_owner(timeout=5)
        assert caught.value.kind == "lost"
        assert "holder-a" in caught.value.message
        assert keeper.fence() is None


async def test_a_lost_renew_ends_ownership_at_once(client: LeaseClient, key: str) -> None:
    async with LeaseKeeper(client, key, "holder-a", 3000, wait=False) as keeper:
        changes = keeper.changes()
        became = await asyncio.wait_for(anext(changes), 5)
        assert became.owner and became.fence is not None
        # Someone moves the lease on behind the keeper's back.
        await client.transfer(key, "holder-a", keeper.fence() or 0, "holder-b", 30000)
        lost = await asyncio.wait_for(anext(changes), 3)
        assert lost == NOT_OWNER
        assert keeper.fence() is None and keeper.tenure() is None
        owner = await client.owner(key)
        assert isinstance(owner, Lease) and owner.holder == "holder-b"


async def test_fence_is_none_from_the_deadline_when_the_gateway_stops_answering(own_stack: Stack, key: str) -> None:
    conn = await nats.connect(own_stack.url)
    try:
        async with LeaseKeeper(LeaseClient(conn, timeout=1.0), key, "holder-a", 2000) as keeper:
            await keeper.wait_owner(timeout=5)
            # Just after a renewal landed, so the deadline is about 2 s away.
            fence = keeper.fence()
            await eventually("a renewal", lambda: (keeper.fence() or 0) > (fence or 0), deadline=2)
            assert own_stack.gateway is not None
            own_stack.gateway.stop()
            stopped = time.monotonic()
            assert keeper.fence() is not None
            await eventually("fence() None", lambda: keeper.fence() is None, deadline=3)
            gone = time.monotonic() - stopped
            # The last renewal started before the stop: at most one TTL later.
            assert 1.0 < gone <= 2.05, gone
    finally:
        await conn.close()


async def test_hand_off_moves_the_lease_to_a_waiting_keeper_with_no_free_moment(
    nc: NATS, client: LeaseClient, key: str
) -> None:
    events: list[tuple[str, str | None]] = []

    async def on_change(msg: Msg) -> None:
        headers = msg.headers or {}
        holder = json.loads(msg.data).get("holder") if msg.data else None
        events.append((headers.get("Dagnats-Lease-Event") or headers.get("Nats-Marker-Reason") or "?", holder))

    sub = await nc.subscribe(f"dagnats.lease.changed.{key}", cb=on_change)
    a = LeaseKeeper(client, key, "holder-a", 3000).start()
    await a.wait_owner(timeout=5)
    async with LeaseKeeper(client, key, "holder-b", 3000) as b:
        moved = await a.hand_off("holder-b")
        assert (moved.granted, moved.holder) == (True, "holder-b")
        assert a.fence() is None
        fence = await b.wait_owner(timeout=2)
        assert b.tenure() == moved.revision and fence >= moved.revision
        owner = await client.owner(key)
        assert isinstance(owner, Lease) and owner.holder == "holder-b"
    await sub.unsubscribe()
    # Nothing freed the key between a's tenure and b's.
    handed = events.index(("acquired", "holder-b"))
    assert all(event in ("acquired", "renewed") for event, _ in events[: handed + 1]), events


async def test_hand_off_by_a_keeper_that_does_not_hold_the_lease_is_lost(client: LeaseClient, key: str) -> None:
    await client.acquire(key, "holder-a", 5000)
    keeper = LeaseKeeper(client, key, "holder-b", 3000).start()
    with pytest.raises(LeaseError) as caught:
        await keeper.hand_off("holder-c")
    assert caught.value.kind == "lost"
    owner = await client.owner(key)
    assert isinstance(owner, Lease) and owner.holder == "holder-a"


async def test_hand_off_to_itself_is_invalid_and_the_keeper_keeps_going(client: LeaseClient, key: str) -> None:
    async with LeaseKeeper(client, key, "holder-a", 3000) as keeper:
        fence = await keeper.wait_owner(timeout=5)
        with pytest.raises(LeaseError) as caught:
            await keeper.hand_off("holder-a")
        assert caught.value.kind == "invalid"
        assert (keeper.fence() or 0) >= fence


async def test_changes_yields_a_tenure_its_renewals_and_its_end_and_ends_on_stop(client: LeaseClient, key: str) -> None:
    keeper = LeaseKeeper(client, key, "holder-a", 3000)
    changes = keeper.changes()
    keeper.start()
    became = await asyncio.wait_for(anext(changes), 5)
    assert isinstance(became, Ownership)
    assert became.owner and became.fence == became.tenure is not None
    renewed = await asyncio.wait_for(anext(changes), 3)
    assert renewed.owner and renewed.tenure == became.tenure
    assert (renewed.fence or 0) > (became.fence or 0)
    await keeper.stop()
    assert await asyncio.wait_for(anext(changes), 1) == NOT_OWNER
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(changes), 1)
    # A reader that comes after the end sees the end.
    with pytest.raises(StopAsyncIteration):
        await anext(keeper.changes())


async def test_cancelling_wait_owner_leaves_the_keeper_running(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 30000)
    async with LeaseKeeper(client, key, "holder-b", 3000) as keeper:
        waiter = asyncio.ensure_future(keeper.wait_owner())
        await asyncio.sleep(0.1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await client.release(key, "holder-a", first.revision)
        assert await keeper.wait_owner(timeout=2) > first.revision


async def test_stop_is_idempotent_and_stopping_a_waiting_keeper_takes_nothing(client: LeaseClient, key: str) -> None:
    await client.acquire(key, "holder-a", 5000)
    keeper = LeaseKeeper(client, key, "holder-b", 3000).start()
    await keeper.stop()
    await keeper.stop()
    owner = await client.owner(key)
    assert isinstance(owner, Lease) and owner.holder == "holder-a"
    with pytest.raises(LeaseError) as caught:
        await keeper.wait_owner(timeout=1)
    assert caught.value.kind == "lost"


async def test_out_of_bounds_keeper_settings_are_invalid_before_anything_runs(client: LeaseClient) -> None:
    for key, holder, ttl_ms in [("a.b", "h", 3000), ("k", "", 3000), ("k", "h", 2500)]:
        with pytest.raises(LeaseError) as caught:
            LeaseKeeper(client, key, holder, ttl_ms)
        assert caught.value.kind == "invalid"


async def test_wait_owner_before_start_is_a_usage_error(client: LeaseClient, key: str) -> None:
    with pytest.raises(RuntimeError):
        await LeaseKeeper(client, key, "holder-a", 3000).wait_owner(timeout=1)


async def test_a_waiting_keeper_takes_over_within_ttl_and_a_second_of_the_holder_being_killed(
    stack: Stack, client: LeaseClient, key: str
) -> None:
    async with leader(stack.url, key, "doomed", 2000) as holder:
        assert holder.stdout is not None
        for _ in range(2):  # "waiting for", then "leading at fence N"
            await asyncio.wait_for(holder.stdout.readline(), 10)
        async with LeaseKeeper(client, key, "survivor", 2000) as waiting:
            holder.kill()
            killed = time.monotonic()
            await waiting.wait_owner(timeout=4)
            assert time.monotonic() - killed < 2.0 + 1.0


async def test_cancelling_the_task_inside_async_with_releases_the_lease(client: LeaseClient, key: str) -> None:
    leading = asyncio.Event()

    async def lead() -> None:
        async with LeaseKeeper(client, key, "holder-a", 3000) as keeper:
            await keeper.wait_owner(timeout=5)
            leading.set()
            await asyncio.Event().wait()  # work until cancelled

    task = asyncio.ensure_future(lead())
    await asyncio.wait_for(leading.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await client.owner(key) == FreeKey(held=False, key=key)


async def test_a_changes_reader_that_falls_behind_keeps_the_latest(client: LeaseClient, key: str) -> None:
    keeper = LeaseKeeper(client, key, "holder-a", 3000)
    changes = keeper.changes()
    for fence in range(1, CHANGES_KEPT + 11):
        keeper._publish(Ownership(True, fence, 1, time.monotonic() + 3))
    keeper._publish(NOT_OWNER)
    seen = [changes_item async for changes_item in _take(changes, CHANGES_KEPT)]
    assert len(seen) == CHANGES_KEPT
    assert seen[-1] == NOT_OWNER
    assert [s.fence for s in seen[:-1]] == list(range(11, CHANGES_KEPT + 11))[-(CHANGES_KEPT - 1) :]


async def _take(it: AsyncIterator[Ownership], n: int) -> AsyncIterator[Ownership]:
    for _ in range(n):
        yield await asyncio.wait_for(anext(it), 1)
