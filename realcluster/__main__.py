"""`python -m realcluster build | up [--nodes N] [--gpus N] [--profile P] [-- CMD ...]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from realcluster import build as building
from realcluster.cluster import ClusterOptions, RealCluster
from realcluster.pki import PkiError
from realcluster.processes import ComponentError, run_command, stop_on_sigterm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realcluster", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the binaries from the pinned Go modules")
    up = commands.add_parser("up", help="start a cluster (and run a command against it)")
    up.add_argument("--nodes", type=int, default=2, help="GPU nodes (default 2)")
    up.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node (default 8)")
    up.add_argument("--profile", default="h100", help="h100 (default), a100 or l40s")
    up.add_argument(
        "--dir",
        type=Path,
        help="where the cluster keeps its files (default: a new temporary directory)",
    )
    up.add_argument("exec", nargs=argparse.REMAINDER, help="-- CMD ...: run CMD, then stop")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build = building.ensure_built()
            print(f"real-cluster: binaries in {build.bin}")
            return 0
        building.ensure_built()
        options = ClusterOptions(nodes=args.nodes, gpus_per_node=args.gpus, profile=args.profile)
        return _up(RealCluster(options, directory=args.dir), [a for a in args.exec if a != "--"])
    except (building.BuildError, ComponentError, PkiError) as exc:
        print(exc, file=sys.stderr)
        return 1


def _up(cluster: RealCluster, command: list[str]) -> int:
    stop_on_sigterm()  # SIGTERM stops the cluster as Ctrl-C does
    cluster.start()
    try:
        print(
            f"real-cluster: up in {cluster.started_in:.1f} s at {cluster.url}\n"
            f"  kubectl:  export KUBECONFIG={cluster.admin_kubeconfig}\n"
            f"  aicp's least-privilege kubeconfig: {cluster.aicp_kubeconfig}\n"
            f"  component logs: {cluster.supervisor.logs}",
            file=sys.stderr,
            flush=True,
        )
        return run_command(command, {"KUBECONFIG": str(cluster.aicp_kubeconfig)})
    except KeyboardInterrupt:
        return 0
    finally:
        print("real-cluster: stopping", file=sys.stderr)
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
