# aicp: `make run` starts the control plane with embedded PostgreSQL and a simulated cluster;
# `make test` runs the test suite against real PostgreSQL and kubesim.
UV ?= uv
PY := .venv/bin/python

.PHONY: run test lint fmt venv bench clean

.venv/.synced: pyproject.toml uv.lock
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen
	@touch $@

venv: .venv/.synced

run: venv
	$(PY) -m app dev

test: venv
	$(PY) -m pytest -q

lint: venv
	.venv/bin/ruff check app kubesim tests loadtest
	.venv/bin/ruff format --check app kubesim tests loadtest
	.venv/bin/mypy
	.venv/bin/lint-imports

fmt: venv
	.venv/bin/ruff format app kubesim tests loadtest
	.venv/bin/ruff check --fix app kubesim tests loadtest

clean:
	rm -rf .venv .aicp .mypy_cache .ruff_cache .pytest_cache
