"""The pieces of a pod's status the kubelet writes: addresses, conditions and container
statuses (shared by the run-to-completion kubelet and the one of long-running pods)."""

from __future__ import annotations

import hashlib
import zlib
from datetime import datetime
from typing import Any

from kubesim.controllers import conditions
from kubesim.controllers.podspec import qos_class

Obj = dict[str, Any]


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def image_id(image: str) -> str:
    digest = hashlib.sha256(image.encode()).hexdigest()
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return f"{repo}@sha256:{digest}"


def container_id(uid: str, name: str, instance: int = 0) -> str:
    """The runtime's id of a container; each restart (`instance` > 0) is a new container."""
    key = f"{uid}/{name}" if instance == 0 else f"{uid}/{name}/{instance}"
    return "containerd://" + hashlib.sha256(key.encode()).hexdigest()


def base_status(pod: Obj) -> Obj:
    """Addresses and QoS class: what every kubelet status write of a bound pod carries."""
    index = zlib.crc32(pod["metadata"]["uid"].encode()) % 250 + 2
    node = pod["spec"]["nodeName"]
    host = f"10.0.0.{10 + int(node.rsplit('-', 1)[-1])}" if node[-1].isdigit() else "10.0.0.2"
    return {
        "hostIP": host,
        "hostIPs": [{"ip": host}],
        "podIP": f"10.244.0.{index}",
        "podIPs": [{"ip": f"10.244.0.{index}"}],
        "qosClass": qos_class(pod["spec"]),
    }


def pod_conditions(
    pod: Obj, ready: bool, now: str, reason: str = "", message: str = ""
) -> list[Obj]:
    """The pod's conditions with `ContainersReady` and `Ready` set to `ready` (each keeps its
    `lastTransitionTime` unless its status changes)."""
    out = list((pod.get("status") or {}).get("conditions") or [])
    for type_ in ("PodReadyToStartContainers", "Initialized"):
        conditions.set_condition(out, type_, True, "", "", now)
    for type_ in ("ContainersReady", "Ready"):
        conditions.set_condition(out, type_, ready, reason, message, now)
    for condition in out:
        if not condition.get("reason"):
            condition.pop("reason", None)
        if not condition.get("message"):
            condition.pop("message", None)
    return out


def unready_message(pod: Obj) -> str:
    names = [c["name"] for c in pod["spec"].get("containers") or []]
    return f"containers with unready status: [{' '.join(names)}]"


def container_status(
    pod: Obj,
    container: Obj,
    state: Obj,
    ready: bool,
    *,
    restart_count: int = 0,
    last_state: Obj | None = None,
) -> Obj:
    """One entry of `containerStatuses`; the container id is that of instance `restart_count`."""
    image = str(container.get("image", ""))
    out: Obj = {
        "name": container["name"],
        "image": image,
        "imageID": "" if "waiting" in state else image_id(image),
        "ready": ready,
        "restartCount": restart_count,
        "started": "running" in state,
        "state": state,
    }
    if last_state:
        out["lastState"] = last_state
    if "waiting" not in state:
        out["containerID"] = container_id(pod["metadata"]["uid"], container["name"], restart_count)
    return out


def first_started_at(status: Obj) -> str | None:
    for entry in status.get("containerStatuses") or []:
        state = entry.get("state") or {}
        for phase in ("running", "terminated"):
            started = (state.get(phase) or {}).get("startedAt")
            if started:
                return str(started)
    return None


def waiting_reason(status: Obj) -> str | None:
    for entry in status.get("containerStatuses") or []:
        reason = ((entry.get("state") or {}).get("waiting") or {}).get("reason")
        if reason:
            return str(reason)
    return None
