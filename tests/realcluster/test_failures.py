"""What a person sees when the real cluster cannot be built or started: one line naming the
component (or build unit) and its log file, never a hang."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from realcluster import RealCluster
from realcluster import build as building
from realcluster.processes import ComponentError

REPO = Path(__file__).resolve().parents[2]


def _realcluster(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realcluster", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_build_without_go_says_so_in_one_line(tmp_path: Path) -> None:
    python_only = tmp_path / "bin"
    python_only.mkdir()
    (python_only / "python3").symlink_to(sys.executable)
    done = _realcluster(
        "build", env={"PATH": str(python_only), "AICP_REAL_CLUSTER_CACHE": str(tmp_path / "c")}
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "real cluster: no Go toolchain (`go` is not on PATH); install Go >= 1.26 to build it"
    ]


@pytest.mark.real_cluster  # needs Go
def test_a_module_the_proxy_does_not_serve_names_the_unit_and_its_log(tmp_path: Path) -> None:
    done = _realcluster(
        "build",
        env={
            "AICP_REAL_CLUSTER_CACHE": str(tmp_path / "cache"),
            "GOMODCACHE": str(tmp_path / "modules"),  # nothing cached
            "GOPROXY": "off",  # and nothing can be fetched: as a proxy that lacks a module
        },
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("real cluster: building kube failed (")
    assert "GOPROXY=off" in last
    assert last.endswith(f"see {tmp_path / 'cache'}/{building.build_key()}/logs/build-kube.log")


def _stub_build(root: Path, etcd_script: str) -> building.Build:
    build = building.Build(root)
    build.bin.mkdir(parents=True)
    for name in building.BINARIES:
        stub = build.binary(name)
        stub.write_text(etcd_script if name == "etcd" else "#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    return build


def test_a_component_that_exits_at_start_names_itself_and_its_log(tmp_path: Path) -> None:
    build = _stub_build(tmp_path / "build", "#!/bin/sh\necho 'etcd: bad flag' >&2\nexit 3\n")
    cluster = RealCluster(build=build, directory=tmp_path / "cluster")
    with pytest.raises(ComponentError) as failed:
        cluster.start()
    log = tmp_path / "cluster" / "logs" / "etcd.log"
    assert str(failed.value) == (
        f"real cluster: etcd exited with status 3: etcd: bad flag (log: {log})"
    )
    assert cluster.supervisor.components == []  # everything started was stopped


def test_a_component_that_never_gets_ready_fails_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = _stub_build(tmp_path / "build", "#!/bin/sh\nexec sleep 600\n")
    cluster = RealCluster(build=build, directory=tmp_path / "cluster")
    monkeypatch.setattr("realcluster.cluster.ETCD_READY_TIMEOUT", 1.0)
    with pytest.raises(ComponentError) as failed:
        cluster.start()
    log = tmp_path / "cluster" / "logs" / "etcd.log"
    assert str(failed.value) == (
        f"real cluster: etcd not ready after 1 s (waiting for /health); see {log}"
    )
    assert cluster.supervisor.components == []


@pytest.mark.real_cluster
def test_a_port_in_use_names_the_component_and_its_log(tmp_path: Path) -> None:
    build = building.built()
    assert build is not None, "make real-cluster"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cluster = RealCluster(build=build, directory=tmp_path / "cluster")
        cluster.ports["etcd"] = taken.getsockname()[1]
        with pytest.raises(ComponentError) as failed:
            cluster.start()
    message = str(failed.value)
    assert message.startswith("real cluster: etcd exited with status 1: ")
    assert "address already in use" in message
    assert message.endswith(f"(log: {tmp_path / 'cluster' / 'logs' / 'etcd.log'})")
