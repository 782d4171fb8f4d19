"""``python -m app serve`` (production) and ``python -m app dev`` (a laptop, nothing installed).

Both run on uvloop with uvicorn in-process. ``serve`` takes its settings from the environment
(docs/DESIGN.md §9) and exits with status 2 and one line per bad variable when they are invalid,
or when no Kubernetes configuration is found (in-cluster or ``KUBECONFIG``). ``dev`` adds an
embedded PostgreSQL, a generated admin token and, unless ``KUBECONFIG`` is set, an embedded
kubesim (see ``app.devmode``); its state lives in ``--state-dir`` (default ``.aicp``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Any

import uvloop

from app.config import ConfigError, Settings
from app.kube.client import KubeConfigError
from app.main import Service, run_service
from app.observability.logs import configure_logging
from app.supervision import ProcessFailed

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from pathlib import Path

    from app.wiring import ReconcilingComponent

EXIT_FAILED = 1
EXIT_CONFIG = 2


def _run(main: Coroutine[Any, Any, None]) -> int:
    """Run `main` on uvloop; a missing cluster configuration is exit status 2, a part of the
    process that died or did not recover (after an orderly shutdown) exit status 1."""
    try:
        uvloop.run(main)
    except KubeConfigError as exc:
        print(f"aicp: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except ProcessFailed as exc:
        print(f"aicp: exiting because {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _serve(settings: Settings) -> int:
    configure_logging(settings.log_format, settings.instance_id)
    return _run(run_service(settings))


async def _dev_main(settings: Settings, state_dir: Path) -> None:
    """The dev service, inside an embedded kubesim unless ``KUBECONFIG`` names a cluster."""
    from app import devmode

    async with contextlib.AsyncExitStack() as stack:
        kube_url = None
        if settings.kubeconfig is None:
            kube_url, kubeconfig = await stack.enter_async_context(
                devmode.embedded_cluster(state_dir)
            )
            settings = dataclasses.replace(settings, kubeconfig=str(kubeconfig))

        healing: list[asyncio.Task[None]] = []

        def announce(service: Service) -> None:
            text = devmode.banner(settings, service.url, state_dir, kube_url)
            print(text, file=sys.stderr, flush=True)
            if kube_url is not None and service.kubernetes is not None:
                healing.append(
                    asyncio.create_task(_announce_healed(service.kubernetes), name="dev-healed")
                )

        try:
            # The cluster is left (stopped) only after run_service has stopped the service.
            await run_service(settings, on_ready=announce)
        finally:
            for task in healing:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _announce_healed(component: ReconcilingComponent) -> None:
    """Once the first lists are in: say what the empty embedded kubesim lacked, if anything."""
    from app import devmode

    await component.heal_done.wait()
    if component.healed:
        print(devmode.healed_banner(component.healed), file=sys.stderr, flush=True)


def _dev(state_dir_arg: str | None) -> int:
    from app import devmode

    state_dir = devmode.state_dir_from(os.environ, state_dir_arg)
    try:
        settings = devmode.dev_settings(state_dir=state_dir)
    except ConfigError as exc:
        print(f"aicp: invalid configuration:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG
    state_dir.mkdir(parents=True, exist_ok=True)
    configure_logging(settings.log_format, settings.instance_id)
    return _run(_dev_main(settings, state_dir))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    parser.add_argument(
        "command",
        choices=["serve", "dev"],
        help="serve: production entry; dev: embedded PostgreSQL, admin token and kubesim",
    )
    parser.add_argument(
        "--state-dir",
        default=None,
        help="dev: where the embedded database, token and kubeconfig live "
        "(default: $AICP_STATE_DIR or .aicp)",
    )
    args = parser.parse_args(argv)
    if args.command == "dev":
        return _dev(args.state_dir)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"aicp: invalid configuration:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG
    return _serve(settings)


if __name__ == "__main__":
    sys.exit(main())
