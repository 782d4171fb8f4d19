"""A real Kubernetes control plane with Kueue and fake GPU nodes, as plain local processes.

`RealCluster.start()` runs, in order, each waited for with a deadline:

1. etcd (data in the cluster's directory, no fsync);
2. kube-apiserver on 127.0.0.1 (RBAC, static tokens, a serving certificate from our own CA,
   API aggregation with a front-proxy client certificate of its own CA);
3. the Kueue CRDs, namespace `kueue-system`, and aicp's ClusterRole as the chart renders it,
   bound to the `aicp` user, whose token has nothing else (`aicp_kubeconfig`);
4. kube-controller-manager and kube-scheduler;
5. KWOK playing kubelet for `nodes` GPU nodes labelled as kubesim's fake GPU operator labels
   them (`nvidia.com/gpu.product`, memory, count...), their pods steered by the same
   `KUBESIM_*` container env the kubesim kubelet reads (`stages.py`);
6. the Kueue manager, out of cluster, with the `batch/job` and `pod` integrations; once its
   webhook server (127.0.0.1, the CA's serving pair) is up, Kueue's webhook configurations
   (`webhooks.py`) pointing at it, waited for until the apiserver gets answers from it;
7. Kueue's visibility server (`visibility.kueue.x-k8s.io`, the pending workloads of each
   queue in Kueue's order), on the machine's own address, registered with the apiserver as an
   `APIService` whose selector-less Service has an EndpointSlice pointing at it.

`stop()` stops them in reverse order. Each component logs to `<directory>/logs/<name>.log`.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from realcluster import build as building
from realcluster import kubeapi, pki, processes, webhooks
from realcluster.chart import chart_cluster_role
from realcluster.gpu_nodes import gpu_node
from realcluster.stages import pod_stage_files

#: Kueue's manager reads its metrics serving pair from this fixed path when it does not manage
#: certificates itself (metrics are off here; the files only have to exist), and its visibility
#: server's pair from the other. Kueue runs in a mount namespace of its own in which the
#: cluster's directories are bound over both, so clusters never share them.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
KUEUE_VISIBILITY_CERTS = Path("/visibility")
#: The visibility API as the pinned Kueue serves it (v1beta2 preferred; v1beta1 too).
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSIONS = ("v1beta2", "v1beta1")
VISIBILITY_SERVICE = "kueue-visibility-server"
KUEUE_NAMESPACE = "kueue-system"
VISIBILITY_NAMESPACE = KUEUE_NAMESPACE
#: Kueue's integrations: aicp's Jobs, and an inference service's replicas as plain pods (their
#: Deployment carries no queue name, so the `deployment` framework is not needed: Kueue walks a
#: pod's owners through a ReplicaSet and treats it as a plain pod when none is Kueue's).
KUEUE_FRAMEWORKS = ("batch/job", "pod")
#: The namespaces whose Jobs and pods Kueue manages: all but these (Kueue's own default,
#: spelled out; its pod integration refuses a selector that matches either).
KUEUE_UNMANAGED_NAMESPACES = ("kube-system", KUEUE_NAMESPACE)

#: Static token identities (token file rows). Components act as cluster admins, as they would
#: with their bootstrap RBAC; aicp gets exactly the chart's ClusterRole.
ADMIN_USER = "admin"
AICP_USER = "aicp"
_MASTERS = ("admin", "kube-controller-manager", "kube-scheduler", "kwok", "kueue")
ETCD_READY_TIMEOUT = 30.0


@dataclass(frozen=True)
class ClusterOptions:
    nodes: int = 2
    gpus_per_node: int = 8
    profile: str = "h100"
    start_timeout: float = 90.0
    #: Kueue's waitForPodsReady: the timeout (0 turns it off), as kubesim reads it from
    #: KUBESIM_WAIT_FOR_PODS_READY_SECONDS (default Kueue's 300 s), and the requeuing back-off.
    pods_ready_timeout: float = field(default_factory=lambda: _pods_ready_seconds())
    pods_ready_backoff_base_seconds: int = 60
    pods_ready_backoff_limit_count: int | None = None


class RealCluster:
    """One real cluster in `directory` (a fresh temporary one by default)."""

    def __init__(
        self,
        options: ClusterOptions | None = None,
        *,
        directory: Path | None = None,
        build: building.Build | None = None,
    ) -> None:
        self.options = options or ClusterOptions()
        self._own_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="aicp-real-cluster-"))
        self.build = build or building.current()
        self.tokens = {user: f"{user}-{_random()}" for user in (*_MASTERS, AICP_USER)}
        self.ports = {
            name: processes.free_port()
            for name in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok")
        }
        self.ports |= {
            name: processes.free_port()
            for name in ("kueue-webhook", "kueue-health", "kueue-visibility")
        }
        #: Where Kueue's visibility server listens: the machine's own address (an Endpoint
        #: may not be loopback), found when the cluster starts.
        self.visibility_address: str | None = None
        self.supervisor = processes.Supervisor(self.directory / "logs")
        self.pki: pki.Pki | None = None
        self.started_in: float | None = None

    # --- where things are ---

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def ca_file(self) -> Path:
        assert self.pki is not None
        return self.pki.ca_cert

    @property
    def admin_kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    @property
    def aicp_kubeconfig(self) -> Path:
        """A kubeconfig whose user holds only the chart's ClusterRole."""
        return self.directory / "aicp.kubeconfig"

    def api(self, user: str = ADMIN_USER) -> kubeapi.Api:
        return kubeapi.Api(self.url, self.tokens[user], self.ca_file)

    def kubeconfig(self, user: str = ADMIN_USER) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "real",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": user, "user": {"token": self.tokens[user]}}],
            "contexts": [{"name": user, "context": {"cluster": "real", "user": user}}],
            "current-context": user,
        }

    def write_kubeconfig(self, path: Path, user: str = ADMIN_USER) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.kubeconfig(user), sort_keys=False))
        return path

    # --- life cycle ---

    def __enter__(self) -> RealCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        started = time.monotonic()
        try:
            self.visibility_address = processes.machine_address()
            self.pki = pki.make_pki(
                self.directory / "pki",
                visibility_ip=self.visibility_address,
                visibility_names=(
                    f"{VISIBILITY_SERVICE}.{VISIBILITY_NAMESPACE}.svc",
                    f"{VISIBILITY_SERVICE}.{VISIBILITY_NAMESPACE}.svc.cluster.local",
                ),
            )
            self._write_files()
            self._start_etcd()
            self._start_apiserver()
            self._install()
            self._start_controller_manager()
            self._start_scheduler()
            self._start_kwok()
            self._start_kueue()
            self._register_webhooks()
            self._register_visibility()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - started

    def stop(self) -> None:
        self.supervisor.stop_all()
        if self._own_directory and not _keep_logs():
            shutil.rmtree(self.directory, ignore_errors=True)

    # --- the steps ---

    def _write_files(self) -> None:
        rows = [f"{token},{user},{user}" for user, token in self.tokens.items()]
        rows = [
            row + (',"system:masters"' if row.split(",")[1] in _MASTERS else "") for row in rows
        ]
        (self.directory / "tokens.csv").write_text("\n".join(rows) + "\n")
        self.write_kubeconfig(self.admin_kubeconfig)
        self.write_kubeconfig(self.aicp_kubeconfig, AICP_USER)
        for user in _MASTERS:
            self.write_kubeconfig(self.directory / f"{user}.kubeconfig", user)

    def _bin(self, name: str) -> str:
        return str(self.build.binary(name))

    def _start_etcd(self) -> None:
        client, peer = self.ports["etcd"], self.ports["etcd-peer"]
        component = self.supervisor.start(
            "etcd",
            [
                self._bin("etcd"),
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{client}",
                f"--advertise-client-urls=http://127.0.0.1:{client}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        health = f"http://127.0.0.1:{client}/health"
        self.supervisor.wait(
            component, lambda: kubeapi.http_ok(health), "/health", ETCD_READY_TIMEOUT
        )

    def _start_apiserver(self) -> None:
        assert self.pki is not None
        port = self.ports["apiserver"]
        component = self.supervisor.start(
            "kube-apiserver",
            [
                self._bin("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.directory / 'apiserver'}",
                f"--tls-cert-file={self.pki.serving_cert}",
                f"--tls-private-key-file={self.pki.serving_key}",
                f"--client-ca-file={self.pki.ca_cert}",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--service-account-issuer=https://127.0.0.1:{port}",
                f"--service-account-key-file={self.pki.service_account_key}",
                f"--service-account-signing-key-file={self.pki.service_account_key}",
                f"--token-auth-file={self.directory / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--anonymous-auth=true",
                "--disable-admission-plugins=ServiceAccount",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
                *self._aggregation_flags(),
            ],
        )
        api = self.api()
        self.supervisor.wait(
            component, lambda: api.healthy("/readyz"), "/readyz", self.options.start_timeout
        )

    def _aggregation_flags(self) -> list[str]:
        """API aggregation: the apiserver forwards `/apis/visibility.kueue.x-k8s.io/...` to
        Kueue's visibility server, naming the caller in headers that the server believes only
        with the front proxy's client certificate; it dials the Endpoint (no kube-proxy runs
        to serve a ClusterIP)."""
        assert self.pki is not None
        return [
            f"--requestheader-client-ca-file={self.pki.front_proxy_ca_cert}",
            f"--requestheader-allowed-names={pki.FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={self.pki.front_proxy_client_cert}",
            f"--proxy-client-key-file={self.pki.front_proxy_client_key}",
            "--enable-aggregator-routing=true",
        ]

    def _install(self) -> None:
        api = self.api()
        api.apply(f"/api/v1/namespaces/{KUEUE_NAMESPACE}", _namespace(KUEUE_NAMESPACE))
        crds = sorted(self.build.kueue_crds.glob("*.yaml"))
        if not crds:
            raise processes.ComponentError(
                f"real cluster: no Kueue CRDs in {self.build.kueue_crds} (make real-cluster)"
            )
        names = []
        for path in crds:
            crd = yaml.safe_load(path.read_text())
            names.append(crd["metadata"]["name"])
            api.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{names[-1]}", crd)
        deadline = time.monotonic() + 30
        for name in names:
            while not _established(
                api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            ):
                if time.monotonic() > deadline:
                    raise processes.ComponentError(f"real cluster: CRD {name} not Established")
                time.sleep(0.1)
        for manifest in aicp_rbac(AICP_USER):
            kind = manifest["kind"].lower() + "s"
            name = manifest["metadata"]["name"]
            api.apply(f"/apis/rbac.authorization.k8s.io/v1/{kind}/{name}", manifest)

    def _component_flags(self, user: str, port: int) -> list[str]:
        kubeconfig = self.directory / f"{user}.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.directory / user}",
        ]

    def _wait_healthz(self, component: processes.Component, port: int) -> None:
        url = f"https://127.0.0.1:{port}/healthz"
        self.supervisor.wait(component, lambda: kubeapi.http_ok(url, insecure=True), "/healthz", 60)

    def _start_controller_manager(self) -> None:
        port = self.ports["kcm"]
        component = self.supervisor.start(
            "kube-controller-manager",
            [
                self._bin("kube-controller-manager"),
                *self._component_flags("kube-controller-manager", port),
                "--controllers=*",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--concurrent-job-syncs=10",
            ],
        )
        self._wait_healthz(component, port)

    def _start_scheduler(self) -> None:
        port = self.ports["scheduler"]
        component = self.supervisor.start(
            "kube-scheduler",
            [self._bin("kube-scheduler"), *self._component_flags("kube-scheduler", port)],
        )
        self._wait_healthz(component, port)

    def _start_kwok(self) -> None:
        stages = [
            *pod_stage_files(self.directory / "kwok"),
            *sorted(self.build.kwok_stages.glob("*.yaml")),
        ]
        port = self.ports["kwok"]
        component = self.supervisor.start(
            "kwok",
            [
                self._bin("kwok"),
                f"--kubeconfig={self.directory / 'kwok.kubeconfig'}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-lease-duration-seconds=40",
                "--cidr=10.0.128.0/17",
                "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{port}",
                *(f"--config={path}" for path in stages),
            ],
        )
        self.supervisor.wait(
            component, lambda: kubeapi.http_ok(f"http://127.0.0.1:{port}/healthz"), "/healthz", 30
        )
        api = self.api()
        names = []
        for index in range(self.options.nodes):
            node = gpu_node(index, self.options.profile, self.options.gpus_per_node)
            names.append(node["metadata"]["name"])
            api.request("POST", "/api/v1/nodes", node)

        def nodes_ready() -> bool:
            return all(_node_ready(api.get(f"/api/v1/nodes/{name}")) for name in names)

        self.supervisor.wait(component, nodes_ready, "its nodes to be Ready, untainted", 60)

    def _start_kueue(self) -> None:
        assert self.pki is not None
        webhook_certs, metrics_certs, visibility_certs = (
            self.directory / name for name in ("kueue-webhook", "kueue-metrics", "kueue-visibility")
        )
        for directory in (webhook_certs, metrics_certs):
            _install_pair(self.pki.serving_cert, self.pki.serving_key, directory)
        _install_pair(self.pki.visibility_cert, self.pki.visibility_key, visibility_certs)
        config = self.directory / "kueue.yaml"
        config.write_text(yaml.safe_dump(self._kueue_config(webhook_certs), sort_keys=False))
        kubeconfig = self.directory / "kueue.kubeconfig"
        component = self.supervisor.start(
            "kueue",
            # --kubeconfig, not only $KUBECONFIG: the visibility server delegates
            # authentication and authorization to the apiserver through the flag's file.
            [
                self._bin("kueue"),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                "--zap-log-level=info",
            ],
            env={"KUBECONFIG": str(kubeconfig)},
            mounts={KUEUE_METRICS_CERTS: metrics_certs, KUEUE_VISIBILITY_CERTS: visibility_certs},
        )
        url = f"http://127.0.0.1:{self.ports['kueue-health']}/readyz"
        self.supervisor.wait(component, lambda: kubeapi.http_ok(url), "/readyz", 60)

    def _register_webhooks(self) -> None:
        """Kueue's webhook configurations, once its webhook server is up (`failurePolicy:
        Fail`: registered earlier, they would refuse every Job and pod until then); waited for
        until the apiserver reaches the server (a dry-run pod comes back gated)."""
        assert self.pki is not None
        api = self.api()
        kueue = self.supervisor.components[-1]
        try:
            manifests = webhooks.configurations(
                self.build.kueue_webhooks,
                frameworks=list(KUEUE_FRAMEWORKS),
                url=f"https://127.0.0.1:{self.ports['kueue-webhook']}",
                ca_bundle=base64.b64encode(self.pki.ca_cert.read_bytes()).decode(),
            )
        except webhooks.WebhookManifestError as exc:
            raise processes.ComponentError(str(exc)) from exc
        for manifest in manifests:
            kind = manifest["kind"].lower() + "s"
            name = manifest["metadata"]["name"]
            api.apply(f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}", manifest)
        self.supervisor.wait(
            kueue, lambda: webhooks.admits_pods(api), "its pod webhook to gate a pod", 30
        )

    def _register_visibility(self) -> None:
        """The Service (no selector), its EndpointSlice at the visibility server and one
        `APIService` per version, trusting our CA; waited for until `Available`."""
        assert self.pki is not None and self.visibility_address is not None
        api = self.api()
        namespace = f"/api/v1/namespaces/{VISIBILITY_NAMESPACE}"
        api.apply(f"{namespace}/services/{VISIBILITY_SERVICE}", _visibility_service())
        slices = f"/apis/discovery.k8s.io/v1/namespaces/{VISIBILITY_NAMESPACE}/endpointslices"
        api.apply(
            f"{slices}/{VISIBILITY_SERVICE}",
            _visibility_endpoints(self.visibility_address, self.ports["kueue-visibility"]),
        )
        ca_bundle = base64.b64encode(self.pki.ca_cert.read_bytes()).decode()
        names = []
        for priority, version in zip((100, 90), VISIBILITY_VERSIONS, strict=True):
            service = _visibility_api_service(version, priority, ca_bundle)
            names.append(service["metadata"]["name"])
            api.apply(f"/apis/apiregistration.k8s.io/v1/apiservices/{names[-1]}", service)
        kueue = self.supervisor.components[-1]

        def available() -> bool:
            return all(
                _condition_true(
                    api.get(f"/apis/apiregistration.k8s.io/v1/apiservices/{name}"), "Available"
                )
                for name in names
            )

        self.supervisor.wait(kueue, available, f"APIService {names[0]} Available", 60)

    def _kueue_config(self, webhook_certs: Path) -> dict[str, Any]:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['kueue-health']}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {
                "host": "127.0.0.1",
                "port": self.ports["kueue-webhook"],
                "certDir": str(webhook_certs),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 200, "burst": 400},
            "manageJobsWithoutQueueName": False,
            "managedJobsNamespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": list(KUEUE_UNMANAGED_NAMESPACES),
                    }
                ]
            },
            "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
            "featureGates": {"VisibilityOnDemand": True},
            "visibilityServer": {
                "bindAddress": self.visibility_address,
                "bindPort": self.ports["kueue-visibility"],
            },
            **self._wait_for_pods_ready(),
        }

    def _wait_for_pods_ready(self) -> dict[str, Any]:
        """All-or-nothing start, as kubesim's Kueue does it by default (docs/KUBESIM.md)."""
        options = self.options
        if options.pods_ready_timeout <= 0:
            return {}
        strategy: dict[str, Any] = {
            "timestamp": "Eviction",
            "backoffBaseSeconds": options.pods_ready_backoff_base_seconds,
            "backoffMaxSeconds": 3600,
        }
        if options.pods_ready_backoff_limit_count is not None:
            strategy["backoffLimitCount"] = options.pods_ready_backoff_limit_count
        return {
            "waitForPodsReady": {
                "timeout": f"{options.pods_ready_timeout:g}s",
                "blockAdmission": False,
                "requeuingStrategy": strategy,
            }
        }


def aicp_rbac(user: str) -> list[dict[str, Any]]:
    """The chart's ClusterRole for aicp, bound to `user` instead of the chart's ServiceAccount."""
    role = chart_cluster_role()
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "aicp-real-cluster"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return [role, binding]


def _install_pair(cert: Path, key: Path, directory: Path) -> None:
    """`tls.crt` and `tls.key` in `directory`, as Kueue reads a pair."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cert, directory / "tls.crt")
        shutil.copyfile(key, directory / "tls.key")
    except OSError as exc:
        raise processes.ComponentError(
            f"real cluster: kueue needs a certificate pair in {directory}: {exc}"
        ) from exc


def _visibility_service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": VISIBILITY_SERVICE, "namespace": VISIBILITY_NAMESPACE},
        "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP"}]},
    }


def _visibility_endpoints(address: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": VISIBILITY_SERVICE,
            "namespace": VISIBILITY_NAMESPACE,
            "labels": {"kubernetes.io/service-name": VISIBILITY_SERVICE},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }


def _visibility_api_service(version: str, priority: int, ca_bundle: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{VISIBILITY_GROUP}"},
        "spec": {
            "group": VISIBILITY_GROUP,
            "version": version,
            "groupPriorityMinimum": 100,
            "versionPriority": priority,
            "service": {"name": VISIBILITY_SERVICE, "namespace": VISIBILITY_NAMESPACE, "port": 443},
            "caBundle": ca_bundle,
        },
    }


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _condition_true(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def _established(crd: dict[str, Any]) -> bool:
    return _condition_true(crd, "Established")


def _node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return ready and not (node.get("spec") or {}).get("taints")


def _pods_ready_seconds() -> float:
    value = os.environ.get("KUBESIM_WAIT_FOR_PODS_READY_SECONDS")
    return float(value) if value else 300.0


def _random() -> str:
    return secrets.token_hex(12)


def _keep_logs() -> bool:
    """`AICP_REAL_CLUSTER_KEEP=1` keeps a stopped cluster's directory (its logs) for a look."""
    return bool(os.environ.get("AICP_REAL_CLUSTER_KEEP"))
