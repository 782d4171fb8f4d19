"""Limits between tenants and clients, over HTTP: request rates per token and per project
(429 with Retry-After), a flood of bad tokens, and a project's share of the streams."""

from __future__ import annotations

import re
import secrets

import httpx

from tests.support.api_client import bearer
from tests.support.pg_fixtures import serving
from tests.support.sse import open_stream, status_of

PROJECTS = "/api/v1/projects"
RATE_LIMITED = "aicp_rate_limited_total"
AUTH_FAILURES = "aicp_auth_failures_total"


def _metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "") + r" (\S+)"
    found = re.search(pattern, text)
    return float(found.group(1)) if found else 0.0


async def test_a_token_over_its_rate_gets_429_and_other_projects_do_not_notice(
    database_url: str,
) -> None:
    async with serving(
        database_url, rate_reads_per_token=1.0, rate_burst_seconds=5.0, rate_writes_per_token=1.0
    ) as api:
        await api.create_project("noisy")
        await api.create_project("quiet")
        noisy, quiet = await api.create_token("noisy"), await api.create_token("quiet")
        before = _metric((await api.client.get("/metrics")).text, RATE_LIMITED, limit="token-reads")
        async with api.as_token(noisy) as loud, api.as_token(quiet) as calm:
            answers = [(await loud.get("/api/v1/projects/noisy/workloads")) for _ in range(15)]
            statuses = [a.status_code for a in answers]
            assert statuses[:5] == [200] * 5  # the burst: 1/s for 5 s
            assert statuses.count(429) >= 5
            refused = answers[-1]
            assert refused.status_code == 429
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.json()["type"].endswith("/too-many-requests")
            assert refused.json()["limit"] == "token-reads"
            assert int(refused.headers["Retry-After"]) >= 1
            # Writes have their own bucket: reads spent do not refuse a write.
            write = await loud.post("/api/v1/projects/noisy/workloads", json={"name": "x"})
            assert write.status_code == 422
            # Another project's token is served as if nothing happened.
            for _ in range(5):
                assert (await calm.get("/api/v1/projects/quiet/workloads")).status_code == 200
            # The platform admin is not limited.
            for _ in range(20):
                assert (await api.client.get("/api/v1/projects/noisy")).status_code == 200
        after = _metric((await api.client.get("/metrics")).text, RATE_LIMITED, limit="token-reads")
        assert after - before == statuses.count(429)


async def test_a_flood_of_bad_tokens_costs_a_database_read_only_up_to_the_client_limit(
    database_url: str,
) -> None:
    async with serving(database_url, rate_auth_failures_per_client=1.0) as api:
        await api.create_project("research")
        good = await api.create_token("research")

        async def failures() -> dict[str, float]:
            text = (await api.client.get("/metrics")).text
            return {c: _metric(text, AUTH_FAILURES, check=c) for c in ("malformed", "looked-up")}

        before = await failures()
        async with httpx.AsyncClient(base_url=api.client.base_url) as anonymous:
            assert (await anonymous.get(PROJECTS, headers=bearer(good))).status_code == 200
            malformed = [
                await anonymous.get(PROJECTS, headers=bearer(f"aicp_{n}")) for n in range(50)
            ]
            assert {r.status_code for r in malformed} == {401}
            # The same bad token again and again: one read, then it is known to be bad.
            repeated = bearer("aicp_" + secrets.token_urlsafe(32))
            again = [await anonymous.get(PROJECTS, headers=repeated) for _ in range(30)]
            assert {r.status_code for r in again} == {401}
            assert again[-1].json()["detail"] == "The token is not valid."
            # Distinct well-formed bad tokens: each would be a read; past the burst, 429.
            distinct = [
                await anonymous.get(PROJECTS, headers=bearer("aicp_" + secrets.token_urlsafe(32)))
                for _ in range(40)
            ]
            statuses = [r.status_code for r in distinct]
            assert statuses[:4] == [401] * 4  # the burst (1/s for 5 s) less the repeated one
            assert statuses.count(429) >= 30  # a slow machine refills the bucket a few times
            refused = next(r for r in reversed(distinct) if r.status_code == 429)
            assert refused.json()["limit"] == "client-auth-failures"
            assert int(refused.headers["Retry-After"]) >= 1
            # A valid token this replica has seen is still served (from its cache).
            assert (await anonymous.get(PROJECTS, headers=bearer(good))).status_code == 200
        after = await failures()
        assert after["malformed"] - before["malformed"] == 50
        assert after["looked-up"] - before["looked-up"] <= 10  # not 1 + 30 + 40 = 71 reads


async def test_one_project_cannot_take_every_stream_of_the_replica(database_url: str) -> None:
    async with serving(database_url, streams_per_project=2, streams_per_token=10) as api:
        await api.setup_pool(wait=False)
        await api.submit("train-7b")
        await api.create_project("other")
        path = "/api/v1/projects/research/workloads/train-7b/watch"
        client = api.client
        async with open_stream(client, path) as one, open_stream(client, path) as two:
            await one.next()
            await two.next()
            third = await status_of(client, path)
            assert third.status_code == 429
            assert third.json()["limit"] == 2
            assert "project" in third.json()["detail"]
            # Another project still opens one (its stream answers 200 and stays open).
            other = "/api/v1/projects/other/workloads?watch=true"
            async with client.stream("GET", other) as response:
                assert response.status_code == 200
