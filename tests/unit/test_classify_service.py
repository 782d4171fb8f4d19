"""classify_service: an inference service's state, reason and observed facts from its
Deployment, its pods and the Kueue Workloads of the pods Kueue holds back."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from app.domain.classify.evidence import PoolSnapshot
from app.domain.classify.service import RECOVERY_WINDOW, ServiceVerdict, classify_service
from app.domain.quantity import parse_quantity
from app.domain.render import ServiceIdentity, render_deployment
from app.domain.service_resources import ServiceObserved
from app.domain.service_specs import Autoscaling, ServiceSpec
from app.domain.states import ServiceState
from tests.support.kube_objects import ADMITTED, FINISHED, GPU, STARTED, Obj, cond

PENDING, PROGRESSING = ServiceState.PENDING, ServiceState.PROGRESSING
READY, DEGRADED = ServiceState.READY, ServiceState.DEGRADED
NOW = datetime(2026, 8, 1, 11, 0, tzinfo=UTC)
UID = "7c1e2d3f-4a5b-4c6d-8e9f-001122334455"
TEMPLATE_HASH = "6d9f7c8b5"
SUFFIXES = ("a2k4q", "b9m4q", "c2v8w", "d5t6z")
QUOTA_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
    "flavor h100-80g, 1 more needed"
)


def _rfc3339(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ServiceBuilder:
    """A service's objects as the apiserver returns them once the Deployment and ReplicaSet
    controllers, Kueue, the scheduler and the kubelet did their part:

        make_service(replicas=2).deployed().ready("gpu-node-1").gated()
    """

    spec: ServiceSpec
    generation: int = 1
    deployment: Obj | None = None
    pods: list[Obj] = field(default_factory=list)
    workloads: dict[str, Obj] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    pool: PoolSnapshot | None = None

    @property
    def identity(self) -> ServiceIdentity:
        return ServiceIdentity(
            project="research",
            service=self.spec.name,
            uid=UID,
            generation=self.generation,
            accelerator_resource=GPU,
        )

    # -- the Deployment ---------------------------------------------------------------------

    def deployed(self, *, hpa_replicas: int | None = None, generation: int = 1) -> ServiceBuilder:
        """The Deployment exists; `hpa_replicas` is the count an autoscaler set on it."""
        deployment = render_deployment(self.identity, self.spec)
        deployment["metadata"].update(uid="deploy-uid", generation=generation)
        deployment["spec"].setdefault("replicas", 1)
        if hpa_replicas is not None:
            deployment["spec"]["replicas"] = hpa_replicas
        deployment["status"] = {"conditions": []}
        self.deployment = deployment
        return self

    def deployment_status(self, **status: Any) -> ServiceBuilder:
        """Override the Deployment controller's numbers (otherwise counted from the pods)."""
        self.status.update(status)
        return self

    def deployment_condition(
        self, kind: str, status: str, reason: str, message: str
    ) -> ServiceBuilder:
        assert self.deployment is not None
        self.deployment["status"]["conditions"].append(cond(kind, status, reason, message))
        return self

    # -- pods -------------------------------------------------------------------------------

    def _pod(self, node: str | None, phase: str, *, ready: bool = False) -> Obj:
        assert self.deployment is not None
        template = copy.deepcopy(self.deployment["spec"]["template"])
        name = f"{self.spec.name}-{TEMPLATE_HASH}-{SUFFIXES[len(self.pods)]}"
        status: Obj = {"phase": phase, "conditions": []}
        if node is not None:
            template["spec"]["nodeName"] = node
            status["conditions"].append(cond("PodScheduled", "True", "", "", ADMITTED))
            status["containerStatuses"] = [
                {
                    "name": "main",
                    "image": self.spec.image,
                    "ready": ready,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": STARTED}},
                }
            ]
        status["conditions"].append(cond("Ready", "True" if ready else "False", "", ""))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "aicp-research",
                "uid": f"pod-{name}",
                "labels": {**template["metadata"]["labels"], "pod-template-hash": TEMPLATE_HASH},
            },
            "spec": template["spec"],
            "status": status,
        }
        self.pods.append(pod)
        return pod

    def _main(self, pod: Obj) -> Obj:
        main: Obj = pod["status"]["containerStatuses"][0]
        return main

    def ready(self, node: str = "gpu-node-1") -> ServiceBuilder:
        self._pod(node, "Running", ready=True)
        return self

    def starting(self, node: str = "gpu-node-1") -> ServiceBuilder:
        self._pod(node, "Running")
        return self

    def gated(
        self, message: str | None = QUOTA_MESSAGE, *, reason: str = "Pending"
    ) -> ServiceBuilder:
        """A replica Kueue holds back; `message` is its Workload's `QuotaReserved=False`
        message (None: Kueue has not made the Workload yet)."""
        pod = self._pod(None, "Pending")
        pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
        pod["status"]["conditions"] = [
            cond("PodScheduled", "False", "SchedulingGated", "Scheduling is blocked")
        ]
        if message is not None:
            self.workloads[pod["metadata"]["name"]] = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": f"pod-{pod['metadata']['name']}",
                    "namespace": "aicp-research",
                },
                "status": {"conditions": [cond("QuotaReserved", "False", reason, message)]},
            }
        return self

    def unschedulable(self, message: str) -> ServiceBuilder:
        pod = self._pod(None, "Pending")
        pod["status"]["conditions"] = [cond("PodScheduled", "False", "Unschedulable", message)]
        return self

    def oom_killed(
        self, node: str = "gpu-node-2", *, ready: bool = False, at: str = FINISHED
    ) -> ServiceBuilder:
        """A replica whose container was OOM-killed at `at` and restarted (ready again or not)."""
        main = self._main(self._pod(node, "Running", ready=ready))
        main.update(restartCount=1)
        main["lastState"] = {
            "terminated": {
                "reason": "OOMKilled",
                "exitCode": 137,
                "startedAt": STARTED,
                "finishedAt": at,
            }
        }
        if not ready:
            main["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}
        return self

    def crash_looping(self, exit_code: int = 1, restarts: int = 4) -> ServiceBuilder:
        main = self._main(self._pod("gpu-node-2", "Running"))
        main.update(restartCount=restarts)
        main["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}
        main["lastState"] = {
            "terminated": {"reason": "Error", "exitCode": exit_code, "finishedAt": FINISHED}
        }
        return self

    def waiting(self, reason: str, message: str) -> ServiceBuilder:
        main = self._main(self._pod("gpu-node-2", "Pending"))
        main["state"] = {"waiting": {"reason": reason, "message": message}}
        return self

    def evicted(self, node: str = "gpu-node-2") -> ServiceBuilder:
        """A replica the kubelet evicted under node pressure: Failed, kept until collected."""
        pod = self._pod(node, "Failed")
        pod["status"].update(reason="Evicted", message="The node was low on resource: memory.")
        self._main(pod)["state"] = {
            "terminated": {"reason": "ContainerStatusUnknown", "exitCode": 137}
        }
        return self

    def being_deleted(self) -> ServiceBuilder:
        """The last pod added is on its way out (the ReplicaSet deleted it)."""
        self.pods[-1]["metadata"]["deletionTimestamp"] = _rfc3339(NOW)
        return self

    def with_pool(self, *, quota: int, in_use: int, admitted: int) -> ServiceBuilder:
        self.pool = PoolSnapshot(
            name=self.spec.compute_pool,
            quota={"cpu": parse_quantity("256"), GPU: parse_quantity(str(quota))},
            in_use={"cpu": parse_quantity("16"), GPU: parse_quantity(str(in_use))},
            workloads_admitted=admitted,
        )
        return self

    # -- classification ---------------------------------------------------------------------

    def classify(self, now: datetime = NOW) -> ServiceVerdict:
        deployment = copy.deepcopy(self.deployment)
        if deployment is not None:
            live = [p for p in self.pods if "deletionTimestamp" not in p["metadata"]]
            deployment["status"].update(
                observedGeneration=deployment["metadata"]["generation"],
                replicas=len(live),
                updatedReplicas=len(live),
                readyReplicas=sum(
                    1 for p in live if p["status"]["conditions"][-1]["status"] == "True"
                ),
            )
            deployment["status"].update(self.status)
        return classify_service(
            self.spec,
            self.generation,
            deployment=deployment,
            pods=copy.deepcopy(self.pods),
            kueue_workloads=copy.deepcopy(self.workloads),
            pool=self.spec.compute_pool,
            accelerator_resource=GPU,
            now=now,
            pool_snapshot=self.pool,
        )


def make_service(
    *,
    replicas: int = 2,
    memory: str = "64Gi",
    autoscaling: Autoscaling | None = None,
    generation: int = 1,
) -> ServiceBuilder:
    spec = ServiceSpec(
        name="llama-chat",
        compute_pool="h100-pool",
        image="ghcr.io/acme/serve:2.1",
        accelerators=1,
        cpu="8",
        memory=memory,
        replicas=replicas,
        autoscaling=autoscaling,
    )
    return ServiceBuilder(spec=spec, generation=generation)


Case = Callable[[], ServiceBuilder]
POD_A, POD_B = (
    f"llama-chat-{TEMPLATE_HASH}-{SUFFIXES[0]}",
    f"llama-chat-{TEMPLATE_HASH}-{SUFFIXES[1]}",
)

CASES = [
    pytest.param(
        lambda: make_service(),
        PENDING,
        "Waiting for the Deployment to be created.",
        id="no-deployment-is-pending",
    ),
    pytest.param(
        lambda: make_service(replicas=0).deployed(),
        READY,
        "Scaled to zero: no replicas asked for.",
        id="zero-replicas-and-no-pod-is-ready",
    ),
    pytest.param(
        lambda: make_service(replicas=0).deployed().ready(),
        PROGRESSING,
        "Scaling to zero: 1 replica left to stop.",
        id="zero-replicas-with-a-pod-left-is-progressing",
    ),
    pytest.param(
        lambda: make_service().deployed().ready("gpu-node-2").ready("gpu-node-1"),
        READY,
        "2 of 2 replicas ready on gpu-node-1, gpu-node-2.",
        id="every-replica-ready-names-the-nodes",
    ),
    pytest.param(
        lambda: make_service().deployed().ready().gated(),
        PROGRESSING,
        f"1 of 2 replicas ready; 1 waiting for quota in pool h100-pool: asked for 1 "
        f"nvidia.com/gpu; Kueue says: {QUOTA_MESSAGE}.",
        id="a-gated-replica-waits-for-quota-in-kueues-words",
    ),
    pytest.param(
        lambda: make_service().deployed().ready().gated().with_pool(quota=8, in_use=8, admitted=8),
        PROGRESSING,
        "1 of 2 replicas ready; 1 waiting for quota in pool h100-pool: asked for 1 "
        "nvidia.com/gpu, the pool has 8 with 8 in use by 8 workloads.",
        id="waiting-for-quota-names-the-pools-numbers-when-known",
    ),
    pytest.param(
        lambda: make_service(replicas=3).deployed().gated(None).gated(None).gated(None),
        PROGRESSING,
        "0 of 3 replicas ready; 3 waiting for Kueue to admit them in pool h100-pool.",
        id="gated-replicas-without-a-workload-yet-wait-for-kueue",
    ),
    pytest.param(
        lambda: (
            make_service(replicas=1)
            .deployed()
            .gated("LocalQueue h100-pool doesn't exist", reason="Inadmissible")
        ),
        PROGRESSING,
        "0 of 1 replicas ready; 1 waiting in pool h100-pool, but Kueue cannot admit it yet: "
        "LocalQueue h100-pool doesn't exist.",
        id="an-inadmissible-replica-quotes-kueue",
    ),
    pytest.param(
        lambda: make_service().deployed().ready().starting(),
        PROGRESSING,
        "1 of 2 replicas ready; 1 starting.",
        id="a-replica-not-ready-yet-is-starting",
    ),
    pytest.param(
        lambda: (
            make_service(replicas=3)
            .deployed()
            .starting()
            .unschedulable(
                "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
                "available: 2 No preemption victims found for incoming pod."
            )
            .gated()
        ),
        PROGRESSING,
        "0 of 3 replicas ready; 1 starting; 1 not scheduled yet (the scheduler says: 0/2 nodes "
        "are available: 2 Insufficient nvidia.com/gpu); 1 waiting for quota in pool h100-pool: "
        f"asked for 1 nvidia.com/gpu; Kueue says: {QUOTA_MESSAGE}.",
        id="every-cause-that-holds-replicas-back-is-counted",
    ),
    pytest.param(
        lambda: make_service().deployed().ready().deployment_status(updatedReplicas=2, replicas=2),
        PROGRESSING,
        "1 of 2 replicas ready; 1 not created yet.",
        id="a-replica-the-pod-cache-lacks-is-not-created-yet",
    ),
    pytest.param(
        lambda: make_service(memory="8Gi").deployed().ready().oom_killed(),
        DEGRADED,
        f"1 of 2 replicas ready; replica {POD_B} was OOMKilled on gpu-node-2: its memory "
        "limit is 8Gi; raise `memory`.",
        id="an-oom-killed-replica-names-node-and-memory-limit",
    ),
    pytest.param(
        lambda: (
            make_service(memory="8Gi")
            .deployed()
            .ready()
            .oom_killed(ready=True, at=_rfc3339(NOW - timedelta(minutes=10)))
        ),
        READY,
        "2 of 2 replicas ready on gpu-node-1, gpu-node-2.",
        id="a-replica-ready-long-after-its-oom-kill-has-recovered",
    ),
    pytest.param(
        lambda: (
            make_service(memory="8Gi")
            .deployed()
            .ready()
            .oom_killed(ready=True, at=_rfc3339(NOW - timedelta(seconds=10)))
        ),
        DEGRADED,
        f"2 of 2 replicas ready; replica {POD_B} was OOMKilled on gpu-node-2: its memory "
        "limit is 8Gi; raise `memory`.",
        id="a-replica-ready-right-after-its-oom-kill-still-fails",
    ),
    pytest.param(
        lambda: make_service().deployed().ready().crash_looping(exit_code=3, restarts=4),
        DEGRADED,
        f"1 of 2 replicas ready; replica {POD_B} is restarting after exiting with code 3 "
        "(restarted 4 times).",
        id="a-crash-looping-replica-names-exit-code-and-restarts",
    ),
    pytest.param(
        lambda: (
            make_service()
            .deployed()
            .ready()
            .waiting(
                "ImagePullBackOff",
                'Back-off pulling image "ghcr.io/acme/serve:2.1": not found',
            )
        ),
        DEGRADED,
        f"1 of 2 replicas ready; replica {POD_B} cannot pull image ghcr.io/acme/serve:2.1: "
        'Back-off pulling image "ghcr.io/acme/serve:2.1": not found.',
        id="an-image-that-cannot-be-pulled-is-named",
    ),
    pytest.param(
        lambda: (
            make_service()
            .deployed()
            .ready()
            .waiting("CreateContainerConfigError", 'secret "hf-token" not found')
        ),
        DEGRADED,
        f"1 of 2 replicas ready; replica {POD_B} cannot create its container "
        '(CreateContainerConfigError): secret "hf-token" not found.',
        id="a-container-that-cannot-be-created-quotes-the-kubelet",
    ),
    pytest.param(
        lambda: make_service(replicas=3).deployed().crash_looping().ready().oom_killed(),
        DEGRADED,
        f"1 of 3 replicas ready; replica llama-chat-{TEMPLATE_HASH}-{SUFFIXES[2]} was OOMKilled "
        "on gpu-node-2: its memory limit is 64Gi; raise `memory`. 1 more replica is failing.",
        id="an-oom-kill-is-named-before-a-crash-loop-and-the-others-counted",
    ),
    pytest.param(
        lambda: (
            make_service(generation=2)
            .deployed(generation=2)
            .ready()
            .gated()
            .deployment_status(updatedReplicas=1, replicas=2)
            .deployment_condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                'ReplicaSet "llama-chat-6d9f7c8b5" has timed out progressing.',
            )
        ),
        DEGRADED,
        "1 of 2 replicas ready; the rollout of generation 2 has not progressed for 600 s; 1 "
        f"waiting for quota in pool h100-pool: asked for 1 nvidia.com/gpu; Kueue says: "
        f"{QUOTA_MESSAGE}.",
        id="a-rollout-past-its-deadline-is-degraded-and-says-why",
    ),
    pytest.param(
        lambda: (
            make_service()
            .deployed()
            .deployment_condition(
                "ReplicaFailure",
                "True",
                "FailedCreate",
                'pods "llama-chat-6d9f7c8b5-x2k4q" is forbidden: exceeded quota: compute.',
            )
        ),
        DEGRADED,
        '0 of 2 replicas ready; replicas cannot be created: pods "llama-chat-6d9f7c8b5-x2k4q" '
        "is forbidden: exceeded quota: compute.",
        id="pods-the-deployment-cannot-create-are-degraded",
    ),
    pytest.param(
        lambda: (
            make_service(generation=2)
            .deployed(generation=2)
            .ready()
            .ready("gpu-node-2")
            .gated()
            .deployment_status(updatedReplicas=1, replicas=3)
        ),
        PROGRESSING,
        "Rolling out generation 2: 1 of 2 replicas updated; 1 waiting for quota in pool "
        f"h100-pool: asked for 1 nvidia.com/gpu; Kueue says: {QUOTA_MESSAGE}.",
        id="old-replicas-left-is-a-rollout-under-way",
    ),
    pytest.param(
        lambda: (
            make_service(generation=2)
            .deployed(generation=5)
            .ready()
            .ready("gpu-node-2")
            .deployment_status(observedGeneration=4)
        ),
        PROGRESSING,
        "Rolling out generation 2: 2 of 2 replicas updated.",
        id="a-deployment-change-not-observed-yet-is-a-rollout",
    ),
    pytest.param(
        lambda: make_service().deployed(),
        PROGRESSING,
        "Rolling out generation 1: 0 of 2 replicas updated.",
        id="a-new-deployment-without-pods-is-rolling-out",
    ),
    pytest.param(
        lambda: make_service().deployed().ready().ready("gpu-node-2").starting().being_deleted(),
        READY,
        "2 of 2 replicas ready on gpu-node-1, gpu-node-2.",
        id="a-replica-being-deleted-is-left-out",
    ),
    pytest.param(
        lambda: (
            make_service()
            .deployed()
            .ready()
            .evicted()
            .ready("gpu-node-2")
            .deployment_status(replicas=2, updatedReplicas=2)
        ),
        READY,
        "2 of 2 replicas ready on gpu-node-1, gpu-node-2.",
        id="an-evicted-replica-the-replicaset-replaced-is-no-failure",
    ),
    pytest.param(
        lambda: (
            make_service(autoscaling=Autoscaling(min_replicas=1, max_replicas=4))
            .deployed(hpa_replicas=3)
            .ready()
            .ready()
            .ready("gpu-node-2")
        ),
        READY,
        "3 of 3 replicas ready on gpu-node-1, gpu-node-2.",
        id="the-autoscalers-count-is-what-is-desired",
    ),
    pytest.param(
        lambda: make_service(replicas=1).deployed().ready().ready("gpu-node-2"),
        PROGRESSING,
        "Scaling down to 1 replica: 2 ready.",
        id="more-ready-than-desired-is-scaling-down",
    ),
]


@pytest.mark.parametrize(("case", "state", "reason"), CASES)
def test_classify_service(case: Case, state: ServiceState, reason: str) -> None:
    verdict = case().classify()

    assert (verdict.state, verdict.reason) == (state, reason)


@pytest.mark.parametrize(("case", "state", "reason"), CASES)
def test_every_reason_is_whole_sentences_and_the_facts_decode_as_the_api_reads_them(
    case: Case, state: ServiceState, reason: str
) -> None:
    verdict = case().classify()

    assert verdict.reason.endswith(".") and ".." not in verdict.reason
    assert verdict.reason[0].isupper() or verdict.reason[0].isdigit()
    decoded = msgspec.convert(verdict.observed, ServiceObserved, strict=False)
    assert msgspec.to_builtins(decoded)["pods"] == verdict.observed["pods"]
    assert "endpoint" not in verdict.observed


def test_the_observed_facts_count_replicas_and_list_pods_and_nodes() -> None:
    builder = make_service(replicas=3).deployed().oom_killed(ready=True).ready().gated()
    builder.status.update(updatedReplicas=3)

    observed = builder.classify().observed

    assert observed == {
        "deployment": {"name": "llama-chat", "uid": "deploy-uid"},
        "replicas": {"desired": 3, "ready": 2, "updated": 3, "waiting_for_quota": 1},
        "nodes": ["gpu-node-1", "gpu-node-2"],
        "pods": [
            {
                "name": POD_A,
                "node": "gpu-node-2",
                "phase": "Running",
                "ready": True,
                "restarts": 1,
                "waiting_for_quota": False,
                "last_termination": {
                    "reason": "OOMKilled",
                    "exit_code": 137,
                    "finished_at": FINISHED,
                },
            },
            {
                "name": POD_B,
                "node": "gpu-node-1",
                "phase": "Running",
                "ready": True,
                "restarts": 0,
                "waiting_for_quota": False,
                "last_termination": None,
            },
            {
                "name": f"llama-chat-{TEMPLATE_HASH}-{SUFFIXES[2]}",
                "node": None,
                "phase": "Pending",
                "ready": False,
                "restarts": 0,
                "waiting_for_quota": True,
                "last_termination": None,
            },
        ],
    }


def test_before_the_deployment_the_facts_hold_the_specs_count_and_no_deployment() -> None:
    autoscaled = make_service(autoscaling=Autoscaling(min_replicas=2, max_replicas=4))

    observed = autoscaled.classify().observed

    assert "deployment" not in observed
    assert observed["replicas"] == {"desired": 2, "ready": 0, "updated": 0, "waiting_for_quota": 0}
    assert observed["pods"] == [] and observed["nodes"] == []


def test_a_recovering_replica_asks_to_be_looked_at_again_when_its_window_ends() -> None:
    killed = NOW - timedelta(seconds=10)
    builder = make_service(replicas=1).deployed().oom_killed(ready=True, at=_rfc3339(killed))

    degraded = builder.classify()
    later = builder.classify(now=killed + RECOVERY_WINDOW)

    assert degraded.state == DEGRADED
    assert degraded.recheck_at == killed + RECOVERY_WINDOW
    assert (later.state, later.recheck_at) == (READY, None)


def test_only_time_bound_verdicts_ask_to_be_looked_at_again() -> None:
    for case in CASES:
        verdict = case.values[0]().classify()
        if "OOMKilled" not in verdict.reason:
            assert verdict.recheck_at is None, case.id


def test_a_gated_replica_whose_quota_is_reserved_is_starting_not_waiting() -> None:
    # Kueue reserves the quota, then lifts the gate in a later write: in between the replica
    # has its quota and is starting.
    builder = make_service(replicas=2).deployed().ready().gated()
    (name,) = builder.workloads
    builder.workloads[name]["status"]["conditions"] = [
        cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq")
    ]

    verdict = builder.classify()

    assert (verdict.state, verdict.reason) == (PROGRESSING, "1 of 2 replicas ready; 1 starting.")
    assert verdict.observed["replicas"]["waiting_for_quota"] == 0
