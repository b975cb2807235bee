"""`LeaseKeeper`: holds one lease for as long as this process is healthy.

It acquires (waiting, if asked, woken by the key's change events rather
than by polling), renews about every ttl/3, and knows at every moment
whether this process may act as owner (docs/protocol.md, Holder rules and
client libraries). Ownership ends the moment a renew answers ``lost``, or
the moment the lease may have run out without a renewal landing. That
moment is measured on this process's monotonic clock from the *start* of
the request that granted or renewed the lease, and never past the reply's
``expires_at``, so no reply delay, pause or clock skew can stretch it:
`LeaseKeeper.fence` checks the clock on every call, so a process that was
paused (SIGSTOP, a VM freeze, a long GC) sees None the moment it runs again,
before any timer of its own has fired.

Handing over is one transfer: `LeaseKeeper.hand_off` stops acting as owner
first, then transfers. A keeper waiting for the key that the transfer names
takes it over at the transferred fence with no moment the key is free; its
entitlement starts like any other, from the start of a request of its own
(a renew at that fence, sent the moment it sees the transfer).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from . import _bounds as bounds
from ._names import changed_subject
from .changes import decode_change
from .client import LeaseClient
from .errors import LOST, TIMEOUT, LeaseError
from .replies import Grant

_log = logging.getLogger("dagnats_leases")

RETRY_MIN = 0.1
"""Seconds before the first retry of a failed call that was not ``lost``."""
RETRY_MAX = 2.0
"""The longest wait between two retries; each failure doubles it up to this."""
CHANGES_KEPT = 64
"""Changes kept for a `LeaseKeeper.changes` reader that does not read; the oldest go first."""


@dataclass(frozen=True, slots=True)
class Ownership:
    """Whether this process may act as owner, as one change reported it.

    ``until`` is the `time.monotonic` instant the entitlement ends, unless
    renewed; use `LeaseKeeper.fence` at the moment of a write, which checks
    it, rather than a value kept from an earlier change.
    """

    owner: bool
    fence: int | None
    """The revision to send with every write while owner."""
    tenure: int | None
    """The first revision of this tenure (renewals raise the fence, not the tenure)."""
    until: float | None

    def fence_now(self) -> int | None:
        """``fence`` if this ownership still entitles this process to act now."""
        return self.fence if self.owner and self.until is not None and time.monotonic() < self.until else None


NOT_OWNER = Ownership(owner=False, fence=None, tenure=None, until=None)
"""Never acquired, lost, released, handed off, or run out."""


class _Woke(enum.Enum):
    STOP = "stop"
    CALL = "call"
    DEADLINE = "deadline"


@dataclass(frozen=True, slots=True)
class _HandOff:
    to: str
    reply: asyncio.Future[Grant]

    def refuse(self, err: LeaseError) -> None:
        """Answers ``err``, unless the asker has gone (its future cancelled)."""
        if not self.reply.done():
            self.reply.set_exception(err)


def _not_the_owner() -> LeaseError:
    return LeaseError(LOST, "this keeper does not hold the lease")


def _entitled_until(started: float, lease: Grant) -> float:
    """The monotonic instant a grant entitles us to act until: ``ttl_ms``
    after the request started, and never past the reported ``expires_at``."""
    by_ttl = started + lease.ttl_ms / 1000
    left = (lease.expires_at - datetime.now(timezone.utc)).total_seconds()
    return min(by_ttl, time.monotonic() + max(left, 0.0))


class LeaseKeeper:
    """Keeps ``key`` for ``holder`` in the background, renewing every ttl/3.

    With ``wait`` (the default) it waits for a held key and takes it again
    after a loss; without, it gives up when someone else holds the key.
    Use it as ``async with LeaseKeeper(...) as keeper:``, which starts it and
    stops it (releasing the lease) on the way out, or call `start` and
    `stop` yourself. Before every write as owner, read `fence` and send it
    with the write; None means do not write.
    """

    def __init__(self, client: LeaseClient, key: str, holder: str, ttl_ms: int, wait: bool = True) -> None:
        self._client = client
        self._key = bounds.name("key", key)
        self._holder = bounds.name("holder", holder)
        self._ttl_ms = bounds.ttl_ms(ttl_ms)
        self._waits = bool(wait)
        self._state = NOT_OWNER
        self._published = asyncio.Event()
        self._watchers: list[asyncio.Queue[Ownership | None]] = []
        self._stopping = asyncio.Event()
        self._hand_offs: asyncio.Queue[_HandOff] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._gave_up: str | None = None

    @property
    def key(self) -> str:
        """The key this keeper holds or waits for."""
        return self._key

    @property
    def holder(self) -> str:
        """This process's holder id."""
        return self._holder

    def start(self) -> LeaseKeeper:
        """Starts keeping the key in the background (once); returns self."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"lease-keeper-{self._key}")
        return self

    async def __aenter__(self) -> LeaseKeeper:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def fence(self) -> int | None:
        """The fence to send with a write now, or None when this process may
        not act as owner now (checked against the monotonic clock)."""
        return self._state.fence_now()

    def tenure(self) -> int | None:
        """The first revision of the current tenure, or None when this
        process may not act as owner now."""
        return self._state.tenure if self._state.fence_now() is not None else None

    def ownership(self) -> Ownership:
        """Ownership as last reported (see `Ownership.fence_now`)."""
        return self._state

    async def wait_owner(self, timeout: float | None = None) -> int:
        """Waits until this process may act as owner and returns the fence.
        Raises `LeaseError` kind ``timeout`` after ``timeout`` seconds, kind
        ``lost`` if the keeper stopped (or gave up, without ``wait``)."""
        if self._task is None:
            raise RuntimeError("start the keeper (or enter `async with`) before waiting on it")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            fence = self.fence()
            if fence is not None:
                return fence
            if self._task.done():
                raise LeaseError(LOST, self._gave_up or "the keeper has stopped")
            published = self._published
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise LeaseError(TIMEOUT, f"not the owner of {self._key} within {timeout:g} s")
            try:
                await asyncio.wait_for(published.wait(), left)
            except TimeoutError:
                pass

    def changes(self) -> AsyncIterator[Ownership]:
        """The ownership changes from now on: one `Ownership` each time it
        changes (a tenure starts, a renewal moves the fence, ownership
        ends); a new ``tenure`` is a new tenure. The iterator ends when the
        keeper stops. A reader that falls more than `CHANGES_KEPT` behind
        loses the oldest, never the latest."""
        queue: asyncio.Queue[Ownership | None] = asyncio.Queue()
        if self._task is not None and self._task.done():
            queue.put_nowait(None)
        else:
            self._watchers.append(queue)
        return _Changes(queue)

    async def hand_off(self, to: str) -> Grant:
        """Hands the lease to ``to`` and stops this keeper: ownership ends
        first, then one transfer at the current fence makes ``to`` the
        holder (a keeper of ``to`` waiting for the key takes it over). The
        reply is ``to``'s lease; its ``revision`` is the new tenure. Kind
        ``lost`` if this keeper does not hold the lease; on any other failure
        the lease is released, so ``to`` can acquire it."""
        to = bounds.other_holder(self._holder, bounds.name("to", to))
        task = self._task
        if task is None or task.done():
            raise _not_the_owner()
        reply: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
        self._hand_offs.put_nowait(_HandOff(to, reply))
        waits: set[asyncio.Future[Any]] = {reply, task}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        await self.stop()
        if not reply.done():
            reply.cancel()
            raise _not_the_owner()
        return reply.result()

    async def stop(self) -> None:
        """Stops renewing and releases the lease if held. Idempotent."""
        self._stopping.set()
        if self._task is not None:
            await asyncio.wait({self._task})

    # The background task.

    def _publish(self, state: Ownership) -> None:
        previous, self._state = self._state, state
        if (previous.owner, previous.fence, previous.tenure) != (state.owner, state.fence, state.tenure):
            for watcher in self._watchers:
                if watcher.qsize() >= CHANGES_KEPT:
                    watcher.get_nowait()  # a reader that fell behind still ends on the latest
                watcher.put_nowait(state)
        published, self._published = self._published, asyncio.Event()
        published.set()

    async def _run(self) -> None:
        try:
            await self._keep()
        except Exception:
            _log.exception("lease keeper of %s failed", self._key)
        finally:
            self._publish(NOT_OWNER)
            for watcher in self._watchers:
                watcher.put_nowait(None)
            self._watchers.clear()
            while not self._hand_offs.empty():
                self._hand_offs.get_nowait().refuse(_not_the_owner())

    async def _wait(
        self, until: float | None, call: asyncio.Future[Any] | None = None, hand_offs: bool = False
    ) -> _Woke | _HandOff:
        """Waits for the first of: stop, a hand-off request (if taken now),
        ``call`` completing, ``until`` (a monotonic instant) passing."""
        stop = asyncio.ensure_future(self._stopping.wait())
        waits: set[asyncio.Future[Any]] = {stop}
        get = asyncio.ensure_future(self._hand_offs.get()) if hand_offs else None
        if get is not None:
            waits.add(get)
        if call is not None:
            waits.add(call)
        timeout = None if until is None else max(0.0, until - time.monotonic())
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if get is not None and not get.done():
                get.cancel()
        if get is not None and get.done() and not get.cancelled():
            request: _HandOff = get.result()
            if not self._stopping.is_set():
                return request
            request.refuse(_not_the_owner())
        if self._stopping.is_set():
            return _Woke.STOP
        if call is not None and call.done():
            return _Woke.CALL
        return _Woke.DEADLINE

    async def _keep(self) -> None:
        retry = RETRY_MIN
        transferred: int | None = None
        # When this wait for the key began: each try says how long ago.
        waiting_since: float | None = None
        while True:
            # Subscribed before the acquire, so a release that lands while
            # the acquire is in flight still wakes us.
            wake = _Wake()
            watch = await self._watch(wake)
            try:
                started = time.monotonic()
                # A transfer named us: the renew at its fence is the request
                # our entitlement counts from; otherwise, acquire.
                taking_over, transferred = transferred, None
                waited_ms = None
                if self._waits:
                    waiting_since = started if waiting_since is None else waiting_since
                    waited_ms = int((started - waiting_since) * 1000)
                call: asyncio.Future[Grant] = asyncio.ensure_future(
                    self._client.renew(self._key, self._holder, taking_over, self._ttl_ms)
                    if taking_over is not None
                    else self._client.acquire(self._key, self._holder, self._ttl_ms, waited_ms)
                )
                if await self._wait(None, call) is _Woke.STOP:
                    call.cancel()
                    return
                err = call.exception()
                if err is None:
                    grant = call.result()
                    if grant.granted and _entitled_until(started, grant) > time.monotonic():
                        if watch is not None:
                            await _unsubscribe(watch)
                            watch = None
                        retry = RETRY_MIN
                        waiting_since = None
                        tenure = taking_over if taking_over is not None else grant.revision
                        if await self._hold(started, tenure, grant) or not self._waits:
                            return
                        continue
                    if grant.granted:
                        # Granted, but by the conservative clock already run out.
                        wait_for = RETRY_MIN
                    elif not self._waits:
                        self._gave_up = f"{self._key} is held by {grant.holder}"
                        return
                    else:
                        left = (grant.expires_at - datetime.now(timezone.utc)).total_seconds()
                        wait_for = min(max(left, RETRY_MIN), self._ttl_ms / 1000) + RETRY_MIN
                elif isinstance(err, LeaseError) and err.lost:
                    # The transfer was overtaken (released, revoked, moved on).
                    wait_for = RETRY_MIN
                elif isinstance(err, LeaseError):
                    _log.debug("acquire or takeover of %s failed (%s); retrying", self._key, err)
                    # A takeover's renew is retried as it was sent: the same
                    # renew answers the same, whether or not it landed.
                    transferred = taking_over
                    retry = min(retry * 2, RETRY_MAX)
                    wait_for = retry
                else:
                    raise err
                # Wake when the key is freed or handed to us, or when the
                # current lease should have run out anyway.
                if await self._wait_for_key(wake, time.monotonic() + wait_for) is _Woke.STOP:
                    return
                if wake.transferred is not None:
                    transferred = wake.transferred
            finally:
                if watch is not None:
                    await _unsubscribe(watch)

    async def _wait_for_key(self, wake: _Wake, until: float) -> _Woke:
        """Waits until ``until``, stop, or ``wake``; hand-offs meanwhile
        answer ``lost``."""
        while True:
            woken = asyncio.ensure_future(wake.event.wait())
            try:
                woke = await self._wait(until, woken, hand_offs=True)
            finally:
                woken.cancel()
            if isinstance(woke, _HandOff):
                woke.refuse(_not_the_owner())
                continue
            return woke

    async def _watch(self, wake: _Wake) -> Subscription | None:
        """Subscribes to the key's changes, which set ``wake`` on a release,
        an expiry, or a transfer to this holder."""

        async def on_change(msg: Msg) -> None:
            change = decode_change(msg.subject, msg.headers, msg.data)
            if change is None:
                return
            if change.event == "acquired" and change.holder == self._holder:
                wake.transferred = change.revision
                wake.event.set()
            elif change.ends_tenure:
                wake.event.set()

        try:
            return await self._client.nc.subscribe(changed_subject(self._key), cb=on_change)
        except Exception as err:
            _log.warning("cannot watch the changes of %s (%s); waking on a timer", self._key, err)
            return None

    async def _hold(self, started: float, tenure: int, lease: Grant) -> bool:
        """Renews until stopped, lost or handed off, publishing ownership as
        it goes; True when the keeper is done (stopped or handed off)."""
        fence = lease.revision
        until = _entitled_until(started, lease)
        next_renew = started + self._ttl_ms / 3000
        self._publish(Ownership(True, fence, tenure, until))
        retry = RETRY_MIN
        while True:
            woke = await self._wait(min(until, next_renew), hand_offs=True)
            if woke is _Woke.STOP:
                await self._release(fence)
                return True
            if isinstance(woke, _HandOff):
                await self._hand_off(fence, woke)
                return True
            # The deadline first: a process paused past it must not renew
            # as if it had been the owner all along.
            if time.monotonic() >= until:
                return self._lose("no renewal landed before the lease ran out")
            if time.monotonic() < next_renew:
                continue
            started = time.monotonic()
            call = asyncio.ensure_future(self._client.renew(self._key, self._holder, fence, self._ttl_ms))
            woke = await self._wait(until, call)
            if woke is not _Woke.CALL:
                call.cancel()
            if woke is _Woke.STOP:
                await self._release(fence)
                return True
            if woke is _Woke.DEADLINE:
                return self._lose("no renewal landed before the lease ran out")
            err = call.exception()
            if err is None:
                grant = call.result()
                fence, until = grant.revision, _entitled_until(started, grant)
                next_renew = started + self._ttl_ms / 3000
                retry = RETRY_MIN
                self._publish(Ownership(True, fence, tenure, until))
            elif isinstance(err, LeaseError) and err.lost:
                return self._lose("renew answered lost")
            elif isinstance(err, LeaseError):
                # Retrying at the same fence is safe: a renew whose reply was
                # lost gets the same answer again.
                _log.debug("renew of %s failed (%s); retrying", self._key, err)
                next_renew = time.monotonic() + retry
                retry = min(retry * 2, RETRY_MAX)
            else:
                raise err

    def _lose(self, why: str) -> bool:
        _log.info("lease %s lost: %s", self._key, why)
        self._publish(NOT_OWNER)
        return False

    async def _release(self, fence: int) -> None:
        self._publish(NOT_OWNER)
        try:
            await self._client.release(self._key, self._holder, fence)
        except LeaseError as err:
            _log.info("release of %s on stop failed (%s); the TTL will free the key", self._key, err)

    async def _hand_off(self, fence: int, request: _HandOff) -> None:
        """Stops acting as owner, then transfers at ``fence``. A failure that
        is not ``lost`` may or may not have moved the lease: the release that
        follows frees it if it did not (and is refused if it did)."""
        self._publish(NOT_OWNER)
        try:
            grant = await self._client.transfer(self._key, self._holder, fence, request.to, self._ttl_ms)
        except LeaseError as err:
            if not err.lost:
                _log.info("hand-off of %s to %s failed (%s); releasing", self._key, request.to, err)
                await self._release(fence)
            request.refuse(err)
            return
        if not request.reply.done():
            request.reply.set_result(grant)


class _Wake:
    """What ends a wait for the key: set on a release or expiry, with
    ``transferred`` the fence when a transfer made this holder the owner."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.transferred: int | None = None


async def _unsubscribe(sub: Subscription) -> None:
    try:
        await sub.unsubscribe()
    except Exception as err:
        _log.debug("unsubscribing from lease changes failed: %s", err)


class _Changes:
    """An async iterator over one watcher's queue of ownership changes."""

    def __init__(self, queue: asyncio.Queue[Ownership | None]) -> None:
        self._queue = queue

    def __aiter__(self) -> _Changes:
        return self

    async def __anext__(self) -> Ownership:
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)
            raise StopAsyncIteration
        return item
