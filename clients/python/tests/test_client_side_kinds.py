"""The failures the gateway does not answer, each with its client-side kind:
``invalid`` before anything is sent, ``unavailable``, ``timeout``,
``internal`` (docs/protocol.md, Holder rules and client libraries). A real
nats-server with no gateway; where a reply is needed, the test answers the
lease subject itself."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from conftest import Stack
from dagnats_leases import LeaseClient, LeaseError
from waiting import eventually


@pytest.fixture
async def bare_nc(bare_nats: Stack) -> AsyncIterator[NATS]:
    conn = await nats.connect(bare_nats.url)
    yield conn
    await conn.close()


Arrival = tuple[float, dict[str, str] | None]


async def unanswered(nc: NATS, subject: str) -> list[Arrival]:
    """Subscribes to ``subject`` and answers nothing: the list fills with
    each request's arrival time and headers."""
    arrivals: list[Arrival] = []

    async def record(msg: Msg) -> None:
        arrivals.append((time.monotonic(), msg.headers))

    await nc.subscribe(subject, cb=record)
    await nc.flush()
    return arrivals


Call = Callable[[LeaseClient], Awaitable[Any]]

OUT_OF_BOUNDS: dict[str, Call] = {
    "ttl-not-whole-seconds": lambda c: c.acquire("k", "h", 1500),
    "ttl-below-1s": lambda c: c.acquire("k", "h", 0),
    "ttl-above-10m": lambda c: c.renew("k", "h", 3, 601_000),
    "ttl-not-an-int": lambda c: c.acquire("k", "h", 15000.0),  # type: ignore[arg-type]
    "ttl-a-bool": lambda c: c.acquire("k", "h", True),
    "key-with-a-dot": lambda c: c.acquire("a.b", "h", 1000),
    "key-empty": lambda c: c.owner(""),
    "key-wildcard": lambda c: c.owner(">"),
    "key-129-bytes": lambda c: c.owner("k" * 129),
    "key-not-ascii": lambda c: c.owner("ключ"),
    "holder-with-a-space": lambda c: c.acquire("k", "a b", 1000),
    "revision-0": lambda c: c.renew("k", "h", 0, 1000),
    "revision-negative": lambda c: c.release("k", "h", -1),
    "transfer-to-itself": lambda c: c.transfer("k", "h", 3, "h", 1000),
    "transfer-to-bad-holder": lambda c: c.transfer("k", "h", 3, "a.b", 1000),
    "forward-timeout-99": lambda c: c.forward("k", b"", timeout_ms=99),
    "forward-timeout-30001": lambda c: c.forward("k", b"", timeout_ms=30001),
    "forward-payload-str": lambda c: c.forward("k", "text"),  # type: ignore[arg-type]
    "list-limit-0": lambda c: c.list(limit=0),
    "list-limit-5001": lambda c: c.list(limit=5001),
    "list-after-empty": lambda c: c.list(after=""),
    "list-prefix-dot": lambda c: c.list(prefix="a."),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_BOUNDS))
async def test_out_of_bounds_input_is_invalid_and_nothing_is_sent(bare_nc: NATS, case: str) -> None:
    seen = await unanswered(bare_nc, "api.leases.>")
    with pytest.raises(LeaseError) as caught:
        await OUT_OF_BOUNDS[case](LeaseClient(bare_nc))
    assert (caught.value.kind, caught.value.holder, caught.value.revision) == ("invalid", None, None)
    await bare_nc.flush()
    assert seen == []


async def test_a_forward_too_large_for_max_payload_is_payload_too_large_and_nothing_is_sent(bare_nc: NATS) -> None:
    subjects: list[str] = []

    async def record(msg: Msg) -> None:
        subjects.append(msg.subject)

    await bare_nc.subscribe("api.leases.>", cb=record)
    await bare_nc.flush()
    # Base64 in the request makes it a third larger than max_payload.
    payload = b"x" * (bare_nc.max_payload * 3 // 4 + 1)
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(bare_nc).forward("k", payload)
    assert (caught.value.kind, caught.value.holder, caught.value.revision) == ("payload_too_large", None, None)
    # A last message on the same connection: had the forward left, it came first.
    await bare_nc.publish("api.leases.sentinel", b"")
    await eventually("the sentinel arrives", lambda: subjects or None)
    assert subjects == ["api.leases.sentinel"]


async def test_no_gateway_is_unavailable(bare_nc: NATS) -> None:
    started = time.monotonic()
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(bare_nc, timeout=5.0).owner("k")
    assert caught.value.kind == "unavailable"
    # No responders is known at once, not after the timeout.
    assert time.monotonic() - started < 1.0


async def test_a_closed_connection_is_unavailable(bare_nats: Stack) -> None:
    conn = await nats.connect(bare_nats.url)
    await conn.close()
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(conn).owner("k")
    assert caught.value.kind == "unavailable"


async def test_no_reply_in_time_is_timeout_after_copies_at_half_and_three_quarters(bare_nc: NATS) -> None:
    arrivals = await unanswered(bare_nc, "api.leases.owner")
    started = time.monotonic()
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(bare_nc, timeout=1.0).owner("k")
    elapsed = time.monotonic() - started
    assert caught.value.kind == "timeout"
    assert 1.0 <= elapsed < 1.5
    assert len(arrivals) == 3
    offsets = [at - started for at, _ in arrivals]
    assert offsets[0] < 0.2
    assert 0.5 <= offsets[1] < 0.7 and 0.75 <= offsets[2] < 0.95
    # Each copy says how long it is still waited for: below the gateway's
    # own 4.5 s budget, that bounds the call.
    waits = [int((headers or {})["Dagnats-Lease-Wait-Ms"]) for _, headers in arrivals]
    assert 900 <= waits[0] <= 1000 and 400 <= waits[1] <= 500 and 150 <= waits[2] <= 250


async def test_a_copy_waited_for_longer_than_the_gateway_budget_says_nothing(bare_nc: NATS) -> None:
    arrivals: list[dict[str, str] | None] = []

    async def answer(msg: Msg) -> None:
        arrivals.append(msg.headers)
        await msg.respond(json.dumps({"held": False, "key": "k"}).encode())

    await bare_nc.subscribe("api.leases.owner", cb=answer)
    await bare_nc.flush()
    await LeaseClient(bare_nc, timeout=5.0).owner("k")
    assert len(arrivals) == 1
    assert "Dagnats-Lease-Wait-Ms" not in (arrivals[0] or {})


async def test_a_late_copy_answered_wins(bare_nc: NATS) -> None:
    copies = 0

    async def second_copy_answers(msg: Msg) -> None:
        nonlocal copies
        copies += 1
        if copies == 2:
            await msg.respond(json.dumps({"held": False, "key": "k"}).encode())

    await bare_nc.subscribe("api.leases.owner", cb=second_copy_answers)
    await bare_nc.flush()
    got = await LeaseClient(bare_nc, timeout=1.0).owner("k")
    assert (got.held, got.key) == (False, "k")
    assert copies == 2


async def test_forward_is_sent_once_however_late_its_reply(bare_nc: NATS) -> None:
    arrivals = await unanswered(bare_nc, "api.leases.forward")
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(bare_nc).forward("k", b"x", timeout_ms=100)
    assert caught.value.kind == "timeout"
    assert len(arrivals) == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"held": true, "key": "k"}',
        b'{"held": true, "key": "k", "holder": "h", "revision": "7", "acquired_at": "2026-10-18T12:00:00.000Z", "expires_at": "2026-10-18T12:00:05.000Z", "ttl_ms": 5000}',
        b'{"held": true, "key": "k", "holder": "h", "revision": 7, "acquired_at": "yesterday", "expires_at": "2026-10-18T12:00:05.000Z", "ttl_ms": 5000}',
        b'{"held": true, "key": "k", "holder": "h", "revision": -7, "acquired_at": "2026-10-18T12:00:00.000Z", "expires_at": "2026-10-18T12:00:05.000Z", "ttl_ms": 5000}',
    ],
    ids=["not-json", "not-an-object", "missing-fields", "revision-a-string", "time-not-rfc3339", "revision-negative"],
)
async def test_an_unreadable_reply_is_internal(bare_nc: NATS, body: bytes) -> None:
    async def answer(msg: Msg) -> None:
        await msg.respond(body)

    await bare_nc.subscribe("api.leases.owner", cb=answer)
    await bare_nc.flush()
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(bare_nc).owner("k")
    assert caught.value.kind == "internal"


def _replies_with_revision(rev: int) -> dict[str, dict[str, Any]]:
    """A reply for every call, each carrying the revision ``rev``."""
    lease = {
        "held": True, "key": "k", "holder": "h", "revision": rev, "ttl_ms": 3000,
        "acquired_at": "2026-10-18T12:00:00.000Z", "expires_at": "2026-10-18T12:00:03.000Z",
    }
    return {
        "acquire": {"granted": True, **lease},
        "renew": {"granted": True, **lease},
        "transfer": {"granted": True, **lease},
        "release": {"released": True, "held": False, "key": "k", "holder": "h", "revision": rev},
        "owner": lease,
        "list": {"leases": [lease], "next": None},
        "forward": {"error": "the owner did not answer", "kind": "owner_timeout", "holder": "h", "revision": rev},
    }


def _every_call(c: LeaseClient) -> dict[str, Awaitable[Any]]:
    return {
        "acquire": c.acquire("k", "h", 3000),
        "renew": c.renew("k", "h", 1, 3000),
        "transfer": c.transfer("k", "h", 1, "g", 3000),
        "release": c.release("k", "h", 1),
        "owner": c.owner("k"),
        "list": c.list(),
        "forward": c.forward("k", b"x"),
    }


@pytest.mark.parametrize("rev", [2**53 - 1, 2**53, 2**64 - 1])
async def test_a_reply_whose_revision_is_not_a_safe_integer_is_internal(bare_nc: NATS, rev: int) -> None:
    replies = _replies_with_revision(rev)

    async def answer(msg: Msg) -> None:
        await msg.respond(json.dumps(replies[msg.subject.rsplit(".", 1)[1]]).encode())

    await bare_nc.subscribe("api.leases.*", cb=answer)
    await bare_nc.flush()
    for method, call in _every_call(LeaseClient(bare_nc)).items():
        try:
            await call
            kind = None
        except LeaseError as err:
            kind = err.kind
        # Below 2^53 the replies are read; forward's is an error reply.
        want = "internal" if rev > 2**53 - 1 else "owner_timeout" if method == "forward" else None
        assert kind == want, method


async def test_an_error_reply_keeps_its_kind_holder_and_revision(bare_nc: NATS) -> None:
    reply = {"error": "the owner did not answer", "kind": "owner_timeout", "holder": "h-1", "revision": 42}

    async def answer(msg: Msg) -> None:
        await msg.respond(json.dumps(reply).encode())

    await bare_nc.subscribe("api.leases.forward", cb=answer)
    await bare_nc.flush()
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(bare_nc).forward("k", b"x")
    err = caught.value
    assert (err.kind, err.message, err.holder, err.revision) == ("owner_timeout", "the owner did not answer", "h-1", 42)


async def test_a_kind_this_library_does_not_know_is_kept_as_sent(bare_nc: NATS) -> None:
    async def answer(msg: Msg) -> None:
        await msg.respond(b'{"error": "new", "kind": "brand_new"}')

    await bare_nc.subscribe("api.leases.acquire", cb=answer)
    await bare_nc.flush()
    with pytest.raises(LeaseError) as caught:
        await LeaseClient(bare_nc).acquire("k", "h", 1000)
    assert caught.value.kind == "brand_new"


async def test_a_cancelled_call_leaves_no_request_behind(bare_nc: NATS) -> None:
    arrivals = await unanswered(bare_nc, "api.leases.owner")
    started = time.monotonic()
    call = asyncio.ensure_future(LeaseClient(bare_nc, timeout=1.0).owner("k"))
    await eventually("the first copy", lambda: len(arrivals) == 1, deadline=0.4)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # Past the times the copies would have left (0.5 s and 0.75 s), none has.
    await asyncio.sleep(started + 0.9 - time.monotonic())
    await bare_nc.flush()
    assert len(arrivals) == 1
