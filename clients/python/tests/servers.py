"""Real processes for the tests: nats-server 2.15, the dagnats-leases
gateway, and PostgreSQL, each on free loopback ports with its own temporary
directory, stopped after. A binary that is missing fails the test that needs
it with a message naming the variable to set; nothing is ever skipped."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[3]
START_DEADLINE = 30.0


def binary(variable: str, default: Path) -> str:
    """The path of a binary the tests run, from ``variable`` or ``default``."""
    path = os.environ.get(variable) or str(default)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable: set {variable} to one (see scripts/clients/python)", pytrace=False)
    return path


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def within(deadline: float, what: str, check: Callable[[], bool], log: Path | None = None) -> None:
    """Polls ``check`` until true, failing with ``what`` (and the log's
    tail) once ``deadline`` seconds have passed."""
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            pytest.fail(f"{what} not within {deadline} s\n{tail}", pytrace=False)
        time.sleep(0.02)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Process:
    """A child process whose output goes to a log file."""

    def __init__(self, argv: list[str], log: Path, **popen: object) -> None:
        self.log = log
        self._out = log.open("ab")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, **popen)  # type: ignore[call-overload]

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not ended within 10 s."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


class Nats:
    """A nats-server 2.15 with JetStream on a free loopback port."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        store = workdir / f"nats-{self.port}"
        store.mkdir(parents=True)
        argv = [binary("NATS_SERVER_BIN", REPO / ".tools/nats/bin/nats-server")]
        argv += ["-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(store)]
        self.process = Process(argv, store / "server.log")
        within(START_DEADLINE, f"nats-server listening on {self.port}", lambda: self._ready(), self.process.log)

    def _ready(self) -> bool:
        if not self.process.alive():
            pytest.fail(f"nats-server exited:\n{self.process.log.read_text(errors='replace')[-3000:]}", pytrace=False)
        return _listening(self.port)

    def stop(self) -> None:
        """Stops the server."""
        self.process.stop()


class Gateway:
    """The real dagnats-leases gateway on ``nats_url``, ready (its bucket
    provisioned) when constructed."""

    def __init__(self, nats_url: str, workdir: Path) -> None:
        self.http_port = free_port()
        argv = [binary("DAGNATS_LEASES_BIN", REPO / "target/debug/dagnats-leases"), "serve"]
        argv += ["--nats-url", nats_url, "--http-addr", f"127.0.0.1:{self.http_port}"]
        self.process = Process(argv, workdir / f"gateway-{self.http_port}.log")
        within(START_DEADLINE, "the gateway's /readyz answering 200", self._ready, self.process.log)

    def _ready(self) -> bool:
        if not self.process.alive():
            pytest.fail(f"the gateway exited:\n{self.process.log.read_text(errors='replace')[-3000:]}", pytrace=False)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/readyz", timeout=1) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        """Stops the gateway."""
        self.process.stop()


class Postgres:
    """A PostgreSQL cluster made by initdb in a temporary directory, on a
    free loopback port, trust authentication, its socket in that directory.
    As root it runs as ``nobody``: postgres refuses to run as root."""

    BIN = Path(os.environ.get("POSTGRES_BIN_DIR", "/usr/lib/postgresql/15/bin"))

    def __init__(self) -> None:
        for tool in ("initdb", "postgres"):
            if not os.access(self.BIN / tool, os.X_OK):
                pytest.fail(
                    f"{self.BIN / tool} is missing: install Debian's postgresql (or set POSTGRES_BIN_DIR)",
                    pytrace=False,
                )
        self.port = free_port()
        # Its own directory in the system's temporary one, which any user
        # can reach: postgres may run as another user than the tests.
        self.dir = Path(tempfile.mkdtemp(prefix="dagnats-leases-pg-"))
        data = self.dir / "data"
        as_user: list[str] = []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                pytest.fail("running as root needs runuser to start postgres as nobody", pytrace=False)
            as_user = [runuser, "-u", "nobody", "--"]
            shutil.chown(self.dir, "nobody")
        init = subprocess.run(
            [*as_user, str(self.BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
            capture_output=True,
            text=True,
        )
        if init.returncode != 0:
            pytest.fail(f"initdb failed:\n{init.stdout}\n{init.stderr}", pytrace=False)
        argv = [*as_user, str(self.BIN / "postgres"), "-D", str(data), "-p", str(self.port)]
        argv += ["-k", str(self.dir), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
        self.process = Process(argv, self.dir / "postgres.log.out")
        self.dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        within(START_DEADLINE, f"postgres accepting connections on {self.port}", self._ready, self.process.log)

    def _ready(self) -> bool:
        if not self.process.alive():
            pytest.fail(f"postgres exited:\n{self.process.log.read_text(errors='replace')[-3000:]}", pytrace=False)
        if not _listening(self.port):
            return False
        try:  # listening comes before accepting: "the database system is starting up"
            psycopg.connect(self.dsn, connect_timeout=1).close()
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """Stops the server: SIGINT is postgres's fast shutdown."""
        if self.process.alive():
            self.process.proc.send_signal(signal.SIGINT)
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
