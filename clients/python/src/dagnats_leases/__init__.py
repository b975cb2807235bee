"""dagnats-leases for asyncio: hold dagnats leases from Python services.

- `LeaseClient`: the lease calls (acquire, renew, release, owner, transfer,
  list, forward) as typed calls on a nats-py connection.
- `LeaseKeeper`: acquires (optionally waiting), renews every ttl/3, and says
  at every moment whether this process may act as owner, and at which fence.
- `serve_inbox`: the owner side of forward, answering only while entitled to.
- `FenceGate`: admits a write only if its fence is the highest seen.
- `LeaseError`: every failure, with the wire's ``kind``.

The protocol is docs/protocol.md in the dagnats-leases repository.
"""

from importlib.metadata import PackageNotFoundError, version

from .changes import ChangeEvent, ChangeKind, decode_change
from .client import LeaseClient
from .errors import LeaseError
from .fence import FenceGate, StaleFence
from .inbox import Handler, InboxRequest, InboxServer, Tenure, serve_inbox
from .keeper import NOT_OWNER, LeaseKeeper, Ownership
from .replies import FreeKey, Grant, Lease, LeaseList, Owner, Released

try:
    __version__ = version("dagnats-leases")
    """The installed distribution's version."""
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "ChangeEvent",
    "ChangeKind",
    "FenceGate",
    "FreeKey",
    "Grant",
    "Handler",
    "InboxRequest",
    "InboxServer",
    "Lease",
    "LeaseClient",
    "LeaseError",
    "LeaseKeeper",
    "LeaseList",
    "NOT_OWNER",
    "Owner",
    "Ownership",
    "Released",
    "StaleFence",
    "Tenure",
    "decode_change",
    "serve_inbox",
    "__version__",
]
