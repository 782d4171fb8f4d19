"""What `helm install` would create: valid Kubernetes objects that behave as the docs say.

Every rendered manifest is validated against the strict JSON schemas of the newest Kubernetes
version kubernetes-validate ships (no unknown fields anywhere). The ServiceMonitor is a
Prometheus Operator CRD with no schema there; it is checked by its structure instead.
"""

from __future__ import annotations

import base64
from typing import Any

import kubernetes_validate
import pytest

from app.config import Settings
from tests.chart.rendering import (
    ADMIN_TOKEN,
    DATABASE_URL,
    DEFAULT_VALUES,
    EXISTING_SECRET_VALUES,
    HA_VALUES,
    NAMESPACE,
    render,
)

KUBERNETES_VERSION = kubernetes_validate.latest_version()

VALUE_SETS = [
    pytest.param(DEFAULT_VALUES, id="default"),
    pytest.param(HA_VALUES, id="ha-3-replicas"),
    pytest.param(EXISTING_SECRET_VALUES, id="existing-secret"),
]


@pytest.mark.parametrize("values", VALUE_SETS)
def test_every_rendered_manifest_is_valid_for_the_newest_kubernetes(
    values: dict[str, Any],
) -> None:
    rendered = render(values)

    validated = set()
    for manifest in rendered.manifests:
        if manifest["apiVersion"] == "monitoring.coreos.com/v1":
            continue
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        validated.add(manifest["kind"])
    assert {"Deployment", "Service", "ServiceAccount", "ClusterRole"} <= validated


@pytest.mark.parametrize("values", VALUE_SETS)
def test_namespaced_objects_land_in_the_release_namespace(values: dict[str, Any]) -> None:
    rendered = render(values)

    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"}
    for manifest in rendered.manifests:
        if manifest["kind"] not in cluster_scoped:
            assert manifest["metadata"]["namespace"] == NAMESPACE, manifest["kind"]


@pytest.mark.parametrize("values", VALUE_SETS)
def test_no_secret_value_is_ever_written_into_the_deployment(values: dict[str, Any]) -> None:
    rendered = render(values)

    deployment_text = repr(rendered.one("Deployment"))
    assert DATABASE_URL not in deployment_text
    assert "s3cret-db-password" not in deployment_text
    assert ADMIN_TOKEN not in deployment_text
    for name in ("DATABASE_URL", "AICP_ADMIN_TOKEN"):
        assert "value" not in rendered.env[name]
        assert "secretKeyRef" in rendered.env[name]["valueFrom"]


def test_the_chart_made_secret_holds_the_database_url_and_the_given_admin_token() -> None:
    rendered = render(HA_VALUES)

    secret = rendered.one("Secret")
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {"DATABASE_URL": DATABASE_URL, "AICP_ADMIN_TOKEN": ADMIN_TOKEN}
    assert rendered.env["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"],
        "key": "DATABASE_URL",
    }


def test_an_admin_token_is_generated_when_none_is_given() -> None:
    secret = render(DEFAULT_VALUES).one("Secret")

    token = base64.b64decode(secret["data"]["AICP_ADMIN_TOKEN"]).decode()
    assert len(token) == 48
    assert token.isalnum()


def test_an_existing_secret_is_referenced_by_its_keys_and_no_secret_is_created() -> None:
    rendered = render(EXISTING_SECRET_VALUES)

    assert rendered.all_of("Secret") == []
    assert rendered.env["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "aicp-credentials",
        "key": "url",
    }
    assert rendered.env["AICP_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "aicp-credentials",
        "key": "token",
    }
    assert "aicp-credentials" in rendered.notes


@pytest.mark.parametrize("values", VALUE_SETS)
def test_each_replica_takes_its_instance_id_from_its_pod_name(values: dict[str, Any]) -> None:
    instance_id = render(values).env["AICP_INSTANCE_ID"]

    assert instance_id == {
        "name": "AICP_INSTANCE_ID",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    }


def test_probes_check_liveness_on_healthz_and_readiness_on_readyz() -> None:
    container = render(DEFAULT_VALUES).container

    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_the_service_settings_reach_the_process_as_environment_variables() -> None:
    env = render(DEFAULT_VALUES).env

    settings = {name: e.get("value") for name, e in env.items() if "value" in e}
    assert settings == {
        "AICP_HTTP_HOST": "0.0.0.0",
        "AICP_HTTP_PORT": "8080",
        "AICP_LOG_FORMAT": "json",
        "AICP_LEASE_TTL_SECONDS": "15",
        "AICP_SWEEP_INTERVAL_SECONDS": "1",
        "AICP_WORKERS": "16",
        "AICP_DB_POOL_SIZE": "10",
        "AICP_DB_RECONCILE_POOL_SIZE": "8",
        "AICP_KUBE_WRITE_QPS": "50",
        "AICP_KUBE_WRITE_BURST": "100",
        "AICP_TOKENS_PER_PROJECT": "1000",
        "AICP_WORKLOAD_START_DEADLINE_SECONDS": "3600",
        "AICP_HTTP_MAX_HEAD_BYTES": "65536",
        "AICP_HTTP_MAX_REQUEST_LINE_BYTES": "8192",
        "AICP_HTTP_MAX_HEADERS": "100",
        "AICP_HTTP_HEAD_TIMEOUT_SECONDS": "10",
        "AICP_HTTP_BODY_TIMEOUT_SECONDS": "30",
        "AICP_HTTP_MAX_CONNECTIONS": "4096",
        "AICP_RATE_READS_PER_TOKEN": "200",
        "AICP_RATE_WRITES_PER_TOKEN": "10",
        "AICP_RATE_READS_PER_PROJECT": "500",
        "AICP_RATE_WRITES_PER_PROJECT": "20",
        "AICP_RATE_AUTH_FAILURES_PER_CLIENT": "10",
        "AICP_RATE_BURST_SECONDS": "5",
        "AICP_LOG_FOLLOWS_MAX": "32",
        "AICP_LOG_FOLLOWS_PER_TOKEN": "4",
        "AICP_LOG_FOLLOWS_PER_PROJECT": "8",
        "AICP_STREAMS_PER_PROJECT": "500",
        # Single sign-on is off by default: an empty issuer and audience.
        "AICP_OIDC_ISSUER": "",
        "AICP_OIDC_AUDIENCE": "",
        "AICP_OIDC_USERNAME_CLAIM": "preferred_username",
        "AICP_OIDC_GROUPS_CLAIM": "groups",
        "AICP_OIDC_ALGORITHMS": "RS256,PS256,ES256",
        "AICP_OIDC_LEEWAY_SECONDS": "30",
        "AICP_OIDC_KEYS_REFRESH_SECONDS": "30",
        "AICP_OIDC_ADMIN_GROUPS": "",
        "AICP_OIDC_CLI_CLIENT_ID": "aicp-cli",
        "AICP_OIDC_DASHBOARD_CLIENT_ID": "aicp-dashboard",
    }
    assert "KUBECONFIG" not in env  # in-cluster config from the ServiceAccount


@pytest.mark.parametrize("values", VALUE_SETS)
def test_the_pod_runs_restricted(values: dict[str, Any]) -> None:
    rendered = render(values)
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    container = rendered.container

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the Dockerfile's USER
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]["memory"]


def test_a_single_replica_gets_no_disruption_budget_that_would_block_node_drains() -> None:
    rendered = render(DEFAULT_VALUES)

    assert rendered.one("Deployment")["spec"]["replicas"] == 1
    assert rendered.all_of("PodDisruptionBudget") == []


def test_ha_runs_three_replicas_with_a_disruption_budget_spread_across_nodes() -> None:
    rendered = render(HA_VALUES)
    deployment = rendered.one("Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]

    assert deployment["spec"]["replicas"] == 3
    pdb = rendered.one("PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread[0]["topologyKey"] == "kubernetes.io/hostname"
    assert spread[0]["labelSelector"]["matchLabels"] == selector
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_the_service_and_the_service_monitor_reach_the_pods_metrics_port() -> None:
    rendered = render(HA_VALUES)
    pod_labels = rendered.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    service = rendered.one("Service")

    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    monitor = rendered.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    service_labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]


def test_the_network_policy_admits_the_api_port_and_lets_out_only_dns_db_and_apiserver() -> None:
    policy = render(HA_VALUES).one("NetworkPolicy")

    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert [p["port"] for p in policy["spec"]["ingress"][0]["ports"]] == ["http"]
    egress_ports = sorted({p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]})
    assert egress_ports == [53, 443, 5432, 6443]
    database_rule = next(r for r in policy["spec"]["egress"] if r["ports"][0]["port"] == 5432)
    assert database_rule["to"] == [{"ipBlock": {"cidr": "10.20.0.0/16"}}]


def test_optional_objects_are_off_by_default() -> None:
    kinds = {m["kind"] for m in render(DEFAULT_VALUES).manifests}

    assert kinds == {
        "ServiceAccount",
        "Secret",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "Deployment",
        "Pod",  # the `helm test` hook
    }


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_helm_test_checks_readiness_and_metrics_through_the_service() -> None:
    rendered = render(HA_VALUES)
    pod = rendered.one("Pod")
    service = rendered.one("Service")

    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = pod["spec"]["containers"][0]["args"][0]
    assert f"http://{service['metadata']['name']}:8080" in script
    assert '"/readyz"' in script
    assert '"/metrics"' in script
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_helm_test_pod_is_never_mistaken_for_an_aicp_replica() -> None:
    rendered = render(HA_VALUES)
    test_pod_labels = rendered.one("Pod")["metadata"]["labels"]

    assert not selects(rendered.one("Service")["spec"]["selector"], test_pod_labels)
    assert not selects(
        rendered.one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"], test_pod_labels
    )
    policy = rendered.one("NetworkPolicy")
    assert not selects(policy["spec"]["podSelector"]["matchLabels"], test_pod_labels)
    ingress_peers = policy["spec"]["ingress"][0]["from"]
    assert any(
        selects(peer.get("podSelector", {}).get("matchLabels", {"-": "-"}), test_pod_labels)
        for peer in ingress_peers
    )


def test_the_cluster_role_is_bound_to_the_pods_service_account() -> None:
    rendered = render(DEFAULT_VALUES)
    account = rendered.one("ServiceAccount")["metadata"]["name"]

    binding = rendered.one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == rendered.one("ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    ]
    assert rendered.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account


def test_the_notes_show_the_first_curl_with_the_admin_token() -> None:
    notes = render(DEFAULT_VALUES).notes

    assert "kubectl -n aicp-system port-forward service/aicp 8080:8080" in notes
    assert "curl -sS -X PUT http://127.0.0.1:8080/api/v1/accelerator-bindings/h100-80g" in notes
    assert "Authorization: Bearer $AICP_ADMIN_TOKEN" in notes


def test_a_zero_pre_stop_sleep_drops_the_hook_for_clusters_without_the_sleep_action() -> None:
    rendered = render({**DEFAULT_VALUES, "preStopSleepSeconds": 0})

    assert "lifecycle" not in rendered.container
    kubernetes_validate.validate(rendered.one("Deployment"), KUBERNETES_VERSION, strict=True)


def test_the_charts_limits_are_the_services_defaults() -> None:
    env = render(DEFAULT_VALUES).env
    limits = {
        name: e["value"]
        for name, e in env.items()
        if name.startswith(("AICP_RATE_", "AICP_LOG_FOLLOWS_", "AICP_STREAMS_PER_PROJECT"))
    }
    required = {"DATABASE_URL": "postgresql://x/y", "AICP_ADMIN_TOKEN": "a" * 20}
    assert len(limits) == 10
    charted = Settings.from_env({**required, **limits, "AICP_INSTANCE_ID": "a"})
    assert charted == Settings.from_env({**required, "AICP_INSTANCE_ID": "a"})
