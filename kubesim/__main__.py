"""`python -m kubesim --port 0 --kubeconfig-out PATH [--nodes 2 --gpus-per-node 8
--gpu-profile h100] [--time-scale 1.0]`: run a cluster until SIGINT/SIGTERM.

Prints `kubesim listening on <url>` (flushed) once it serves, then writes the kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from kubesim.cluster import Cluster
from kubesim.command import LISTENING


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kubesim", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--kubeconfig-out", help="write a kubeconfig for the server here")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--gpu-profile", default="h100", help="h100, a100 or l40s")
    p.add_argument("--time-scale", type=float, default=1.0, help="0 stops simulated time")
    p.add_argument("--no-controllers", action="store_true", help="API server only")
    p.add_argument("--bookmark-seconds", type=float, default=None)
    p.add_argument(
        "--wait-for-pods-ready-seconds",
        type=float,
        default=None,
        help="Kueue's waitForPodsReady timeout (default 300, or "
        "KUBESIM_WAIT_FOR_PODS_READY_SECONDS; 0 disables it)",
    )
    return p.parse_args(argv)


def _pods_ready(seconds: float | None) -> object:
    if seconds is None:
        return None  # the environment's or the default
    from kubesim.controllers import WaitForPodsReady

    return WaitForPodsReady(enable=seconds > 0, timeout=max(seconds, 0.0))


async def run(args: argparse.Namespace) -> None:
    cluster = Cluster(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        gpu_profile=args.gpu_profile,
        time_scale=args.time_scale,
        port=args.port,
        controllers=not args.no_controllers,
        host=args.host,
        bookmark_interval=args.bookmark_seconds,
        wait_for_pods_ready=_pods_ready(args.wait_for_pods_ready_seconds),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await cluster.start()
    try:
        if args.kubeconfig_out:
            cluster.write_kubeconfig(args.kubeconfig_out)
        print(f"{LISTENING}{cluster.url}", flush=True)
        await stop.wait()
    finally:
        await cluster.stop()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(run(parse_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
