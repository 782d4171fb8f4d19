"""``GET /api/v1/sign-on`` (no token needed): how a client signs a person in — the OpenID
Connect issuer, the audience aicp expects and the command line's client id — so that
`aicp login --oidc` needs only the server's URL. 404 when no issuer is configured."""

from typing import Any

from litestar import Request, get

from app.api.docs import problems
from app.api.people import SIGN_ON_KEY, SignOn
from app.domain.errors import NotFound
from app.domain.resources import SignOnInfo


@get(
    "/sign-on",
    opt={"public": True},
    summary="How to sign in",
    description="No token needed. The issuer to sign in with, the audience aicp's access "
    "tokens must carry, and the public client id of the `aicp` command line. 404 when this "
    "installation has no identity provider (API tokens only).",
    responses=problems(404),
    security=[],
    tags=["identity"],
)
async def sign_on_info(request: Request[Any, Any, Any]) -> SignOnInfo:
    sign_on: SignOn | None = request.app.state.get(SIGN_ON_KEY)
    if sign_on is None:
        raise NotFound("This installation has no identity provider: use an API token.")
    config = sign_on.verifier.config
    return SignOnInfo(
        issuer=config.issuer, audience=config.audience, cli_client_id=sign_on.cli_client_id
    )


ROUTES = [sign_on_info]
