"""``python -m app serve`` (production) and ``python -m app dev`` (a laptop, nothing installed).

Both run on uvloop with uvicorn in-process. ``serve`` takes its settings from the environment
(DESIGN.md §9) and exits with status 2 and one line per bad variable when they are invalid.
"""

from __future__ import annotations

import argparse
import sys

import uvloop

from app.config import ConfigError, Settings
from app.main import Service, run_service
from app.observability.logs import configure_logging

EXIT_CONFIG = 2


def _serve(settings: Settings) -> int:
    configure_logging(settings.log_format, settings.instance_id)
    uvloop.run(run_service(settings))
    return 0


def _dev() -> int:
    from app import devmode

    try:
        settings = devmode.dev_settings()
    except ConfigError as exc:
        print(f"aicp: invalid configuration:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(settings.log_format, settings.instance_id)

    def announce(service: Service) -> None:
        print(devmode.banner(settings, service.url), file=sys.stderr, flush=True)

    uvloop.run(run_service(settings, on_ready=announce))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    parser.add_argument(
        "command",
        choices=["serve", "dev"],
        help="serve: production entry; dev: embedded PostgreSQL and admin token",
    )
    args = parser.parse_args(argv)
    if args.command == "dev":
        return _dev()
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"aicp: invalid configuration:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG
    return _serve(settings)


if __name__ == "__main__":
    sys.exit(main())
