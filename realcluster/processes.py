"""Child processes of one real cluster: started in order, each logging to its own file, each
waited for with a deadline, all stopped in reverse order.

A component is started in its own process group with `PR_SET_PDEATHSIG`, so it dies with the
process that started it even when that one is killed with SIGKILL: an interrupted test run
leaves no etcd or apiserver behind. A component that reads its files from fixed paths (Kueue's
certificates) can be given a private mount namespace in which the cluster's own directories
are bound over those paths, so two clusters on one machine never see each other's files. A
component that exits, or is not ready by its deadline, raises `ComponentError` with one line
naming it and its log file.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18


class ComponentError(Exception):
    """A component failed to start, exited, or was not ready in time."""


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """From now on SIGTERM stops this launcher as Ctrl-C does (a `KeyboardInterrupt`)."""
    signal.signal(signal.SIGTERM, _interrupt)


def run_command(command: list[str], env: dict[str, str]) -> int:
    """Run `command` with `env` added to this process's environment and return its exit
    status; a Ctrl-C (or SIGTERM, after `stop_on_sigterm`) is passed on to it as SIGINT and
    its exit waited for. Without a command, wait until interrupted."""
    if not command:
        signal.pause()
        return 0
    with subprocess.Popen(command, env={**os.environ, **env}) as child:
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            return child.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def machine_address() -> str:
    """The machine's own IPv4 address (not loopback, not link-local): where a component must
    listen when the apiserver is to reach it through an Endpoint, which may not be loopback."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family != socket.AF_INET:
                continue
            ip = ipaddress.IPv4Address(address.address)
            if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified):
                return str(ip)
    raise ComponentError("real cluster: this machine has no IPv4 address but loopback")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _in_child(mounts: dict[Path, Path]) -> Callable[[], None]:
    """What the child runs between fork and exec: die with its parent and, given `mounts`
    (fixed path → the directory to see there), enter a mount namespace of its own, private
    (nothing propagates back), in which each directory is bound over its path."""

    def prepare() -> None:
        _die_with_parent()
        if not mounts:
            return
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if libc.unshare(_CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
        for target, source in mounts.items():
            if libc.mount(bytes(source), bytes(target), None, _MS_BIND, None) != 0:
                raise OSError(ctypes.get_errno(), f"mount --bind {source} {target}")

    return prepare


@dataclass
class Component:
    """One running child process."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    label: str = "real cluster"
    """What the component belongs to, first in its error messages."""

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise ComponentError(
                f"{self.label}: {self.name} exited with status {code}: "
                f"{_tail(self.log)} (log: {self.log})"
            )

    def stop(self, grace: float = 10.0) -> None:
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _tail(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "no output"


@dataclass
class Supervisor:
    """The components of one cluster, in start order."""

    logs: Path
    components: list[Component] = field(default_factory=list)
    label: str = "real cluster"
    """What the components belong to, first in error messages (`Component.label`)."""

    def start(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        *,
        mounts: dict[Path, Path] | None = None,
    ) -> Component:
        """Start `argv` as component `name`; with `mounts` (fixed path → directory), in a
        mount namespace of its own where each directory is seen at its fixed path."""
        if not Path(argv[0]).exists():
            raise ComponentError(
                f"{self.label}: {name}: {argv[0]} does not exist (make real-cluster)"
            )
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        try:
            for target in mounts or {}:
                target.mkdir(parents=True, exist_ok=True)  # the mount point, left empty
            with log.open("ab") as out:
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **(env or {})},
                    start_new_session=True,
                    preexec_fn=_in_child(mounts or {}),
                )
        except (OSError, subprocess.SubprocessError) as exc:
            raise ComponentError(
                f"{self.label}: {name} could not be started: {exc}"
                + (" (its private mounts need root)" if mounts else "")
            ) from exc
        component = Component(name, process, log, self.label)
        self.components.append(component)
        return component

    def wait(
        self, component: Component, ready: Callable[[], bool], what: str, timeout: float
    ) -> None:
        """Poll `ready` until it is true; raise if the component exits or time runs out."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            component.check_alive()
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"{self.label}: {component.name} not ready after {timeout:.0f} s "
                    f"(waiting for {what}); see {component.log}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def stop_all(self) -> None:
        for component in reversed(self.components):
            component.stop()
        self.components.clear()
