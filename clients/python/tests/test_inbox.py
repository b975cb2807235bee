"""serve_inbox: the owner side of forward, through the real gateway, and its
three rejection rules (docs/protocol.md, Forwarding to the owner)."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.aio.client import Client as NATS

from dagnats_leases import InboxRequest, LeaseClient, LeaseError, LeaseKeeper, serve_inbox
from dagnats_leases.inbox import check

from conftest import Stack

PREFIX = "dagnats.lease.inbox.w."


def tenure_10_on_k(key: str) -> int | None:
    return 10 if key == "k" else None


async def test_a_forward_reaches_the_handler_with_key_fence_and_payload(nc: NATS, client: LeaseClient, key: str) -> None:
    seen: list[InboxRequest] = []

    async def handler(request: InboxRequest) -> bytes:
        seen.append(request)
        return b"echo:" + request.payload

    async with LeaseKeeper(client, key, "owner-1", 3000) as keeper:
        await keeper.wait_owner(timeout=5)
        tenure = lambda k: keeper.tenure() if k == key else None  # noqa: E731
        async with await serve_inbox(nc, "owner-1", tenure, handler):
            reply = await client.forward(key, b"\x00hello\xff", timeout_ms=2000)
    assert reply == b"echo:\x00hello\xff"
    assert len(seen) == 1
    assert (seen[0].key, seen[0].payload) == (key, b"\x00hello\xff")
    assert seen[0].fence >= (keeper.ownership().tenure or 0)


async def test_a_request_for_a_key_not_owned_now_is_rejected_before_the_handler(
    nc: NATS, client: LeaseClient, key: str
) -> None:
    grant = await client.acquire(key, "owner-2", 5000)
    called = 0

    async def handler(request: InboxRequest) -> bytes:
        nonlocal called
        called += 1
        return b"no"

    async with await serve_inbox(nc, "owner-2", lambda k: None, handler):
        with pytest.raises(LeaseError) as caught:
            await client.forward(key, b"x", timeout_ms=2000)
    assert (caught.value.kind, caught.value.holder, caught.value.revision) == ("owner_rejected", "owner-2", grant.revision)
    assert called == 0


async def test_a_fence_below_the_tenure_is_rejected(nc: NATS, client: LeaseClient, key: str) -> None:
    grant = await client.acquire(key, "owner-3", 5000)

    async def handler(request: InboxRequest) -> bytes:
        raise AssertionError("a rejected request reached the handler")

    async with await serve_inbox(nc, "owner-3", lambda k: grant.revision + 1, handler):
        with pytest.raises(LeaseError) as caught:
            await client.forward(key, b"x", timeout_ms=2000)
    assert caught.value.kind == "owner_rejected"


async def test_the_inbox_is_subscribed_at_the_server_when_serve_inbox_returns(nc: NATS, stack: Stack) -> None:
    # Publishes still queued for nats-py's flusher when serve_inbox
    # subscribes: its own flush() would return before the SUB reached the
    # server, and a request from another connection met no responders.
    async def handler(request: InboxRequest) -> bytes:
        return b"ok"

    other = await nats.connect(stack.url)
    try:
        for round in range(200):
            for _ in range(20):
                await nc.publish("noise", b"x" * 1000)
            async with await serve_inbox(nc, f"w{round}", tenure_10_on_k, handler):
                reply = await other.request(
                    f"dagnats.lease.inbox.w{round}.k", b"x", timeout=2, headers={"Dagnats-Lease-Fence": "10"}
                )
            assert reply.data == b"ok", round
    finally:
        await other.close()


@pytest.mark.parametrize("fence", [None, "", "-1", "1.5", "x", "+12", "١٢", str(2**64)])
async def test_a_missing_or_malformed_fence_is_rejected_with_the_stale_header(nc: NATS, fence: str | None) -> None:
    async def handler(request: InboxRequest) -> bytes:
        raise AssertionError("a rejected request reached the handler")

    async with await serve_inbox(nc, "w", tenure_10_on_k, handler):
        headers = None if fence is None else {"Dagnats-Lease-Fence": fence}
        reply = await nc.request(PREFIX + "k", b"x", timeout=2, headers=headers)
    assert reply.data == b""
    assert reply.headers == {"Dagnats-Lease-Reject": "stale"}


async def test_the_fence_header_is_read_whatever_the_case_of_its_name(nc: NATS) -> None:
    async def handler(request: InboxRequest) -> bytes:
        return str(request.fence).encode()

    async with await serve_inbox(nc, "w", tenure_10_on_k, handler):
        reply = await nc.request(PREFIX + "k", b"x", timeout=2, headers={"dagnats-lease-fence": "11"})
    assert reply.data == b"11"


async def test_after_stop_nothing_answers_the_inbox(nc: NATS, client: LeaseClient, key: str) -> None:
    grant = await client.acquire(key, "owner-4", 5000)

    async def handler(request: InboxRequest) -> bytes:
        return b"ok"

    server = await serve_inbox(nc, "owner-4", lambda k: grant.revision, handler)
    assert await client.forward(key, b"x", timeout_ms=2000) == b"ok"
    await server.stop()
    await server.stop()
    with pytest.raises(LeaseError) as caught:
        await client.forward(key, b"x", timeout_ms=1000)
    assert caught.value.kind == "owner_unavailable"


async def test_stop_waits_for_the_handlers_already_running(nc: NATS) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def handler(request: InboxRequest) -> bytes:
        entered.set()
        await release.wait()
        return b"late"

    server = await serve_inbox(nc, "w", tenure_10_on_k, handler)
    pending = asyncio.ensure_future(nc.request(PREFIX + "k", b"x", timeout=3, headers={"Dagnats-Lease-Fence": "10"}))
    await asyncio.wait_for(entered.wait(), 2)
    stopping = asyncio.ensure_future(server.stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()
    release.set()
    await asyncio.wait_for(stopping, 2)
    assert (await pending).data == b"late"


async def test_a_handler_that_raises_leaves_the_request_unanswered(nc: NATS, client: LeaseClient, key: str) -> None:
    grant = await client.acquire(key, "owner-5", 5000)

    async def handler(request: InboxRequest) -> bytes:
        raise RuntimeError("boom")

    async with await serve_inbox(nc, "owner-5", lambda k: grant.revision, handler):
        with pytest.raises(LeaseError) as caught:
            await client.forward(key, b"x", timeout_ms=500)
    assert caught.value.kind == "owner_timeout"


async def test_an_invalid_holder_is_refused_before_subscribing(nc: NATS) -> None:
    async def handler(request: InboxRequest) -> bytes:
        return b""

    with pytest.raises(LeaseError) as caught:
        await serve_inbox(nc, "a.b", tenure_10_on_k, handler)
    assert caught.value.kind == "invalid"


def test_check_accepts_a_fence_at_or_above_the_tenure() -> None:
    for fence in ("10", "12"):
        request = check(PREFIX + "k", {"Dagnats-Lease-Fence": fence}, b"p", PREFIX, tenure_10_on_k)
        assert request == InboxRequest(key="k", fence=int(fence), payload=b"p")


def test_check_rejects_each_rule() -> None:
    assert check(PREFIX + "other", {"Dagnats-Lease-Fence": "12"}, b"", PREFIX, tenure_10_on_k) is None
    assert check(PREFIX + "k", None, b"", PREFIX, tenure_10_on_k) is None
    assert check(PREFIX + "k", {"Dagnats-Lease-Fence": "9"}, b"", PREFIX, tenure_10_on_k) is None
