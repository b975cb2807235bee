"""LeaseClient against the real gateway: every call's typed reply, and the
errors, with their kinds (docs/protocol.md, Operations, Replies, Error kinds)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from dagnats_leases import FreeKey, Grant, Lease, LeaseClient, LeaseError, LeaseList, Released


async def test_acquire_grants_a_free_key_with_the_wire_fields(client: LeaseClient, key: str) -> None:
    before = datetime.now(timezone.utc)
    got = await client.acquire(key, "holder-a", 5000)
    assert isinstance(got, Grant)
    assert (got.granted, got.held, got.key, got.holder, got.ttl_ms) == (True, True, key, "holder-a", 5000)
    assert isinstance(got.revision, int) and got.revision >= 1
    assert got.acquired_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= got.acquired_at <= got.expires_at
    assert got.expires_at - got.acquired_at <= timedelta(milliseconds=5000)


async def test_acquire_of_a_held_key_is_not_granted_and_names_the_holder(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    other = await client.acquire(key, "holder-b", 3000)
    assert (other.granted, other.held, other.holder, other.revision, other.ttl_ms) == (
        False,
        True,
        "holder-a",
        first.revision,
        5000,
    )


async def test_acquire_again_by_the_holder_returns_the_same_lease(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    again = await client.acquire(key, "holder-a", 5000)
    assert (again.granted, again.revision, again.expires_at) == (True, first.revision, first.expires_at)


async def test_renew_raises_the_fence_and_keeps_the_tenure_start(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    renewed = await client.renew(key, "holder-a", first.revision, 10000)
    assert renewed.granted and renewed.revision > first.revision
    assert (renewed.acquired_at, renewed.ttl_ms) == (first.acquired_at, 10000)


async def test_renew_at_a_stale_fence_raises_lost(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    await client.renew(key, "holder-a", first.revision, 5000)
    with pytest.raises(LeaseError) as caught:
        await client.renew(key, "holder-a", first.revision + 100, 5000)
    assert (caught.value.kind, caught.value.holder, caught.value.revision) == ("lost", None, None)
    assert caught.value.lost


async def test_release_frees_the_key_and_owner_says_so(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    released = await client.release(key, "holder-a", first.revision)
    assert isinstance(released, Released)
    assert (released.released, released.held, released.key, released.holder) == (True, False, key, "holder-a")
    assert released.revision > first.revision
    assert await client.owner(key) == FreeKey(held=False, key=key)


async def test_owner_reports_the_lease(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    owner = await client.owner(key)
    assert isinstance(owner, Lease)
    assert (owner.held, owner.key, owner.holder, owner.revision, owner.acquired_at) == (
        True,
        key,
        "holder-a",
        first.revision,
        first.acquired_at,
    )


async def test_transfer_makes_the_new_holder_own_at_a_higher_fence(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    moved = await client.transfer(key, "holder-a", first.revision, "holder-b", 3000)
    assert (moved.granted, moved.holder, moved.ttl_ms) == (True, "holder-b", 3000)
    assert moved.revision > first.revision
    with pytest.raises(LeaseError) as caught:
        await client.renew(key, "holder-a", first.revision, 5000)
    assert caught.value.kind == "lost"


async def test_list_pages_through_held_leases_by_key(client: LeaseClient, key: str) -> None:
    for i in range(3):
        await client.acquire(f"{key}-{i}", "holder-a", 5000)
    first = await client.list(prefix=key, limit=2)
    assert isinstance(first, LeaseList)
    assert [lease.key for lease in first.leases] == [f"{key}-0", f"{key}-1"]
    assert first.next == f"{key}-1"
    rest = await client.list(prefix=key, after=first.next)
    assert ([lease.key for lease in rest.leases], rest.next) == ([f"{key}-2"], None)
    assert all(isinstance(lease, Lease) and lease.holder == "holder-a" for lease in rest.leases)


async def test_forward_to_a_free_key_is_not_held(client: LeaseClient, key: str) -> None:
    with pytest.raises(LeaseError) as caught:
        await client.forward(key, b"hello", timeout_ms=1000)
    assert caught.value.kind == "not_held"


async def test_forward_with_no_inbox_names_the_owner_last_tried(client: LeaseClient, key: str) -> None:
    first = await client.acquire(key, "holder-a", 5000)
    with pytest.raises(LeaseError) as caught:
        await client.forward(key, b"hello", timeout_ms=1000)
    assert (caught.value.kind, caught.value.holder, caught.value.revision) == (
        "owner_unavailable",
        "holder-a",
        first.revision,
    )


async def test_replies_are_immutable(client: LeaseClient, key: str) -> None:
    got = await client.acquire(key, "holder-a", 5000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.revision = 1  # type: ignore[misc]
