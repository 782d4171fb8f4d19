"""core/v1 Services as the apiserver's Service registry treats them: defaults on create, the
validation rules beyond the schema, and what an update may not change.

- Defaults (`SetDefaults_Service` and the REST strategy): `type: ClusterIP`,
  `sessionAffinity: None`, `internalTrafficPolicy: Cluster`, `ipFamilies: [IPv4]`,
  `ipFamilyPolicy: SingleStack`, each port's `protocol: TCP` and `targetPort = port`, an
  allocated `clusterIP`/`clusterIPs` from 10.96.0.0/16 unless `clusterIP: None` (headless), and
  `status: {loadBalancer: {}}`.
- Validation (`ValidateService`): `spec.ports` required unless headless; each port 1..65535;
  port names required when there are several, and unique; `(port, protocol)` unique; `type`
  one of the four; `clusterIP` `None`, empty or an IPv4 address; the selector as labels.
- Updates: a PUT or patch that drops `clusterIP`/`clusterIPs` keeps the allocated ones (the
  strategy's `patchAllocatedValues`); changing them is `field is immutable`.

Not simulated: no endpoints or EndpointSlices, no kube-proxy, no DNS (a headless Service's
name resolves nowhere in kubesim), node ports and load balancers are not allocated.
"""

from __future__ import annotations

import ipaddress
import zlib
from typing import Any

from kubesim.rules import Cause, label_value_problem, qualified_name_problem

Obj = dict[str, Any]
TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("TCP", "UDP", "SCTP")


def cluster_ip_for(namespace: str, name: str) -> str:
    """A stable address in 10.96.0.0/16 (the service CIDR kubeadm uses), never .0.0/.0.1."""
    value = zlib.crc32(f"{namespace}/{name}".encode()) % (65536 - 2) + 2
    return f"10.96.{value // 256}.{value % 256}"


def default_service(obj: Obj) -> None:
    """Create-time defaults (mutates `obj`)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])
    if spec.get("type") != "ExternalName":
        ip = spec.get("clusterIP") or ""
        if not ip:
            meta = obj.get("metadata") or {}
            ip = cluster_ip_for(str(meta.get("namespace", "")), str(meta.get("name", "")))
            spec["clusterIP"] = ip
        spec.setdefault("clusterIPs", [ip])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    obj["status"] = {"loadBalancer": {}}


def keep_allocated(old: Obj, new: Obj) -> list[dict[str, str]]:
    """On update: fill in the old `clusterIP`/`clusterIPs` where the new object omits them;
    answer the immutability causes where it changes them."""
    old_spec, new_spec = old.get("spec") or {}, new.setdefault("spec", {})
    causes = []
    for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        if field not in old_spec:
            continue
        if not new_spec.get(field):
            new_spec[field] = old_spec[field]
        elif field in ("clusterIP", "clusterIPs") and new_spec[field] != old_spec[field]:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": "Invalid value: field is immutable",
                    "field": f"spec.{field}",
                }
            )
    return causes


def _port_causes(ports: list[Any]) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    for index, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        at = f"spec.ports[{index}]"
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            causes.append((f"{at}.name", "Required value"))
        elif name in names:
            causes.append((f"{at}.name", f'Duplicate value: "{name}"'))
        names.add(name)
        number = port.get("port")
        if isinstance(number, int) and not 1 <= number <= 65535:
            causes.append(
                (f"{at}.port", f"Invalid value: {number}: must be between 1 and 65535, inclusive")
            )
        protocol = port.get("protocol", "TCP")
        if protocol not in PROTOCOLS:
            causes.append(
                (
                    f"{at}.protocol",
                    f'Unsupported value: "{protocol}": supported values: "SCTP", "TCP", "UDP"',
                )
            )
        if (number, protocol) in seen:
            causes.append((at, f"Duplicate value: {{port: {number}, protocol: {protocol}}}"))
        seen.add((number, protocol))
    return causes


def service_causes(spec: Obj) -> list[Cause]:
    """Every rule `ValidateService` checks here, as `(field, message)`."""
    causes: list[Cause] = []
    kind = spec.get("type", "ClusterIP")
    if kind not in TYPES:
        supported = ", ".join(f'"{t}"' for t in sorted(TYPES))
        causes.append(("spec.type", f'Unsupported value: "{kind}": supported values: {supported}'))
    ip = spec.get("clusterIP") or ""
    headless = ip == "None"
    if ip and not headless:
        try:
            ipaddress.IPv4Address(ip)
        except ValueError:
            causes.append(
                (
                    "spec.clusterIPs[0]",
                    f'Invalid value: "{ip}": must be a valid IP address, (e.g. 10.9.8.7 or '
                    '2001:db8::ffff) or "None"',
                )
            )
    ports = spec.get("ports") or []
    if not ports and not headless and kind != "ExternalName":
        causes.append(("spec.ports", "Required value"))
    if isinstance(ports, list):
        causes += _port_causes(ports)
    selector = spec.get("selector")
    for key, value in (selector or {}).items() if isinstance(selector, dict) else ():
        if problem := qualified_name_problem(str(key)):
            causes.append(("spec.selector", f"Invalid value: {key!r}: {problem}"))
        if problem := label_value_problem(value):
            causes.append((f"spec.selector[{key}]", f"Invalid value: {value!r}: {problem}"))
    return causes
