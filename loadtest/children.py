"""The benchmarks' child processes (aicp, kubesim, the comparison server): started with their
output in a log file, stopped with SIGTERM and, past a grace period, SIGKILL."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]


def spawn(
    argv: list[str], env: dict[str, str], log: IO[bytes], cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """`argv` in `cwd` (the repository) with `env`, its stdout and stderr both into `log`."""
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `grace` seconds; returns once it has
    exited (at once if it already had)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
