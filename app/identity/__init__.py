"""Single sign-on: verifying the access tokens of an OpenID Connect provider.

`keys` fetches and caches the issuer's discovery document and signing keys; `verifier` checks
a token against them and says who it names (`Identity`). What roles a person has is the API's
business (`app.api.people`, from `app.store.role_bindings`).
"""
