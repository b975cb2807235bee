"""`serve_inbox`: the owner side of forward (docs/protocol.md, Forwarding
to the owner).

A holder that accepts forwards subscribes on
``dagnats.lease.inbox.<holder>.>`` (a plain subscription: the holder id
names one process) and rejects, with an empty body and
``Dagnats-Lease-Reject: stale``, any request

- for a key it is not acting as owner of now (``tenure(key)`` is None),
- whose ``Dagnats-Lease-Fence`` header is missing or not an unsigned integer,
- whose fence is lower than the tenure's first revision.

A rejected request never reaches the handler, and the gateway may then
retry it with the key's new owner.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from . import _bounds as bounds
from ._names import HEADER_FENCE, HEADER_REJECT, REJECT_STALE, header, inbox_prefix

_log = logging.getLogger("dagnats_leases")

_UNSIGNED = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class InboxRequest:
    """A forwarded request this process accepted."""

    key: str
    fence: int
    """The lease revision the gateway read when it forwarded."""
    payload: bytes


Tenure = Callable[[str], "int | None"]
"""``tenure(key)``: the first revision of this process's current tenure of
``key``, or None when it may not act as owner of ``key`` now (for a
keeper: ``lambda key: keeper.tenure() if key == keeper.key else None``)."""

Handler = Callable[[InboxRequest], Awaitable[bytes]]
"""Produces the reply body of an accepted request."""


def check(subject: str, headers: dict[str, str] | None, payload: bytes, prefix: str, tenure: Tenure) -> InboxRequest | None:
    """The request a message carries if the three rejection rules let it
    through, else None (reject it)."""
    if not subject.startswith(prefix):
        return None
    key = subject[len(prefix) :]
    first = tenure(key)
    if first is None:
        return None
    fence = header(headers, HEADER_FENCE)
    if fence is None or _UNSIGNED.fullmatch(fence) is None or int(fence) >= 2**64:
        return None
    if int(fence) < first:
        return None
    return InboxRequest(key=key, fence=int(fence), payload=payload)


class InboxServer:
    """A running owner inbox: `stop` it, or use it as ``async with``."""

    def __init__(self, sub: Subscription, handlers: set[asyncio.Task[None]]) -> None:
        self._sub = sub
        self._handlers = handlers
        self._stopped = False

    @property
    def subject(self) -> str:
        """The subscribed subject, ``dagnats.lease.inbox.<holder>.>``."""
        return self._sub.subject

    async def stop(self, grace: float | None = None) -> None:
        """Unsubscribes, then waits for the handlers already running to
        answer: all of them, or for ``grace`` seconds, after which those
        still running are cancelled and their requests left unanswered.
        Idempotent."""
        if not self._stopped:
            self._stopped = True
            await self._sub.unsubscribe()
        running = set(self._handlers)
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)

    async def __aenter__(self) -> InboxServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve_inbox(nc: NATS, holder: str, tenure: Tenure, handler: Handler) -> InboxServer:
    """Answers forwarded requests for ``holder`` until stopped; returns once
    subscribed. ``tenure(key)`` says whether this process acts as owner of
    ``key`` now and since which revision; ``handler`` runs for each accepted
    request (concurrently) and returns the reply bytes. A handler that raises
    leaves the request unanswered (the caller sees ``owner_timeout``), so
    handle what you can answer inside it."""
    prefix = inbox_prefix(bounds.name("holder", holder))
    handlers: set[asyncio.Task[None]] = set()

    async def answer(reply_to: str, request: InboxRequest) -> None:
        try:
            body = await handler(request)
        except Exception:
            _log.exception("inbox handler failed on %s at fence %d; leaving it unanswered", request.key, request.fence)
            return
        try:
            await nc.publish(reply_to, bytes(body))
        except Exception as err:
            _log.warning("could not answer a forwarded request: %s", err)

    async def on_request(msg: Msg) -> None:
        if not msg.reply:
            return
        request = check(msg.subject, msg.headers, msg.data, prefix, tenure)
        if request is None:
            _log.debug("rejecting forwarded request on %s", msg.subject)
            try:
                await nc.publish(msg.reply, b"", headers={HEADER_REJECT: REJECT_STALE})
            except Exception as err:
                _log.warning("could not reject a forwarded request: %s", err)
            return
        task = asyncio.ensure_future(answer(msg.reply, request))
        handlers.add(task)
        task.add_done_callback(handlers.discard)

    sub = await nc.subscribe(prefix + ">", cb=on_request)
    # Subscribed at the server, not only queued, before the caller is told so.
    await _server_has_seen_all(nc)
    return InboxServer(sub, handlers)


async def _server_has_seen_all(nc: NATS) -> None:
    """Returns once the server has handled everything ``nc`` sent before.
    ``nc.flush()`` cannot say so: nats-py writes its PING ahead of the
    commands still waiting for its flusher task. A message this connection
    sends itself comes back after them, the server handling each
    connection's commands in order."""
    echo = await nc.subscribe(nc.new_inbox(), max_msgs=1)
    await nc.publish(echo.subject, b"")
    await echo.next_msg(timeout=10)
