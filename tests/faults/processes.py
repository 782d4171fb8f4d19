"""Real processes for the fault scenarios: kubesim, aicp replicas, and a PostgreSQL proxy.

- `Kubesim`: `python -m kubesim` in a child process, with its `/_sim/` fault injection.
- `Replica`: `python -m app serve` against a database and that cluster. Its JSON log lines are
  kept (and written to a file) so a scenario can count errors or find a milestone.
- `PgProxy`: a TCP proxy in front of PostgreSQL, in the test's own event loop. It can refuse
  connections (its listening socket is closed, so a connect is refused as by a server that is
  down) and cut every open connection, which is how "the database went away" looks to a
  client. Backend kills, by contrast, use `pg_terminate_backend` on the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from kubesim.command import LISTENING
from kubesim.command import command as kubesim_command
from tests.support.api_client import ADMIN_TOKEN, bearer
from tests.support.service import spawn_serve
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process: this one's, minus any ambient cluster."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env.update(PYTHONPATH=str(REPO), **extra)
    return env


async def _drain(stream: asyncio.StreamReader | None, sink: list[str]) -> None:
    if stream is None:
        return
    while line := await stream.readline():
        sink.append(line.decode(errors="replace").rstrip("\n"))


@dataclass
class Kubesim:
    """One simulated cluster in its own process."""

    process: asyncio.subprocess.Process
    url: str
    kubeconfig: Path
    output: list[str] = field(default_factory=list)
    _drains: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def start(cls, directory: Path, *, nodes: int = 4, gpus_per_node: int = 8) -> Kubesim:
        kubeconfig = directory / "kubeconfig"
        process = await asyncio.create_subprocess_exec(
            *kubesim_command(
                kubeconfig, "--nodes", str(nodes), "--gpus-per-node", str(gpus_per_node)
            ),
            env=child_env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT)
        assert line.startswith(LISTENING.encode()), line
        sim = cls(process, line.decode().removeprefix(LISTENING).strip(), kubeconfig)
        sim._drains = [
            asyncio.create_task(_drain(process.stdout, sim.output)),
            asyncio.create_task(_drain(process.stderr, sim.output)),
        ]
        await wait_until(kubeconfig.exists, timeout=10, message="kubesim kubeconfig")
        return sim

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as client:
            response = await client.request(method, path, json=body)
        assert response.status_code < 300, response.text
        return response.json() if response.content else None

    async def answering(self) -> bool:
        try:
            async with httpx.AsyncClient(base_url=self.url, timeout=2) as client:
                return (await client.get("/version")).status_code == 200
        except httpx.HTTPError:
            return False

    async def faults(self, **settings: Any) -> None:
        """Merge fault settings (see docs/KUBESIM.md, "Faults, stats and time")."""
        await self.call("POST", "/_sim/faults", settings)

    async def clear_faults(self) -> None:
        await self.call("DELETE", "/_sim/faults")

    async def stop(self) -> None:
        await _terminate(self.process)
        for task in self._drains:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _terminate(process: asyncio.subprocess.Process, grace: float = 15.0) -> None:
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


class Replica:
    """One `python -m app serve` process (restartable under the same instance id)."""

    def __init__(
        self,
        instance_id: str,
        *,
        database_url: str,
        kubeconfig: Path,
        log_dir: Path,
        lease_ttl: float = 3.0,
        sweep_interval: float = 0.5,
        env: dict[str, str] | None = None,
    ) -> None:
        self.instance_id = instance_id
        self.database_url = database_url
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.lease_ttl = lease_ttl
        self.sweep_interval = sweep_interval
        self.extra_env = env or {}
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.lines: list[dict[str, Any]] = []  # every JSON log line of every run
        self.runs = 0
        self._drain: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None
        self._retired: list[httpx.AsyncClient] = []  # clients of earlier runs, closed at stop

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self, *, wait_serving: bool = True) -> None:
        """Spawn the process; with `wait_serving`, return once it serves HTTP."""
        self.runs += 1
        env = child_env(
            DATABASE_URL=self.database_url,
            KUBECONFIG=str(self.kubeconfig),
            AICP_ADMIN_TOKEN=ADMIN_TOKEN,
            AICP_INSTANCE_ID=self.instance_id,
            AICP_HTTP_HOST="127.0.0.1",
            AICP_HTTP_PORT="0",
            AICP_LOG_FORMAT="json",
            AICP_LEASE_TTL_SECONDS=str(self.lease_ttl),
            AICP_SWEEP_INTERVAL_SECONDS=str(self.sweep_interval),
            AICP_WORKERS="16",
            **self.extra_env,
        )
        self.process = await spawn_serve(env)
        serving: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._drain = asyncio.create_task(self._read(self.process, serving))
        if wait_serving:
            self.url = await asyncio.wait_for(serving, START_TIMEOUT)

    async def _read(
        self, process: asyncio.subprocess.Process, serving: asyncio.Future[str]
    ) -> None:
        assert process.stderr is not None
        path = self.log_dir / f"{self.instance_id}.{self.runs}.log"
        with path.open("w") as sink:
            while raw := await process.stderr.readline():
                text = raw.decode(errors="replace")
                sink.write(text)
                sink.flush()
                try:
                    line = json.loads(text)
                except ValueError:
                    line = {"level": "raw", "msg": text.rstrip()}
                if not isinstance(line, dict):
                    continue
                line["run"] = self.runs
                line["seen"] = time.monotonic()
                self.lines.append(line)
                msg = str(line.get("msg", ""))
                if not serving.done() and " serving on " in msg:
                    serving.set_result(msg.split(" serving on ", 1)[1].strip())
        if not serving.done():
            serving.set_exception(RuntimeError(f"{self.instance_id} exited before serving"))

    def client(self, timeout: float = 10.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=bearer(ADMIN_TOKEN), timeout=timeout)

    @property
    def http(self) -> httpx.AsyncClient:
        """One shared client for this run of the process (a burst opens no client per request:
        the test process must stay responsive enough to time what it measures)."""
        if self._http is None or str(self._http.base_url).rstrip("/") != self.url:
            if self._http is not None:
                self._retired.append(self._http)
            self._http = httpx.AsyncClient(
                base_url=self.url,
                headers=bearer(ADMIN_TOKEN),
                timeout=15.0,
                limits=httpx.Limits(max_connections=32),
            )
        return self._http

    async def status(self, path: str) -> int | None:
        """The status of a GET, None when the process does not answer."""
        try:
            async with self.client(timeout=2.0) as client:
                return (await client.get(path)).status_code
        except httpx.HTTPError:
            return None

    async def wait_ready(self, timeout: float = 30.0) -> None:
        async def ready() -> bool:
            return await self.status("/readyz") == 200

        await wait_until(ready, timeout=timeout, interval=0.1, message=f"{self.instance_id} ready")

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        """kill -9: no cleanup at all; its leases stay until they expire (or a restart)."""
        self.signal(signal.SIGKILL)

    async def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self._drain is not None:
            await self._drain
        return code

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def logged(self, text: str, *, run: int | None = None) -> list[dict[str, Any]]:
        """Log lines whose message contains `text` (of one run, or of all)."""
        return [
            line
            for line in self.lines
            if text in str(line.get("msg", "")) and (run is None or line["run"] == run)
        ]

    def errors(self) -> list[dict[str, Any]]:
        """ERROR (and worse) lines, and anything that was not a JSON log line (tracebacks)."""
        return [line for line in self.lines if line.get("level") in ("error", "critical", "raw")]

    def warnings(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("level") == "warning"]

    async def stop(self) -> None:
        for client in [*self._retired, *([self._http] if self._http is not None else [])]:
            await client.aclose()
        self._retired, self._http = [], None
        if self.process is not None:
            await _terminate(self.process)
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await self._drain


def _bound(port: int) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:`port` (0: any free port), not listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def server_address(database_url: str) -> tuple[str, int]:
    """The (host, port) of the server `database_url` names: its `host` parameter when it has one
    (a Unix socket's directory, as the embedded server's URL gives), else its netloc's."""
    parts = urllib.parse.urlsplit(database_url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    host = query.get("host") or parts.hostname or "127.0.0.1"
    port = int(query.get("port") or parts.port or 5432)
    return host, port


#: The request codes a client may send before its startup packet (protocol 3).
SSL_REQUEST = (80877103).to_bytes(4, "big")
GSS_REQUEST = (80877104).to_bytes(4, "big")


class PgProxy:
    """TCP proxy to PostgreSQL that can refuse new connections and cut the open ones. `host`
    is the server's host, or the directory of its Unix socket (an absolute path: the embedded
    server of a machine without PostgreSQL listens only there)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._refusal: tuple[str, str] | None = None
        self._server: asyncio.Server | None = None
        # While refusing: the port, bound but not listening (a connect is refused), so that
        # no other socket of the machine (an outgoing connection's ephemeral port) takes it
        # before the proxy listens on it again.
        self._reserved: socket.socket | None = None
        self._pipes: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen (on the same port as before, after `refuse`)."""
        sock, self._reserved = self._reserved or _bound(self.port), None
        sock.listen(100)
        self._server = await asyncio.start_server(self._accept, sock=sock)
        self.port = sock.getsockname()[1]

    @property
    def listening(self) -> bool:
        return self._server is not None

    def url_for(self, database_url: str) -> str:
        """`database_url` with the proxy's address instead of the server's."""
        parts = urllib.parse.urlsplit(database_url)
        netloc = parts.netloc.rsplit("@", 1)
        auth = netloc[0] + "@" if len(netloc) == 2 else ""
        # A `host` or `port` parameter (a Unix socket's) would take the client past the proxy.
        query = urllib.parse.urlencode(
            [
                (key, value)
                for key, value in urllib.parse.parse_qsl(parts.query)
                if key not in ("host", "port")
            ]
        )
        return urllib.parse.urlunsplit(
            parts._replace(netloc=f"{auth}127.0.0.1:{self.port}", query=query)
        )

    def cut(self) -> int:
        """Close every open connection at once (both sides see a reset); return how many."""
        pipes = list(self._pipes)
        for writer in pipes:
            transport = writer.transport
            transport.abort()
        self._pipes.clear()
        return len(pipes) // 2

    async def refuse(self) -> None:
        """Stop listening (connects are refused) and cut what is open."""
        if self._server is not None:
            server, self._server = self._server, None
            server.close()  # the listening socket closes now: keep its port at once
            self._reserved = _bound(self.port)
            await server.wait_closed()
        self.cut()

    def answer_refusal(self, sqlstate: str, message: str) -> int:
        """Answer every new connection as a server that refuses it does: an ErrorResponse
        (FATAL, `sqlstate`, `message`) to its startup packet, then close. Cuts what is open;
        return how many. `forward` goes back to proxying."""
        self._refusal = (sqlstate, message)
        return self.cut()

    def forward(self) -> None:
        """Proxy new connections to the server again (after `answer_refusal`)."""
        self._refusal = None

    async def stop(self) -> None:
        await self.refuse()
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _connect_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = self.target
        if host.startswith("/"):
            return await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        return await asyncio.open_connection(host, port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusal is not None:
            await self._refuse_startup(reader, writer, *self._refusal)
            return
        up_writer: asyncio.StreamWriter | None = None
        try:
            try:
                up_reader, up_writer = await self._connect_upstream()
            except OSError:
                return
            if self._server is None:  # refused while this one was connecting: cut it too
                return
            self._pipes.update((writer, up_writer))
            pumps = [
                asyncio.create_task(self._pump(reader, up_writer)),
                asyncio.create_task(self._pump(up_reader, writer)),
            ]
            self._tasks.update(pumps)
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                    self._tasks.discard(pump)
        finally:  # every way out (a cut, a refusal, cancellation) closes both ends
            for end in (writer, up_writer):
                if end is not None:
                    self._pipes.discard(end)
                    end.transport.abort()

    @staticmethod
    async def _refuse_startup(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sqlstate: str, message: str
    ) -> None:
        """The server's side of a refused startup (PostgreSQL frontend/backend protocol 3):
        decline TLS, read the startup packet, answer an ErrorResponse and close."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
            while True:
                length = int.from_bytes(await reader.readexactly(4), "big")
                packet = await reader.readexactly(length - 4)
                if packet[:4] in (SSL_REQUEST, GSS_REQUEST):
                    writer.write(b"N")
                    await writer.drain()
                    continue
                break
            fields = b"".join(
                code + text.encode() + b"\0"
                for code, text in (
                    (b"S", "FATAL"),
                    (b"V", "FATAL"),
                    (b"C", sqlstate),
                    (b"M", message),
                )
            )
            body = fields + b"\0"
            writer.write(b"E" + (len(body) + 4).to_bytes(4, "big") + body)
            await writer.drain()
        writer.transport.abort()

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
