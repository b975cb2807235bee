"""Fixtures: one nats-server and gateway for the session (tests use keys of
their own), stacks of their own for tests that stop them, NATS connections
and clients on them."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS

from dagnats_leases import LeaseClient
from servers import Gateway, Nats


@dataclass
class Stack:
    """A nats-server and, unless bare, a gateway on it."""

    nats: Nats
    gateway: Gateway | None

    @property
    def url(self) -> str:
        """The NATS URL clients connect to."""
        return self.nats.url

    def stop(self) -> None:
        """Stops the gateway, then the server."""
        if self.gateway is not None:
            self.gateway.stop()
        self.nats.stop()


def start_stack(workdir: Path) -> Stack:
    """A nats-server and a ready gateway on it; nothing left running on failure."""
    server = Nats(workdir)
    try:
        return Stack(server, Gateway(server.url, workdir))
    except BaseException:
        server.stop()
        raise


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The session's nats-server and gateway."""
    both = start_stack(tmp_path_factory.mktemp("stack"))
    yield both
    both.stop()


@pytest.fixture
def own_stack(tmp_path: Path) -> Iterator[Stack]:
    """A nats-server and gateway for one test, which may stop them."""
    both = start_stack(tmp_path)
    yield both
    both.stop()


@pytest.fixture
def bare_nats(tmp_path: Path) -> Iterator[Stack]:
    """A nats-server with no gateway: whatever answers the lease subjects is the test's."""
    server = Nats(tmp_path)
    yield Stack(server, None)
    server.stop()


@pytest.fixture
async def nc(stack: Stack) -> AsyncIterator[NATS]:
    """A NATS connection to the session's server."""
    conn = await nats.connect(stack.url)
    yield conn
    await conn.close()


@pytest.fixture
def client(nc: NATS) -> LeaseClient:
    """A lease client on `nc`."""
    return LeaseClient(nc)


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """A key no other test uses."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:80]
    return f"{name}-{uuid.uuid4().hex[:8]}"
