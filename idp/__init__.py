"""A local OpenID Connect provider for development and tests: Keycloak, downloaded once from
Maven Central into the user's cache and started in development mode with aicp's realm
(`python -m idp fetch | up [-- CMD ...]`, `make run-sso`)."""
