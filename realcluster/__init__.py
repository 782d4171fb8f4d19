"""A real Kubernetes cluster for acceptance tests and for `make run-real`: kube-apiserver, etcd,
kube-controller-manager, kube-scheduler, KWOK (fake GPU nodes) and Kueue, built from pinned Go
modules (`build`) and run as local processes on 127.0.0.1 (`cluster.RealCluster`).

`python -m realcluster build` builds (or finds) the binaries; `python -m realcluster up` starts a
cluster and prints its kubeconfig; `python -m realcluster up -- CMD ...` runs CMD against it
(with `KUBECONFIG` set to aicp's least-privilege kubeconfig) and stops the cluster after.
"""

from realcluster.cluster import ClusterOptions, RealCluster

__all__ = ["ClusterOptions", "RealCluster"]
