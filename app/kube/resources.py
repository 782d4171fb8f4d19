"""The Kubernetes resources aicp reads and writes, and one way to call any of them.

Every call goes through the generated kubernetes_asyncio APIs (`CoreV1Api`, `BatchV1Api`,
`CustomObjectsApi`) with `_preload_content=False`: aicp works on the wire form (plain dicts
with camelCase keys, exactly what the server sent), for built-in kinds and Kueue's custom
resources alike. That skips the client's model (de)serialisation, which costs more than the
request itself for a Pod and would drop fields the models do not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from app.kube.errors import from_status, translated

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from app.domain.kube_objects import Manifest
    from app.kube.client import KubeClient

Verb = Literal["list", "read", "patch", "delete", "create"]


@dataclass(frozen=True, slots=True)
class Resource:
    """A served resource. `typed` names the generated API ("core"/"batch") and `singular` the
    generated method suffix (`list_namespaced_job`); custom resources have neither."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    typed: Literal["core", "batch"] | None = None
    singular: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def method(
        self, kube: KubeClient, verb: Verb, namespace: str | None = None, name: str | None = None
    ) -> Callable[..., Awaitable[Any]]:
        """The generated API method for `verb`, with its path arguments bound.

        `list` without a namespace lists across all namespaces. Further arguments (body, query
        parameters, `_content_type`, `_preload_content`) are passed by the caller.
        """
        if self.namespaced and namespace is None and verb != "list":
            raise ValueError(f"{self.kind} is namespaced: {verb} needs a namespace")
        if self.typed is not None:
            return self._typed(kube, verb, namespace, name)
        return self._custom(kube, verb, namespace, name)

    def _typed(
        self, kube: KubeClient, verb: Verb, namespace: str | None, name: str | None
    ) -> Callable[..., Awaitable[Any]]:
        api = kube.core if self.typed == "core" else kube.batch
        args: tuple[str, ...] = (name,) if name is not None else ()
        if not self.namespaced:
            fn = getattr(api, f"{verb}_{self.singular}")
        elif namespace is None:
            fn = getattr(api, f"list_{self.singular}_for_all_namespaces")
        else:
            fn = getattr(api, f"{verb}_namespaced_{self.singular}")
            args = (*args, namespace)
        return _bind(fn, args)

    def _custom(
        self, kube: KubeClient, verb: Verb, namespace: str | None, name: str | None
    ) -> Callable[..., Awaitable[Any]]:
        op = {"read": "get"}.get(verb, verb)
        tail: tuple[str, ...] = (name,) if name is not None else ()
        if not self.namespaced or (verb == "list" and namespace is None):
            fn = getattr(kube.custom, f"{op}_cluster_custom_object")
            return _bind(fn, (self.group, self.version, self.plural, *tail))
        fn = getattr(kube.custom, f"{op}_namespaced_custom_object")
        return _bind(fn, (self.group, self.version, namespace or "", self.plural, *tail))


def _bind(
    fn: Callable[..., Awaitable[Any]], args: tuple[str, ...]
) -> Callable[..., Awaitable[Any]]:
    def call(*more: Any, **kwargs: Any) -> Awaitable[Any]:
        return fn(*args, *more, **kwargs)

    return call


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False, "core", "namespace")
NODES = Resource("", "v1", "nodes", "Node", False, "core", "node")
PODS = Resource("", "v1", "pods", "Pod", True, "core", "pod")
JOBS = Resource("batch", "v1", "jobs", "Job", True, "batch", "job")
SERVICES = Resource("", "v1", "services", "Service", True, "core", "service")
# The objects of an inference service beyond its Service: called through the generic
# (custom-object) API, whose paths serve built-in groups as well.
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
POD_DISRUPTION_BUDGETS = Resource(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True
)
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True)
HORIZONTAL_POD_AUTOSCALERS = Resource(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True
)
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
WORKLOADS = Resource(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload", True)
CLUSTER_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False)
LOCAL_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue", True)
RESOURCE_FLAVORS = Resource(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False)
WORKLOAD_PRIORITY_CLASSES = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", False
)

KNOWN: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r
    for r in (
        NAMESPACES,
        NODES,
        PODS,
        JOBS,
        SERVICES,
        DEPLOYMENTS,
        POD_DISRUPTION_BUDGETS,
        NETWORK_POLICIES,
        HORIZONTAL_POD_AUTOSCALERS,
        WORKLOADS,
        CLUSTER_QUEUES,
        LOCAL_QUEUES,
        RESOURCE_FLAVORS,
        WORKLOAD_PRIORITY_CLASSES,
    )
}


def resource_of(manifest: Manifest) -> Resource:
    """The resource a manifest belongs to, from its `apiVersion` and `kind`; ValueError if aicp
    does not manage that kind."""
    key = (str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
    try:
        return KNOWN[key]
    except KeyError:
        raise ValueError(f"aicp does not manage {key[1] or '?'} in {key[0] or '?'}") from None


async def request(call: Awaitable[Any]) -> bytes:
    """Await a generated-API call made with `_preload_content=False` and return the body;
    a non-2xx status raises the matching `KubeError` (the body is the server's `Status`)."""
    with translated():
        response = await call
        try:
            body: bytes = await response.read()
        finally:
            response.release()
    if not 200 <= response.status < 300:
        raise from_status(response.status, body, retry_after=response.headers.get("Retry-After"))
    return body


async def request_json(call: Awaitable[Any]) -> Manifest:
    """`request()` and decode the JSON object it returned."""
    decoded = json.loads(await request(call))
    if not isinstance(decoded, dict):
        raise ValueError(
            f"expected a JSON object from the API server, got {type(decoded).__name__}"
        )
    return decoded
