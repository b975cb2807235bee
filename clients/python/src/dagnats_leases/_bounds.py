"""The protocol's input bounds (docs/protocol.md, Input bounds), checked
before anything is sent: a value out of them raises `LeaseError` kind
``invalid`` and never reaches the gateway."""

from __future__ import annotations

import re

from .errors import INVALID, LeaseError

MAX_NAME_LEN = 128
MIN_TTL_MS = 1_000
MAX_TTL_MS = 600_000
MIN_FORWARD_TIMEOUT_MS = 100
MAX_FORWARD_TIMEOUT_MS = 30_000
MAX_LIST_LIMIT = 5_000

_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


def _invalid(message: str) -> LeaseError:
    return LeaseError(INVALID, message)


def name(field: str, value: object) -> str:
    """A key or holder id: 1 to 128 bytes of ``[A-Za-z0-9_-]``, one subject token."""
    if not isinstance(value, str) or _NAME.fullmatch(value) is None:
        raise _invalid(
            f"{field} must be 1 to {MAX_NAME_LEN} bytes of [A-Za-z0-9_-], got {value!r}"
        )
    return value


def prefix(value: object) -> str:
    """A list prefix: empty (every key) or a key's characters."""
    if value is None or value == "":
        return ""
    return name("prefix", value)


def whole(field: str, value: object) -> int:
    """A whole number (``bool`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{field} must be a whole number, got {value!r}")
    return value


def ttl_ms(value: object) -> int:
    """A lease TTL: whole seconds from 1000 to 600000 ms; the server would
    truncate anything else to whole seconds, so it is refused, not rounded."""
    ms = whole("ttl_ms", value)
    if not MIN_TTL_MS <= ms <= MAX_TTL_MS or ms % 1_000 != 0:
        raise _invalid(
            f"ttl_ms must be a whole number of seconds from {MIN_TTL_MS} to {MAX_TTL_MS}, got {ms}"
        )
    return ms


def revision(value: object) -> int:
    """A fence from an earlier reply: 1 or more."""
    rev = whole("revision", value)
    if rev < 1 or rev >= 2**64:
        raise _invalid(f"revision must be the fence from your last reply (1 or more), got {rev}")
    return rev


def forward_timeout_ms(value: object) -> int:
    """How long a whole forward may take: 100 to 30000 ms."""
    ms = whole("timeout_ms", value)
    if not MIN_FORWARD_TIMEOUT_MS <= ms <= MAX_FORWARD_TIMEOUT_MS:
        raise _invalid(
            f"timeout_ms must be from {MIN_FORWARD_TIMEOUT_MS} to {MAX_FORWARD_TIMEOUT_MS}, got {ms}"
        )
    return ms


def list_limit(value: object) -> int | None:
    """How many leases one list page may carry: 1 to 5000, or None (the gateway's default)."""
    if value is None:
        return None
    limit = whole("limit", value)
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise _invalid(f"limit must be a whole number from 1 to {MAX_LIST_LIMIT}, got {limit}")
    return limit


def other_holder(holder: str, to: str) -> str:
    """A transfer's new holder, which must not be the holder itself."""
    if to == holder:
        raise _invalid(f"to must name another holder than holder, got {to!r} for both")
    return to
