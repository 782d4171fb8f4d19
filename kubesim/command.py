"""The command line that runs kubesim in a child process, for the tests and benchmarks that do.

`command(kubeconfig, "--nodes", "4")` is `python -m kubesim` on a free port, writing its
kubeconfig to `kubeconfig`, with the given options after (see `kubesim.__main__`). The child
prints `LISTENING` and its URL once it serves.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

LISTENING = "kubesim listening on "


def command(kubeconfig: Path, *options: str) -> list[str]:
    """`python -m kubesim --port 0 --kubeconfig-out KUBECONFIG OPTIONS...` with this interpreter."""
    return [
        sys.executable,
        "-m",
        "kubesim",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        *options,
    ]
