"""Kueue's admission webhooks, registered as its release registers them, but served by the Kueue
process on 127.0.0.1 instead of through a Service.

The pinned module's `config/components/webhook/` (copied by the build, `Build.kueue_webhooks`)
holds the two configurations Kueue's release installs: `manifests.yaml`, one webhook per
framework and per Kueue kind, and `kustomization.yaml`, which makes every framework's webhook
skip the namespaces `kube-system` and `kueue-system` (a patch on `vpod.kb.io` whose
`namespaceSelector` its replacements copy to the others). `configurations` applies that patch
and those replacements, keeps the webhooks of Kueue's own kinds and of the enabled frameworks
only, and points each at `https://127.0.0.1:<port><path>` with the cluster CA as its bundle.
`failurePolicy` stays as Kueue ships it (`Fail`): the launcher registers the configurations
only once Kueue's webhook server is up, and `admits_pods` tells when the apiserver reaches it.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

import yaml

from realcluster.kubeapi import ApiError

if TYPE_CHECKING:
    from pathlib import Path

    from realcluster.kubeapi import Api

Obj = dict[str, Any]

#: The (API group, resource) each framework the launcher may enable admits.
FRAMEWORK_RESOURCES = {
    "batch/job": ("batch", "jobs"),
    "pod": ("", "pods"),
    "deployment": ("apps", "deployments"),
    "statefulset": ("apps", "statefulsets"),
}
KUEUE_GROUP = "kueue.x-k8s.io"
#: Kueue's release prefixes the names of all its objects with `kueue-`.
NAME_PREFIX = "kueue-"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: `webhooks.[name=<webhook>].<field>`, the only field paths Kueue's kustomization uses.
_FIELD_PATH = re.compile(r"^webhooks\.\[name=(?P<webhook>[^\]]+)\]\.(?P<field>\w+)$")


class WebhookManifestError(Exception):
    """Kueue's webhook files are missing or not shaped as the launcher expects."""


def configurations(
    directory: Path, *, frameworks: list[str], url: str, ca_bundle: str
) -> list[Obj]:
    """Kueue's MutatingWebhookConfiguration and ValidatingWebhookConfiguration, patched as its
    kustomization patches them, with the webhooks of its own kinds and of `frameworks` only,
    each calling `url` + its path and trusting `ca_bundle` (base64 PEM)."""
    try:
        documents = [
            doc for doc in yaml.safe_load_all((directory / "manifests.yaml").read_text()) if doc
        ]
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise WebhookManifestError(
            f"real cluster: Kueue's webhook files in {directory} cannot be read ({exc}); "
            "make real-cluster"
        ) from exc
    by_kind = {doc["kind"]: doc for doc in documents}
    for patch in kustomization.get("patches") or []:
        _merge_patch(by_kind, yaml.safe_load(patch["patch"]))
    for replacement in kustomization.get("replacements") or []:
        _replace(by_kind, replacement)
    wanted = {_resource(framework) for framework in frameworks}
    kept = []
    for doc in documents:
        manifest = copy.deepcopy(doc)
        manifest["metadata"] = {"name": NAME_PREFIX + doc["metadata"]["name"]}
        manifest["webhooks"] = [
            _at(webhook, url, ca_bundle) for webhook in doc["webhooks"] if _admits(webhook, wanted)
        ]
        kept.append(manifest)
    return kept


def admits_pods(api: Api, namespace: str = "default") -> bool:
    """Whether the apiserver gets an answer from Kueue's pod webhook: a dry-run pod with a
    queue name comes back carrying Kueue's admission gate."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kueue-webhook-probe",
            "namespace": namespace,
            "labels": {QUEUE_NAME_LABEL: "webhook-probe"},
        },
        "spec": {"containers": [{"name": "probe", "image": "probe"}]},
    }
    try:
        pod = api.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", probe)
    except ApiError:
        return False  # "failed calling webhook ...": not reachable yet
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(gate.get("name") == ADMISSION_GATE for gate in gates)


def _resource(framework: str) -> tuple[str, str]:
    try:
        return FRAMEWORK_RESOURCES[framework]
    except KeyError:
        raise WebhookManifestError(
            f"real cluster: no webhooks known for Kueue framework {framework!r}"
        ) from None


def _admits(webhook: Obj, wanted: set[tuple[str, str]]) -> bool:
    """Whether a webhook is one of Kueue's own kinds' or one of the wanted frameworks'."""
    for rule in webhook.get("rules") or []:
        for group in rule.get("apiGroups") or []:
            if group == KUEUE_GROUP:
                return True
            if any((group, resource) in wanted for resource in rule.get("resources") or []):
                return True
    return False


def _at(webhook: Obj, url: str, ca_bundle: str) -> Obj:
    path = webhook["clientConfig"]["service"]["path"]
    return {**webhook, "clientConfig": {"url": url + path, "caBundle": ca_bundle}}


def _webhook(by_kind: dict[str, Obj], kind: str, name: str) -> Obj:
    try:
        document = by_kind[kind]
    except KeyError:
        raise WebhookManifestError(f"real cluster: Kueue ships no {kind}") from None
    for webhook in document["webhooks"]:
        if webhook["name"] == name:
            found: Obj = webhook
            return found
    raise WebhookManifestError(f"real cluster: Kueue's {kind} has no webhook {name}")


def _merge_patch(by_kind: dict[str, Obj], patch: Obj) -> None:
    """A strategic-merge patch of webhooks, merged by name (the only shape Kueue uses)."""
    for change in patch.get("webhooks") or []:
        _webhook(by_kind, patch["kind"], change["name"]).update(copy.deepcopy(change))


def _replace(by_kind: dict[str, Obj], replacement: Obj) -> None:
    """A kustomize replacement: the source's field copied to each target's field path."""
    source = replacement["source"]
    webhook, field = _field_path(source["fieldPath"])
    value = _webhook(by_kind, source["kind"], webhook)[field]
    for target in replacement.get("targets") or []:
        for path in target.get("fieldPaths") or []:
            webhook, field = _field_path(path)
            _webhook(by_kind, target["select"]["kind"], webhook)[field] = copy.deepcopy(value)


def _field_path(path: str) -> tuple[str, str]:
    match = _FIELD_PATH.match(path)
    if match is None:
        raise WebhookManifestError(f"real cluster: unexpected field path {path!r} in Kueue's")
    return match["webhook"], match["field"]
