"""The informer against kubesim over HTTP: list, watch, resume, relist on 410, recover."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from app.backoff import Backoff
from app.kube.apply import apply, delete
from app.kube.client import KubeClient
from app.kube.metrics import WATCH_RESTARTS
from app.kube.resources import JOBS, request_json
from app.kube.watching import Informer
from tests.integration.kube.conftest import Recorder, SimControl, job_manifest
from tests.support.waiting import wait_until

MANAGED = "app.kubernetes.io/managed-by=aicp"


@contextlib.asynccontextmanager
async def synced(informer: Informer, sync_timeout: float = 5) -> AsyncIterator[Informer]:
    """`informer` started and synced (within `sync_timeout` seconds), stopped when the block
    ends."""
    informer.start()
    try:
        await asyncio.wait_for(informer.wait_synced(), sync_timeout)
        yield informer
    finally:
        await informer.stop()


def managed_jobs(kube: KubeClient, *, watch_timeout: float = 300.0) -> Informer:
    return Informer(
        kube,
        JOBS,
        label_selector=MANAGED,
        watch_timeout=watch_timeout,
        backoff=Backoff(0.05, 0.5),
    )


def restarts(kind: str, reason: str) -> float:
    return WATCH_RESTARTS.labels(kind, reason)._value.get()  # type: ignore[no-any-return]


async def test_the_informer_lists_existing_jobs_then_follows_creates_updates_and_deletes(
    kube: KubeClient, namespace: str
) -> None:
    await apply(kube, job_manifest("before", namespace))
    informer = managed_jobs(kube)
    events = Recorder(informer)
    async with synced(informer):
        assert events.seen() == [("ADDED", "before")]

        await apply(kube, job_manifest("after", namespace))
        await apply(kube, job_manifest("before", namespace, labels={"stage": "two"}))
        await delete(kube, JOBS, namespace, "after")

        await wait_until(lambda: len(events.seen()) == 4, timeout=5, message="three more events")
        assert events.seen()[1:] == [
            ("ADDED", "after"),
            ("MODIFIED", "before"),
            ("DELETED", "after"),
        ]
        before = informer.get(namespace, "before")
        assert before is not None
        assert before["metadata"]["labels"]["stage"] == "two"
        assert informer.get(namespace, "after") is None
        by_uid = informer.by_label("aicp.dev/uid", "uid-before")
        assert [o["metadata"]["name"] for o in by_uid] == ["before"]


async def test_the_informer_ignores_jobs_that_aicp_does_not_manage(
    kube: KubeClient, namespace: str
) -> None:
    informer = managed_jobs(kube)
    async with synced(informer):
        await apply(kube, job_manifest("theirs", namespace, managed=False))
        await apply(kube, job_manifest("ours", namespace))
        await wait_until(lambda: informer.get(namespace, "ours"), timeout=5)
        assert informer.get(namespace, "theirs") is None


async def test_synced_is_set_only_once_the_first_list_is_in_the_cache(
    kube: KubeClient, namespace: str
) -> None:
    for i in range(3):
        await apply(kube, job_manifest(f"job-{i}", namespace))
    informer = managed_jobs(kube)
    synced_while_adding: list[bool] = []
    informer.add_handler(lambda _t, _o: synced_while_adding.append(informer.synced.is_set()))
    assert not informer.synced.is_set()
    async with synced(informer):
        assert synced_while_adding == [False, False, False]
        assert len(informer.list()) == 3


async def test_dropped_streams_resume_from_the_last_version_without_relisting(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    # Every watch stream ends after its first event, so each job below arrives on a new one.
    await sim.drop_watches()
    ended_before = restarts("Job", "ended")
    informer = managed_jobs(kube)
    async with synced(informer):
        for i in range(5):
            await apply(kube, job_manifest(f"job-{i}", namespace))
        await wait_until(lambda: len(informer.list()) == 5, timeout=5, message="5 cached jobs")
        assert await sim.list_count("jobs") == 1
        assert restarts("Job", "ended") - ended_before >= 5


async def test_a_410_relists_and_reports_a_job_deleted_during_the_gap_as_deleted(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    await apply(kube, job_manifest("kept", namespace))
    await apply(kube, job_manifest("deleted-in-gap", namespace))
    informer = managed_jobs(kube)
    events = Recorder(informer)
    informer.start()
    await asyncio.wait_for(informer.wait_synced(), 5)
    # The informer is away (as if its connection were down) while the job is deleted and the
    # server's history moves past the informer's version: its resume must get 410.
    await informer.stop()
    await delete(kube, JOBS, namespace, "deleted-in-gap")
    await sim.expire_history()
    lists_before = await sim.list_count("jobs")
    informer.start()
    try:
        await wait_until(
            lambda: ("DELETED", "deleted-in-gap") in events.seen(), timeout=5, message="DELETED"
        )
        assert informer.get(namespace, "deleted-in-gap") is None
        assert informer.get(namespace, "kept") is not None
        assert await sim.list_count("jobs") == lists_before + 1
        assert restarts("Job", "gone") >= 1
    finally:
        await informer.stop()


async def test_bookmarks_advance_the_resume_version_past_writes_the_informer_does_not_see(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    informer = managed_jobs(kube)
    async with synced(informer):
        start = int(informer.resource_version or 0)
        await apply(kube, job_manifest("unmanaged", namespace, managed=False))
        latest = await sim.resource_version()
        assert latest > start
        # Nothing the informer watches changes; only a BOOKMARK (every 0.2 s here) can move it.
        await wait_until(
            lambda: int(informer.resource_version or 0) >= latest,
            timeout=5,
            message=f"resource version >= {latest}",
        )
        assert informer.list() == []


async def test_the_informer_backs_off_and_recovers_across_an_apiserver_restart(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    informer = managed_jobs(kube)
    async with synced(informer):
        lists_before = await sim.list_count("jobs")
        failures_before = restarts("Job", "unavailable")
        await sim.restart_apiserver(seconds=1.0)
        await wait_until(
            lambda: restarts("Job", "unavailable") > failures_before,
            timeout=5,
            message="a failed reconnect",
        )
        await wait_until(sim.is_up, timeout=5, message="the apiserver back")
        await apply(kube, job_manifest("after-restart", namespace))
        await wait_until(lambda: informer.get(namespace, "after-restart"), timeout=5)
        assert await sim.list_count("jobs") == lists_before
        # Backoff from 50 ms doubling to a 0.5 s cap: a handful of attempts across the 1 s
        # outage, where retrying at once would have made hundreds.
        assert restarts("Job", "unavailable") - failures_before <= 10


async def test_a_recovered_informer_reports_itself_up_while_its_new_watch_stays_open(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    """The process supervisor exits a replica whose informer stays down for its recovery
    bound; it reads `failing`, which must clear when the server answers again, not only when
    the (minutes-long) watch that follows the outage ends."""
    informer = managed_jobs(kube, watch_timeout=300.0)
    async with synced(informer):
        failures_before = restarts("Job", "unavailable")
        await sim.restart_apiserver(seconds=1.0)
        await wait_until(
            lambda: (
                informer.failing is not None and restarts("Job", "unavailable") > failures_before
            ),
            timeout=5,
            message="the informer down",
        )
        await wait_until(sim.is_up, timeout=5, message="the apiserver back")
        await apply(kube, job_manifest("seen-after-outage", namespace))
        await wait_until(lambda: informer.get(namespace, "seen-after-outage"), timeout=5)
        await wait_until(lambda: informer.failing is None, timeout=2, message="the informer up")


async def test_the_informer_converges_while_half_of_its_requests_fail(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    for i in range(3):
        await apply(kube, job_manifest(f"early-{i}", namespace))
    await sim.faults(
        error_rate=0.5,
        error_code=500,
        error_verbs=["list", "watch"],
        seed=7,
        watch_drop_after_events=2,
    )
    informer = managed_jobs(kube)
    async with synced(informer, sync_timeout=10):
        for i in range(5):
            await apply(kube, job_manifest(f"late-{i}", namespace))
        await delete(kube, JOBS, namespace, "early-0")
        await wait_until(
            lambda: (
                sorted(o["metadata"]["name"] for o in informer.list())
                == ["early-1", "early-2", "late-0", "late-1", "late-2", "late-3", "late-4"]
            ),
            timeout=10,
            message="the cache to match the server",
        )
        assert restarts("Job", "unavailable") >= 1


async def test_a_list_read_in_small_pages_fills_the_whole_cache(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    for i in range(5):
        await apply(kube, job_manifest(f"job-{i}", namespace))
    informer = Informer(kube, JOBS, label_selector=MANAGED, page_size=2)
    async with synced(informer):
        assert len(informer.list()) == 5
        assert await sim.list_count("jobs") == 3


async def test_a_failing_handler_does_not_stop_the_others_or_the_informer(
    kube: KubeClient, namespace: str
) -> None:
    informer = managed_jobs(kube)

    def broken(_kind: str, _obj: object) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(broken)
    events = Recorder(informer)
    async with synced(informer):
        await apply(kube, job_manifest("one", namespace))
        await apply(kube, job_manifest("two", namespace))
        await wait_until(lambda: len(events.seen()) == 2, timeout=5, message="both events")
        assert informer.get(namespace, "two") is not None


async def test_when_the_server_ends_a_watch_at_its_timeout_the_informer_watches_on(
    kube: KubeClient, namespace: str, sim: SimControl
) -> None:
    ended_before = restarts("Job", "ended")
    informer = managed_jobs(kube, watch_timeout=0.5)  # timeoutSeconds=1
    async with synced(informer):
        await wait_until(
            lambda: restarts("Job", "ended") > ended_before, timeout=5, message="a timed-out watch"
        )
        await apply(kube, job_manifest("later", namespace))
        await wait_until(lambda: informer.get(namespace, "later"), timeout=5)
        assert await sim.list_count("jobs") == 1


async def test_a_job_whose_managed_by_label_is_removed_by_hand_leaves_the_cache_as_deleted(
    kube: KubeClient, namespace: str
) -> None:
    await apply(kube, job_manifest("relabelled", namespace))
    informer = managed_jobs(kube)
    events = Recorder(informer)
    async with synced(informer):
        await request_json(
            JOBS.method(kube, "patch", namespace, "relabelled")(
                {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
        )
        await wait_until(
            lambda: ("DELETED", "relabelled") in events.seen(), timeout=5, message="DELETED"
        )
        assert informer.get(namespace, "relabelled") is None
        assert informer.by_label("aicp.dev/uid", "uid-relabelled") == []
