"""Running the `aicp` console script as a user would: a subprocess with its own config dir.

- ``Cli(url, token, home)``: ``await cli.run("get", "workloads")`` → `Result` (exit status,
  stdout, stderr); ``cli.start("get", "workloads", "-w", "-o", "json")`` → a `Running` process
  whose output lines are read with deadlines.
- ``TcpProxy``: a loopback proxy in front of a service whose connections a test can cut, to
  drop a stream the way a network does, and that stays at one address across a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AICP = Path(sys.executable).parent / "aicp"


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@dataclass
class Cli:
    url: str
    token: str
    home: Path
    project: str | None = None

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("AICP_") and k not in ("KUBECONFIG",)
        }
        env.update(
            {
                "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "AICP_URL": self.url,
                "AICP_TOKEN": self.token,
                "PATH": f"{AICP.parent}:{env.get('PATH', '/usr/bin:/bin')}",
                "COLUMNS": "200",
            }
        )
        if self.project:
            env["AICP_PROJECT"] = self.project
        env.update(extra)
        return env

    async def run(
        self, *args: str, stdin: str | None = None, timeout: float = 60, **env: str
    ) -> Result:
        process = await asyncio.create_subprocess_exec(
            str(AICP),
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env(**env),
            cwd=self.home,
        )
        out, err = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), timeout
        )
        assert process.returncode is not None
        return Result(process.returncode, out.decode(), err.decode())

    @contextlib.asynccontextmanager
    async def start(self, *args: str, **env: str) -> AsyncIterator[Running]:
        process = await asyncio.create_subprocess_exec(
            str(AICP),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env(**env),
            cwd=self.home,
        )
        running = Running(process)
        try:
            yield running
        finally:
            if process.returncode is None:
                process.terminate()
            await process.wait()


@dataclass
class Running:
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)

    async def line(self, timeout: float = 20) -> str:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not raw:
            err = b""
            if self.process.stderr is not None:
                err = await self.process.stderr.read()
            raise EOFError(f"aicp ended: {err.decode()}")
        text = raw.decode().rstrip("\n")
        self.lines.append(text)
        return text

    async def event(self, timeout: float = 20) -> dict[str, Any]:
        """The next `-o json` watch event."""
        found: dict[str, Any] = json.loads(await self.line(timeout))
        return found

    async def exit_code(self, timeout: float = 10) -> tuple[int, str]:
        assert self.process.stderr is not None
        err = await asyncio.wait_for(self.process.stderr.read(), timeout)
        code = await asyncio.wait_for(self.process.wait(), timeout)
        return code, err.decode()


class TcpProxy:
    """127.0.0.1:<port> → `target_port`; `cut()` closes every connection it carries. While
    nothing listens at `target_port` (a restart), each connection is accepted and closed;
    `target_port` may change (the restarted service's)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.attempts = 0  # connections the proxy accepted (a client's attempts)

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.attempts += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:  # the service is down: the client sees its connection closed
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        pumps = [
            asyncio.create_task(_pump(reader, up_writer)),
            asyncio.create_task(_pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        for pump in pumps:
            pump.add_done_callback(self._tasks.discard)
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for end in (writer, up_writer):
            end.transport.abort()
            self._writers.discard(end)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.CancelledError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
