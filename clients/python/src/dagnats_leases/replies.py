"""The replies of the lease calls as typed, immutable objects whose
attributes are the wire's field names (docs/protocol.md, Replies).

A reply that is not what the protocol says (not JSON, a field missing or of
the wrong type) raises `LeaseError` kind ``internal``: never a guess.
Times are timezone-aware UTC datetimes, read from the wire's RFC 3339.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeVar

from .errors import INTERNAL, LeaseError

_MAX_REVISION = 2**53 - 1
"""The highest revision a reply carries: fences stay below 2^53, exact as
JSON numbers in every language (docs/protocol.md, Storage: the leases
bucket)."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A held lease, as owner and list report it."""

    held: bool
    """Always true: this key has a holder."""
    key: str
    holder: str
    revision: int
    """The fencing token: the key's revision. Send it with every write."""
    acquired_at: datetime
    """Start of the tenure; renew keeps it."""
    expires_at: datetime
    """Advisory: the server's TTL frees the key, never earlier than this."""
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class Grant(Lease):
    """Reply to acquire, renew and transfer: the lease, and whether it was
    granted. ``granted: False`` is a normal answer naming the current
    holder, with that lease's own fields. For a transfer, ``revision`` is
    the new holder's tenure."""

    granted: bool


@dataclass(frozen=True, slots=True)
class FreeKey:
    """Reply to owner when nobody holds the key."""

    held: bool
    """Always false."""
    key: str


@dataclass(frozen=True, slots=True)
class Released:
    """Reply to release; ``revision`` is the fence of the release write."""

    released: bool
    """Always true."""
    held: bool
    """Always false."""
    key: str
    holder: str
    revision: int


@dataclass(frozen=True, slots=True)
class LeaseList:
    """One page of held leases, ordered by key."""

    leases: tuple[Lease, ...]
    next: str | None
    """The last key of this page when more follow: pass it back as ``after``."""
    corrupt: tuple[str, ...] = ()
    """Keys whose record does not parse, left out of ``leases``."""


Owner = Lease | FreeKey
"""What owner answers: the lease, or `FreeKey` when nobody holds the key."""


def _bad(why: str) -> LeaseError:
    return LeaseError(INTERNAL, f"unreadable reply: {why}")


_T = TypeVar("_T")


def _field(obj: dict[str, Any], name: str, kind: type[_T]) -> _T:
    value = obj.get(name)
    # bool is an int in Python; a wire integer never is a bool.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _bad(f"field {name!r} should be {kind.__name__}, got {value!r}")
    return value


def _revision(obj: dict[str, Any], name: str = "revision") -> int:
    value = _field(obj, name, int)
    if not 0 <= value <= _MAX_REVISION:
        raise _bad(f"field {name!r} is not a revision: {value}")
    return value


def _time(obj: dict[str, Any], name: str) -> datetime:
    text = _field(obj, name, str)
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise _bad(f"field {name!r} is not an RFC 3339 time: {text!r}") from None
    if at.tzinfo is None:
        raise _bad(f"field {name!r} has no time zone: {text!r}")
    return at.astimezone(timezone.utc)


def _lease_fields(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "held": _field(obj, "held", bool),
        "key": _field(obj, "key", str),
        "holder": _field(obj, "holder", str),
        "revision": _revision(obj),
        "acquired_at": _time(obj, "acquired_at"),
        "expires_at": _time(obj, "expires_at"),
        "ttl_ms": _field(obj, "ttl_ms", int),
    }


def _lease(obj: dict[str, Any]) -> Lease:
    return Lease(**_lease_fields(obj))


def grant(obj: dict[str, Any]) -> Grant:
    """A `Grant` from a decoded reply."""
    return Grant(granted=_field(obj, "granted", bool), **_lease_fields(obj))


def owner(obj: dict[str, Any]) -> Owner:
    """A `Lease` or a `FreeKey` from a decoded owner reply."""
    if _field(obj, "held", bool):
        return _lease(obj)
    return FreeKey(held=False, key=_field(obj, "key", str))


def released(obj: dict[str, Any]) -> Released:
    """A `Released` from a decoded reply."""
    return Released(
        released=_field(obj, "released", bool),
        held=_field(obj, "held", bool),
        key=_field(obj, "key", str),
        holder=_field(obj, "holder", str),
        revision=_revision(obj),
    )


def lease_list(obj: dict[str, Any]) -> LeaseList:
    """A `LeaseList` from a decoded reply."""
    leases = _field(obj, "leases", list)
    if not all(isinstance(item, dict) for item in leases):
        raise _bad("leases should be objects")
    nxt = obj.get("next")
    if nxt is not None and not isinstance(nxt, str):
        raise _bad(f"field 'next' should be a key or null, got {nxt!r}")
    corrupt = obj.get("corrupt", [])
    if not isinstance(corrupt, list) or not all(isinstance(k, str) for k in corrupt):
        raise _bad(f"field 'corrupt' should be a list of keys, got {corrupt!r}")
    return LeaseList(leases=tuple(_lease(item) for item in leases), next=nxt, corrupt=tuple(corrupt))


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object of a reply; an error reply raises its `LeaseError`
    with the wire's kind, and the owner last tried for a forward."""
    try:
        obj = json.loads(body)
    except ValueError as err:
        raise _bad(f"not JSON ({err})") from None
    if not isinstance(obj, dict):
        raise _bad("not a JSON object")
    if "error" in obj and "kind" in obj:
        kind, message = obj["kind"], obj["error"]
        if not isinstance(kind, str) or not isinstance(message, str):
            raise _bad("an error reply whose kind or error is not a string")
        holder = obj.get("holder")
        raise LeaseError(
            kind,
            message,
            holder=holder if isinstance(holder, str) else None,
            revision=None if obj.get("revision") is None else _revision(obj),
        )
    return obj
