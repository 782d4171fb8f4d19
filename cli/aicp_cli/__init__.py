"""The ``aicp`` command line: a client of the public REST API (see ``aicp_cli.main``)."""
