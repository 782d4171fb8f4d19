# aicp: `make run` starts the control plane with embedded PostgreSQL and a simulated cluster;
# `make test` runs the test suite against real PostgreSQL and kubesim.
UV ?= uv
PY := .venv/bin/python

.PHONY: run run-sso keycloak run-real real-cluster test test-kubesim test-faults test-real fuzz lint fmt venv bench loadtest clean

# The real-cluster tier needs Go (to build kube-apiserver, Kueue, KWOK... from pinned modules).
HAVE_GO := $(shell command -v go 2>/dev/null)

.venv/.synced: pyproject.toml uv.lock
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen
	@touch $@

venv: .venv/.synced

run: venv
	$(PY) -m app dev

# `make run` with a development Keycloak (idp/) as its OpenID Connect issuer: prints the issuer
# and the demo users with their passwords and groups; `aicp login --url ... --oidc` signs in.
# Keycloak is downloaded once into the user's cache; it needs Java 17 or newer.
run-sso: venv
	$(PY) -m idp up -- $(PY) -m app dev

keycloak: venv
	$(PY) -m idp fetch

# Builds (or finds, in the user's cache) the real cluster's binaries: ~30 min cold on 2 cores.
real-cluster: venv
	$(PY) -m realcluster build

# aicp with embedded PostgreSQL against a real cluster (kubectl: the KUBECONFIG it prints).
run-real: real-cluster
	$(PY) -m realcluster up -- $(PY) -m app dev

# The kubesim tier, then the real-cluster tier (skipped, and said so, without Go). With Go the
# build comes first: the kubesim tier also checks manifests against the pinned Kueue CRDs.
test: test-kubesim test-real

ifdef HAVE_GO
test-kubesim: real-cluster
	$(PY) -m pytest -q -m "not real_cluster"

# The gang-requeue scenario waits out Kueue's pods-ready timeout on the wall clock: it runs on a
# cluster of its own started with a 20 s timeout instead of the default 5 minutes.
test-real: real-cluster
	$(PY) -m pytest -q -m real_cluster --ignore=tests/acceptance/test_gang_requeue.py
	KUBESIM_WAIT_FOR_PODS_READY_SECONDS=20 $(PY) -m pytest -q -m real_cluster \
		tests/acceptance/test_gang_requeue.py
else
test-kubesim: venv
	$(PY) -m pytest -q -m "not real_cluster"

test-real:
	@echo "make test: real-cluster tier SKIPPED: no Go toolchain on this machine (install Go >= 1.26 to run it)"
endif

# The API against its own OpenAPI document: >= 5,000 generated requests (valid and invalid), no
# 5xx, no status, content type or body outside the document. `make test` runs a short version.
FUZZ_CASES ?= 5000
fuzz: venv
	AICP_FUZZ_CASES=$(FUZZ_CASES) $(PY) -m pytest tests/integration/api/test_schemathesis.py \
		-q -s -p no:cacheprovider -o timeout=3600

# Every fault scenario on kubesim at full size (bursts of 500); `make test` runs a representative
# subset. The kill -9 and SIGSTOP scenarios on the real cluster run in `make test-real`.
test-faults: venv
	AICP_FAULTS_FULL=1 $(PY) -m pytest tests/faults -q -m "not real_cluster"

lint: venv
	.venv/bin/ruff check app kubesim realcluster idp cli tests loadtest
	.venv/bin/ruff format --check app kubesim realcluster idp cli tests loadtest
	.venv/bin/mypy
	.venv/bin/lint-imports

fmt: venv
	.venv/bin/ruff format app kubesim realcluster idp cli tests loadtest
	.venv/bin/ruff check --fix app kubesim realcluster idp cli tests loadtest

# locust's users (loadtest/locustfile.py) for LOADTEST_SECONDS against `python -m app dev` in a
# throwaway state directory (embedded PostgreSQL, or a fresh database on LOADTEST_PG's server);
# CSV and HTML reports under loadtest/reports/.
LOADTEST_SECONDS ?= 30
LOADTEST_USERS ?= 20
LOADTEST_PG ?=
loadtest: venv
	$(PY) loadtest/locust_run.py --seconds $(LOADTEST_SECONDS) --users $(LOADTEST_USERS) \
		$(if $(LOADTEST_PG),--pg $(LOADTEST_PG))

# aicp and the FastAPI + SQLAlchemy comparison server under the same load (wrk), side by side.
bench: venv
	$(PY) loadtest/side_by_side.py

clean:
	rm -rf .venv .aicp .mypy_cache .ruff_cache .pytest_cache
