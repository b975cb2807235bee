"""Change events: what a message on ``dagnats.lease.changed.<key>`` says
(docs/protocol.md, Change events).

The server republishes every write to a key with its original headers plus
``Nats-Sequence`` (the revision). ``Dagnats-Lease-Event`` says ``acquired``
(a transfer too: it names the new holder), ``renewed`` or ``released`` (a
revoke too; the write is a purge, ``KV-Operation: PURGE``, as is a delete
by a KV tool); the server's expiry marker carries ``Nats-Marker-Reason``. Events are core NATS publishes, at most once: a
reader that cares about the current state asks ``owner``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from ._names import (
    CHANGED_PREFIX,
    HEADER_EVENT,
    HEADER_KV_OPERATION,
    HEADER_MARKER_REASON,
    HEADER_SEQUENCE,
    header,
)

ChangeKind = Literal["acquired", "renewed", "released", "expired"]
"""What happened to a key."""


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One change of one key."""

    event: ChangeKind
    key: str
    revision: int
    """The revision of the write, or of the server's expiry marker."""
    holder: str | None
    """The holder after an acquire or renew; the releasing holder when the record names it."""

    @property
    def ends_tenure(self) -> bool:
        """Whether the key has no holder after this change."""
        return self.event in ("released", "expired")


def decode_change(subject: str, headers: dict[str, str] | None, payload: bytes) -> ChangeEvent | None:
    """The change event a message carries, or None for one that is not a
    change event of this protocol (another subject, no revision, no event)."""
    prefix = CHANGED_PREFIX + "."
    if not subject.startswith(prefix):
        return None
    key = subject[len(prefix) :]
    sequence = header(headers, HEADER_SEQUENCE)
    if sequence is None or not sequence.isascii() or not sequence.isdigit():
        return None
    revision = int(sequence)
    if header(headers, HEADER_MARKER_REASON) is not None:
        return ChangeEvent("expired", key, revision, None)
    holder = _holder(payload)
    event = header(headers, HEADER_EVENT)
    if event == "released" or header(headers, HEADER_KV_OPERATION) in ("DEL", "PURGE"):
        return ChangeEvent("released", key, revision, holder)
    if event == "acquired":
        return ChangeEvent("acquired", key, revision, holder)
    if event == "renewed":
        return ChangeEvent("renewed", key, revision, holder)
    return None


def _holder(payload: bytes) -> str | None:
    if not payload:
        return None
    try:
        record = json.loads(payload)
    except ValueError:
        return None
    holder = record.get("holder") if isinstance(record, dict) else None
    return holder if isinstance(holder, str) else None
