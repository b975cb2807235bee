"""The names on the wire: subjects and headers (docs/protocol.md, Operations,
Change events and Forwarding to the owner). Other NATS clients rely on every
one of these strings."""

from __future__ import annotations

SUBJECT_ACQUIRE = "api.leases.acquire"
SUBJECT_RENEW = "api.leases.renew"
SUBJECT_RELEASE = "api.leases.release"
SUBJECT_OWNER = "api.leases.owner"
SUBJECT_TRANSFER = "api.leases.transfer"
SUBJECT_LIST = "api.leases.list"
SUBJECT_FORWARD = "api.leases.forward"

KEY_CALL_SUBJECTS = frozenset(
    {SUBJECT_ACQUIRE, SUBJECT_RENEW, SUBJECT_RELEASE, SUBJECT_TRANSFER, SUBJECT_OWNER}
)
"""The calls on one key, which a gateway bounds by its own 4.5 s budget."""

CHANGED_PREFIX = "dagnats.lease.changed"
"""Every write to a key is republished on ``dagnats.lease.changed.<key>``."""
INBOX_PREFIX = "dagnats.lease.inbox"
"""Forwarded requests reach ``dagnats.lease.inbox.<holder>.<key>``."""

HEADER_FENCE = "Dagnats-Lease-Fence"
HEADER_REJECT = "Dagnats-Lease-Reject"
REJECT_STALE = "stale"
HEADER_WAIT_MS = "Dagnats-Lease-Wait-Ms"
"""How long the caller still waits for this reply, in milliseconds."""
HEADER_WAITED_MS = "Dagnats-Lease-Waited-Ms"
"""On each try of a wait for a key: milliseconds since the first try."""
HEADER_EVENT = "Dagnats-Lease-Event"
HEADER_SEQUENCE = "Nats-Sequence"
HEADER_MARKER_REASON = "Nats-Marker-Reason"
HEADER_KV_OPERATION = "KV-Operation"


def changed_subject(key: str) -> str:
    """The subject carrying the change events of ``key``."""
    return f"{CHANGED_PREFIX}.{key}"


def inbox_prefix(holder: str) -> str:
    """The subject prefix of ``holder``'s inbox, dot included."""
    return f"{INBOX_PREFIX}.{holder}."


def header(headers: dict[str, str] | None, name: str) -> str | None:
    """The value of header ``name`` whatever the case of its spelling; the
    exact spelling wins when a message carries several."""
    if not headers:
        return None
    exact = headers.get(name)
    if exact is not None:
        return exact
    wanted = name.lower()
    for found, value in headers.items():
        if found.lower() == wanted:
            return value
    return None
