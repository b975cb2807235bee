"""`LeaseError`: every failure of this library, with the wire's kind.

A gateway's error reply keeps its `kind` as the gateway wrote it (see
docs/protocol.md, Error kinds). Failures the gateway did not answer have
kinds of their own, the same in every dagnats-leases library:

- ``invalid``: input out of the protocol's bounds; nothing was sent.
- ``unavailable``: no gateway answers the subject, or NATS failed.
- ``timeout``: no reply in time; the call may or may not have taken effect.
- ``internal``: a reply this library cannot read.
- ``payload_too_large``: a forward whose request does not fit the
  connection's ``max_payload``; nothing was sent. The gateway answers the
  same kind for a payload that does not fit its hop to the owner.
"""

from __future__ import annotations

INVALID = "invalid"
"""Input out of bounds, refused before anything was sent (or by the gateway)."""
LOST = "lost"
"""The caller is not the holder at that fence: stop acting as owner now."""
UNAVAILABLE = "unavailable"
"""No gateway answered, NATS failed, or JetStream is unreachable: retry later."""
TIMEOUT = "timeout"
"""No reply within the client's timeout; the outcome is unknown."""
INTERNAL = "internal"
"""A reply that cannot be read, or the gateway's own internal failure."""
PAYLOAD_TOO_LARGE = "payload_too_large"
"""A forward's payload too large for a NATS message, refused by this library
before sending or by the gateway."""


class LeaseError(Exception):
    """A lease call that failed.

    ``kind`` is the wire's kind string (``lost``, ``not_held``,
    ``owner_timeout``, ...) or one of the client-side kinds above.
    ``holder`` and ``revision`` name the owner a forward last tried, where
    the reply carries them; otherwise they are ``None``.
    """

    kind: str
    message: str
    holder: str | None
    revision: int | None

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        holder: str | None = None,
        revision: int | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.holder = holder
        self.revision = revision

    def __repr__(self) -> str:
        return (
            f"LeaseError(kind={self.kind!r}, message={self.message!r}, "
            f"holder={self.holder!r}, revision={self.revision!r})"
        )

    @property
    def lost(self) -> bool:
        """True when the caller is not the holder at that fence: stop acting as owner now."""
        return self.kind == LOST
