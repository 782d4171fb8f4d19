"""`python -m idp fetch | up [-- CMD ...]`.

`up` starts Keycloak with the development realm, prints its issuer and the demo users (with
passwords and groups), and runs CMD — `make run-sso` runs `python -m app dev` — with aicp's
OIDC settings pointing at it; Ctrl-C or CMD's exit stops Keycloak.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from idp import distribution
from idp.keycloak import ADMIN_USER, Keycloak, KeycloakError, demo_users
from realcluster.processes import run_command, stop_on_sigterm

#: The realm's audience mapper puts this in every access token's `aud`.
AUDIENCE = "aicp"
#: Members of this group of the development realm are platform admins (AICP_OIDC_ADMIN_GROUPS).
ADMIN_GROUP = "aicp-admins"
CLI_CLIENT = "aicp-cli"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idp", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download and unpack the Keycloak distribution")
    up = commands.add_parser("up", help="start Keycloak (and run a command against it)")
    up.add_argument("--dir", type=Path, help="where it keeps its logs (default: a new temp dir)")
    up.add_argument("exec", nargs=argparse.REMAINDER, help="-- CMD ...: run CMD, then stop")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(f"keycloak: {distribution.ensure()}")
            return 0
        return _up(Keycloak(args.dir), [a for a in args.exec if a != "--"])
    except KeycloakError as exc:
        print(exc, file=sys.stderr)
        return 1


def oidc_environment(keycloak: Keycloak) -> dict[str, str]:
    """aicp's settings for this Keycloak as its issuer."""
    return {
        "AICP_OIDC_ISSUER": keycloak.issuer,
        "AICP_OIDC_AUDIENCE": AUDIENCE,
        "AICP_OIDC_ADMIN_GROUPS": ADMIN_GROUP,
        "AICP_OIDC_CLI_CLIENT_ID": CLI_CLIENT,
    }


def _up(keycloak: Keycloak, command: list[str]) -> int:
    stop_on_sigterm()
    try:
        keycloak.start()
        users = "\n".join(
            f"    {user.username:<8} password {user.password:<16} groups "
            f"{', '.join(user.groups) or '(none)'}"
            for user in demo_users(keycloak.realm_file)
        )
        print(
            f"keycloak: up in {keycloak.started_in:.1f} s\n"
            f"  issuer:   {keycloak.issuer}\n"
            f"  admin console: {keycloak.url}/admin/ (user {ADMIN_USER},"
            f" password {keycloak.admin_password})\n"
            f"  demo users (group {ADMIN_GROUP} = platform admin):\n{users}\n"
            f"  log: {keycloak.log}",
            file=sys.stderr,
            flush=True,
        )
        return run_command(command, oidc_environment(keycloak))
    except KeyboardInterrupt:
        return 0
    finally:
        print("keycloak: stopping", file=sys.stderr)
        keycloak.stop()


if __name__ == "__main__":
    sys.exit(main())
