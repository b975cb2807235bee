"""`LeaseClient`: the lease subjects as typed asyncio calls on nats-py.

Every call checks its input against the protocol's bounds before sending
(docs/protocol.md, Input bounds) and reads the reply into the types of
`replies`. A call the protocol makes safe to repeat (every one but forward)
is sent again at half and at three quarters of its timeout when no reply has
come: in a cluster the queue group may hand the first copy to a gateway
whose node has just been cut off, and a copy lets another one answer. Each
late copy says how long it is still waited for (``Dagnats-Lease-Wait-Ms``),
so a gateway that cannot finish in time answers ``unavailable`` instead of
staying silent. Forward is never sent twice: the owner could process it twice.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
from typing import Any

import nats.errors
from nats.aio.client import Client as NATS

from . import _bounds as bounds
from . import replies
from ._names import (
    HEADER_WAIT_MS,
    HEADER_WAITED_MS,
    KEY_CALL_SUBJECTS,
    SUBJECT_ACQUIRE,
    SUBJECT_FORWARD,
    SUBJECT_LIST,
    SUBJECT_OWNER,
    SUBJECT_RELEASE,
    SUBJECT_RENEW,
    SUBJECT_TRANSFER,
)
from .errors import INTERNAL, PAYLOAD_TOO_LARGE, TIMEOUT, UNAVAILABLE, LeaseError
from .replies import Grant, LeaseList, Owner, Released

FORWARD_MARGIN = 1.0
"""Seconds a forward waits beyond its ``timeout_ms``: the gateway answers
within ``timeout_ms``, and its reply still has to travel back."""

GATEWAY_CALL_BUDGET = 4.5
"""Seconds a gateway gives a key call whether or not the caller says how
long it waits: a shorter wait is worth saying, a longer one is not."""
_REPLY_MARGIN = 0.2


def _wait_header(subject: str, left: float) -> dict[str, str] | None:
    """The ``Dagnats-Lease-Wait-Ms`` header for a copy still waited for
    ``left`` seconds, where it bounds the call: always for a list (nothing
    else bounds it), for a key call only below the gateway's own budget."""
    if subject == SUBJECT_FORWARD:
        return None
    if subject in KEY_CALL_SUBJECTS and left - min(_REPLY_MARGIN, left / 10) >= GATEWAY_CALL_BUDGET:
        return None
    return {HEADER_WAIT_MS: str(max(0, int(left * 1000)))}


class LeaseClient:
    """Typed calls to the dagnats-leases gateway over a nats-py connection.

    ``timeout`` is how many seconds each call waits for its reply (forward
    waits its own ``timeout_ms`` and a second more). Every failure raises
    `LeaseError`; out-of-bounds input raises it with kind ``invalid``
    before anything is sent.
    """

    def __init__(self, nc: NATS, timeout: float = 5.0) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise LeaseError("invalid", f"timeout must be a positive number of seconds, got {timeout!r}")
        self._nc = nc
        self._timeout = float(timeout)

    @property
    def nc(self) -> NATS:
        """The NATS connection underneath."""
        return self._nc

    @property
    def timeout(self) -> float:
        """Seconds each call waits for its reply."""
        return self._timeout

    async def acquire(self, key: str, holder: str, ttl_ms: int, waited_ms: int | None = None) -> Grant:
        """Takes ``key`` for ``ttl_ms`` if nobody holds it; ``granted`` is
        False (a normal answer) when someone else does, naming them. Safe to
        retry: the holder asking again gets its own lease back. A try of a
        wait for the key gives ``waited_ms``, the milliseconds since its
        first try, so the gateway counts the wait once it grants the key."""
        body = {
            "key": bounds.name("key", key),
            "holder": bounds.name("holder", holder),
            "ttl_ms": bounds.ttl_ms(ttl_ms),
        }
        waited = None if waited_ms is None else {HEADER_WAITED_MS: str(max(0, int(waited_ms)))}
        return replies.grant(await self._call(SUBJECT_ACQUIRE, body, headers=waited))

    async def renew(self, key: str, holder: str, revision: int, ttl_ms: int) -> Grant:
        """Extends the lease held at ``revision`` to ``ttl_ms`` from now; the
        reply carries the new fence. Kind ``lost``: stop acting as owner."""
        body = {
            "key": bounds.name("key", key),
            "holder": bounds.name("holder", holder),
            "revision": bounds.revision(revision),
            "ttl_ms": bounds.ttl_ms(ttl_ms),
        }
        return replies.grant(await self._call(SUBJECT_RENEW, body))

    async def release(self, key: str, holder: str, revision: int) -> Released:
        """Frees the lease held at ``revision``; kind ``lost`` if it had
        already expired or moved on."""
        body = {
            "key": bounds.name("key", key),
            "holder": bounds.name("holder", holder),
            "revision": bounds.revision(revision),
        }
        return replies.released(await self._call(SUBJECT_RELEASE, body))

    async def owner(self, key: str) -> Owner:
        """Who holds ``key``: a `Lease`, or a `FreeKey` when nobody does.
        Read through the stream leader, with no side effects."""
        body = {"key": bounds.name("key", key)}
        return replies.owner(await self._call(SUBJECT_OWNER, body))

    async def transfer(self, key: str, holder: str, revision: int, to: str, ttl_ms: int) -> Grant:
        """Hands the lease ``holder`` holds at ``revision`` to ``to`` for
        ``ttl_ms`` from now, in one write: the reply is ``to``'s lease, a new
        tenure at a higher fence. Stop acting as owner before calling it."""
        holder = bounds.name("holder", holder)
        body = {
            "key": bounds.name("key", key),
            "holder": holder,
            "revision": bounds.revision(revision),
            "to": bounds.other_holder(holder, bounds.name("to", to)),
            "ttl_ms": bounds.ttl_ms(ttl_ms),
        }
        return replies.grant(await self._call(SUBJECT_TRANSFER, body))

    async def list(
        self, prefix: str | None = None, after: str | None = None, limit: int | None = None
    ) -> LeaseList:
        """One page of the held leases whose key starts with ``prefix``,
        ordered by key: those after ``after`` (a previous page's ``next``),
        at most ``limit`` (1 to 5000; None: the gateway's 1000). ``next``
        is None on the last page."""
        body: dict[str, Any] = {"prefix": bounds.prefix(prefix)}
        if after is not None:
            body["after"] = bounds.name("after", after)
        checked = bounds.list_limit(limit)
        if checked is not None:
            body["limit"] = checked
        return replies.lease_list(await self._call(SUBJECT_LIST, body))

    async def forward(self, key: str, payload: bytes, timeout_ms: int = 5000) -> bytes:
        """Sends ``payload`` to whichever process holds ``key`` and returns
        the owner's reply bytes. ``timeout_ms`` (100 to 30000) bounds the
        whole call. A failure names the owner last tried in the error's
        ``holder`` and ``revision``."""
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise LeaseError("invalid", f"payload must be bytes, got {type(payload).__name__}")
        body = {
            "key": bounds.name("key", key),
            "payload": base64.b64encode(bytes(payload)).decode("ascii"),
            "timeout_ms": bounds.forward_timeout_ms(timeout_ms),
        }
        reply = await self._call(SUBJECT_FORWARD, body, timeout_ms / 1000 + FORWARD_MARGIN)
        encoded = reply.get("payload")
        if not isinstance(encoded, str):
            raise LeaseError(INTERNAL, f"unreadable reply: payload should be base64, got {encoded!r}")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise LeaseError(INTERNAL, "unreadable reply: payload is not base64") from None

    async def _call(
        self,
        subject: str,
        body: dict[str, Any],
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        data = json.dumps(body, separators=(",", ":")).encode()
        return replies.decode(await self._send(subject, data, timeout or self._timeout, headers))

    async def _send(
        self, subject: str, data: bytes, timeout: float, headers: dict[str, str] | None = None
    ) -> bytes:
        """Sends ``data`` and, but for forward, a copy at each of half and
        three quarters of ``timeout`` that passes with no reply; the first
        reply wins. A failure is the answer only when no copy is in flight."""
        start = time.monotonic()
        deadline = start + timeout
        copies_at = [] if subject == SUBJECT_FORWARD else [start + timeout / 2, start + timeout * 3 / 4]

        def send() -> asyncio.Task[Any]:
            left = deadline - time.monotonic()
            sent = {**(_wait_header(subject, left) or {}), **(headers or {})} or None
            return asyncio.ensure_future(self._nc.request(subject, data, timeout=max(left, 0.001), headers=sent))

        in_flight = {send()}
        failure: BaseException | None = None
        try:
            while in_flight:
                wake = copies_at[0] if copies_at else None
                done, in_flight = await asyncio.wait(
                    in_flight,
                    timeout=None if wake is None else max(wake - time.monotonic(), 0),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for task in done:
                    err = task.exception()
                    if err is None:
                        reply: bytes = task.result().data
                        return reply
                    failure = err
                if wake is not None and time.monotonic() >= wake:
                    copies_at.pop(0)
                    in_flight.add(send())
        finally:
            for task in in_flight:
                task.cancel()
        raise _failure(failure, timeout)


def _failure(err: BaseException | None, timeout: float) -> LeaseError:
    if isinstance(err, nats.errors.NoRespondersError):
        return LeaseError(UNAVAILABLE, "no dagnats-leases gateway answers (no responders)")
    if isinstance(err, (nats.errors.TimeoutError, asyncio.TimeoutError)):
        return LeaseError(TIMEOUT, f"no reply from the gateway within {timeout:g} s; the call may or may not have taken effect")
    if isinstance(err, nats.errors.MaxPayloadError):
        return LeaseError(PAYLOAD_TOO_LARGE, "the request does not fit the NATS server's max_payload; nothing was sent")
    return LeaseError(UNAVAILABLE, f"NATS request failed: {err!r}")
