"""The README's quick start and the example program run as written, against
the real gateway."""

from __future__ import annotations

import ast
import asyncio
import re
import signal
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from conftest import Stack
from leader_process import leader
from dagnats_leases import FreeKey, Lease, LeaseClient

PACKAGE = Path(__file__).parents[1]
REPO_README = PACKAGE.parents[1] / "README.md"
# The repository README's blocks leave imports out, as its other languages' do.
IMPORTS = "import nats\nfrom dagnats_leases import LeaseClient, LeaseKeeper\n"


def python_block_after(path: Path, marker: str) -> str:
    """The first ```python block after the line ``marker`` in ``path``."""
    found = re.search(rf"{re.escape(marker)}\s*```python\n(.*?)```", path.read_text(), re.S)
    assert found, f"no python block after {marker!r} in {path}"
    return found.group(1)


async def run_top_level(source: str) -> dict[str, object]:
    """Runs ``source`` as ``python -m asyncio`` would: top-level await allowed."""
    code = compile(source, "<readme>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    scope: dict[str, object] = {}
    result = eval(code, scope)
    if asyncio.iscoroutine(result):
        await result
    return scope


@pytest.mark.parametrize(
    ("readme", "marker", "prelude"),
    [
        (PACKAGE / "README.md", "<!-- example: quick-start -->", ""),
        (REPO_README, "Python, [`clients/python`](clients/python):", IMPORTS),
    ],
    ids=["package-readme", "repository-readme"],
)
async def test_the_readme_example_runs_as_written_and_leaves_the_key_free(
    stack: Stack, client: LeaseClient, key: str, capsys: pytest.CaptureFixture[str], readme: Path, marker: str, prelude: str
) -> None:
    source = python_block_after(readme, marker)
    assert len(source.strip().splitlines()) <= 7
    source = source.replace("nats://127.0.0.1:4222", stack.url).replace('"notify-leader"', repr(key))
    scope = await run_top_level(prelude + source)
    printed = capsys.readouterr().out
    assert re.fullmatch(r"leading at fence \d+\n", printed), printed
    assert await client.owner(key) == FreeKey(held=False, key=key)
    nc = scope["nc"]
    assert isinstance(nc, NATS)
    await nc.close()


async def test_the_example_leads_answers_forwards_and_releases_on_sigterm(
    stack: Stack, client: LeaseClient, key: str
) -> None:
    async with leader(stack.url, key, "replica-1", 3000) as proc:
        assert proc.stdout is not None
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 10)).decode() for _ in range(2)]
        assert lines[0] == f"replica-1 waiting for {key}\n"
        fence = int(re.fullmatch(r"leading at fence (\d+)\n", lines[1]).group(1))  # type: ignore[union-attr]
        reply = await client.forward(key, b"ping", timeout_ms=2000)
        assert reply.decode().startswith("replica-1 handled 'ping' at fence ")
        owner = await client.owner(key)
        assert isinstance(owner, Lease) and owner.holder == "replica-1" and owner.revision >= fence
        proc.send_signal(signal.SIGTERM)
        rest = (await asyncio.wait_for(proc.stdout.read(), 10)).decode()
        assert rest == "not leading\nreleased\n"
        assert await asyncio.wait_for(proc.wait(), 10) == 0
        assert await client.owner(key) == FreeKey(held=False, key=key)
