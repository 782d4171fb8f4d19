"""Fault injection through `/_sim/faults`, observed with the real client."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import job, raw, watch_lines
from tests.kubesim.test_watch import summary, take
from tests.support.waiting import wait_until


async def set_faults(cluster, **faults) -> dict:
    status, body, _ = await raw("POST", f"{cluster.url}/_sim/faults", json_body=faults)
    assert status == 200, body
    return body


async def stats(cluster) -> dict:
    return (await raw("GET", f"{cluster.url}/_sim/stats"))[1]


async def test_watch_streams_drop_after_n_events_and_the_client_resumes(kube_cluster, kube_api):
    batch = client.BatchV1Api(kube_api)
    for name in ("a", "b", "c"):
        await batch.create_namespaced_job("default", job(name))
    await set_faults(kube_cluster, watch_drop_after_events=2)
    lines = await watch_lines(
        f"{kube_cluster.url}/apis/batch/v1/namespaces/default/jobs?watch=1&timeoutSeconds=30"
    )
    assert len(lines) == 2, "the stream ended early"
    rv = lines[-1]["object"]["metadata"]["resourceVersion"]
    async with watch.Watch() as w:  # no timeout: the client reconnects after each drop
        stream = w.stream(batch.list_namespaced_job, "default", resource_version=rv)
        await batch.create_namespaced_job("default", job("d"))
        await batch.create_namespaced_job("default", job("e"))
        await batch.create_namespaced_job("default", job("f"))
        events = await take(stream, 3)
    assert summary(events) == [("ADDED", "c"), ("ADDED", "d"), ("ADDED", "e")]
    assert (await stats(kube_cluster))["by_verb"]["watch"] >= 3


async def test_watch_streams_drop_after_t_seconds(kube_cluster):
    await set_faults(kube_cluster, watch_drop_after_seconds=0.2)
    lines = await watch_lines(
        f"{kube_cluster.url}/api/v1/namespaces?watch=1&resourceVersion=1&timeoutSeconds=30"
    )
    assert len(lines) >= 1  # the namespaces created after RV 1, then EOF well before 30 s


async def test_a_shrunk_history_makes_the_next_resume_fail_with_410(kube_cluster, kube_api):
    batch = client.BatchV1Api(kube_api)
    old = await batch.create_namespaced_job("default", job("a"))
    await batch.create_namespaced_job("default", job("b"))
    await set_faults(kube_cluster, shrink_watch_history=True)
    await raw("POST", f"{kube_cluster.url}/_sim/stats/reset")
    async with watch.Watch() as w:  # watch forever: the client retries a 410 once, then raises
        stream = w.stream(
            batch.list_namespaced_job, "default", resource_version=old.metadata.resource_version
        )
        with pytest.raises(ApiException) as err:
            await take(stream, 1)
    assert err.value.status == 410
    assert (await stats(kube_cluster))["by_verb"]["watch"] == 2, "one silent retry, then raise"


async def test_every_request_fails_with_500_at_rate_one(kube_cluster, kube_api):
    await set_faults(kube_cluster, error_rate=1.0, error_code=500)
    with pytest.raises(ApiException) as err:
        await client.BatchV1Api(kube_api).list_namespaced_job("default")
    assert err.value.status == 500 and '"kind":"Status"' in err.value.body


async def test_429_carries_retry_after_and_can_target_a_verb_and_path(kube_cluster, kube_api):
    await set_faults(
        kube_cluster,
        error_rate=1.0,
        error_code=429,
        retry_after_seconds=3,
        error_verbs=["list"],
        error_path_regex="/jobs$",
    )
    batch = client.BatchV1Api(kube_api)
    with pytest.raises(ApiException) as err:
        await batch.list_namespaced_job("default")
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "3"
    await batch.create_namespaced_job("default", job("a"))  # other verbs pass
    await client.CoreV1Api(kube_api).list_namespaced_pod("default")  # other paths pass


async def test_a_partial_error_rate_fails_about_that_fraction(kube_cluster, kube_api):
    await set_faults(kube_cluster, error_rate=0.5, seed=7)
    core, failures = client.CoreV1Api(kube_api), 0
    for _ in range(40):
        try:
            await core.list_namespace()
        except ApiException as err:
            assert err.status == 500
            failures += 1
    assert 8 <= failures <= 32
    await raw("DELETE", f"{kube_cluster.url}/_sim/faults")
    await core.list_namespace()


async def test_an_apiserver_restart_refuses_connections_then_serves_the_same_state(
    kube_cluster, kube_api
):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    port = kube_cluster.port
    await set_faults(kube_cluster, refuse_connections_seconds=0.5)

    await wait_until(
        lambda: _refuses(kube_cluster.url), timeout=3, message="connections to be refused"
    )
    await wait_until(
        lambda: _serves(kube_cluster.url), timeout=5, message="the apiserver to be back"
    )
    assert kube_cluster.port == port
    assert (await batch.read_namespaced_job("a", "default")).metadata.name == "a"


async def test_an_apiserver_restart_keeps_its_port_while_it_refuses(kube_cluster, kube_api):
    """No other process can take the port during the refusal (the machine is shared: an
    outgoing connection's ephemeral port or a server on port 0 could), so the apiserver is
    always reachable again on it."""
    import socket

    port = kube_cluster.port
    await set_faults(kube_cluster, refuse_connections_seconds=1.0)

    def taken() -> bool:
        other = socket.socket()
        try:
            other.bind((kube_cluster.host, port))
        except OSError:
            return True
        finally:
            other.close()
        return False

    await wait_until(
        lambda: _refuses(kube_cluster.url), timeout=3, message="connections to be refused"
    )
    assert taken()
    await wait_until(
        lambda: _serves(kube_cluster.url), timeout=5, message="the apiserver to be back"
    )
    assert kube_cluster.port == port


async def _refuses(url: str) -> bool:
    """Whether the apiserver at `url` refuses connections now."""
    try:
        async with aiohttp.ClientSession() as s, s.get(f"{url}/version"):
            return False
    except aiohttp.ClientConnectionError:
        return True


async def _serves(url: str) -> bool:
    return not await _refuses(url)


async def test_latency_is_added_to_requests(kube_cluster, kube_api):
    import time

    await set_faults(kube_cluster, latency_seconds=0.2)
    started = time.monotonic()
    await client.CoreV1Api(kube_api).list_namespace()
    assert time.monotonic() - started >= 0.2


async def test_unknown_faults_are_refused(kube_cluster):
    status, body, _ = await raw("POST", f"{kube_cluster.url}/_sim/faults", json_body={"oops": 1})
    assert status == 400 and body["kind"] == "Status"
