"""Build the real cluster's binaries from pinned Go modules (`make real-cluster`).

Three build units, each a Go module of ours under `realcluster/gomod/` that pins one upstream
release and whose `go.sum` is committed:

- `kube`: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from
  `k8s.io/kubernetes` (its staging modules pinned with `replace`), and etcd at the version
  Kubernetes pins;
- `kueue`: the Kueue manager;
- `kwok`: KWOK, which plays kubelet for fake nodes.

Binaries go to `<cache>/<key>/bin/`, where `key` hashes the three modules and this recipe: a
second run with the same pins finds them and does nothing; a changed pin builds anew (Go's own
module and build caches make that a relink when little changed). Files the tests and the
launcher need from the pinned modules — the Kueue CRDs, Kueue's webhook configurations and
KWOK's node stages — are copied to `<cache>/<key>/` next to the binaries, so nothing of another
project lives in this repository. The key covers what the binaries are built from; the copies
are checked by presence: a build made before a copy was added gets it at the next build
without relinking anything.

Every failure is one line naming the unit and its log file (`BuildError`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GOMOD = Path(__file__).resolve().parent / "gomod"
#: Bump when the way binaries are built changes (flags, layout) without a pin changing.
RECIPE = "2"

KUBERNETES_VERSION = "v1.37.2"
KUEUE_VERSION = "v0.19.2"
KWOK_VERSION = "v0.8.0"
#: The date of the Kubernetes release, stamped into `--version` (module zips carry no git data).
KUBERNETES_BUILD_DATE = "2026-10-27T12:01:04Z"

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kueue",
    "kwok",
)


#: What the build copies of Kueue's `config/components/webhook/` into `Build.kueue_webhooks`.
KUEUE_WEBHOOK_FILES = ("manifests.yaml", "kustomization.yaml")


class BuildError(Exception):
    """One build step failed; the message is the one line a person needs."""


@dataclass(frozen=True)
class Unit:
    name: str
    packages: tuple[tuple[str, str], ...]  # (binary name, Go package)
    ldflags: str


def _kube_ldflags() -> str:
    flags = ["-s", "-w"]
    minor = KUBERNETES_VERSION.split(".")[1]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for name, value in (
            ("gitVersion", KUBERNETES_VERSION),
            ("gitMajor", "1"),
            ("gitMinor", minor),
            ("gitCommit", "module-" + KUBERNETES_VERSION),
            ("gitTreeState", "clean"),
            ("buildDate", KUBERNETES_BUILD_DATE),
        ):
            flags.append(f"-X {package}.{name}={value}")
    return " ".join(flags)


UNITS = (
    Unit(
        "kube",
        (
            ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
            ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
            ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
            ("etcd", "go.etcd.io/etcd/server/v3"),
            ("kubectl", "k8s.io/kubernetes/cmd/kubectl"),
        ),
        _kube_ldflags(),
    ),
    Unit(
        "kueue",
        (("kueue", "sigs.k8s.io/kueue/cmd/kueue"),),
        f"-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}",
    ),
    Unit("kwok", (("kwok", "sigs.k8s.io/kwok/cmd/kwok"),), "-s -w"),
)


def cache_root() -> Path:
    """`AICP_REAL_CLUSTER_CACHE`, else the user's cache directory (shared by every clone)."""
    if explicit := os.environ.get("AICP_REAL_CLUSTER_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aicp" / "real-cluster"


def build_key() -> str:
    """A hash of every pin and of the recipe: equal keys mean equal binaries."""
    digest = hashlib.sha256(RECIPE.encode())
    for unit in UNITS:
        for name in ("go.mod", "go.sum"):
            digest.update((GOMOD / unit.name / name).read_bytes())
        digest.update(unit.ldflags.encode())
        digest.update(repr(unit.packages).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Build:
    """Where one build's outputs are."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def kueue_crds(self) -> Path:
        return self.root / "kueue-crds"

    @property
    def kueue_webhooks(self) -> Path:
        """Kueue's `config/components/webhook/`: `manifests.yaml` (its Mutating- and
        ValidatingWebhookConfiguration) and `kustomization.yaml` (the namespaces they skip)."""
        return self.root / "kueue-webhooks"

    @property
    def kwok_stages(self) -> Path:
        return self.root / "kwok-stages"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def binary(self, name: str) -> Path:
        return self.bin / name

    def complete(self) -> bool:
        copied = [self.kueue_webhooks / name for name in KUEUE_WEBHOOK_FILES]
        return (self.root / "complete").exists() and all(path.exists() for path in copied)


def current() -> Build:
    return Build(cache_root() / build_key())


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "real cluster: no Go toolchain (`go` is not on PATH); install Go >= 1.26 to build it"
        )
    return go


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # A too-old local Go fails loudly instead of fetching a toolchain; static binaries.
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-trimpath -mod=readonly")
    return env


def _run(unit: str, argv: list[str], cwd: Path, log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, cwd=cwd, env=_env(), stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        reason = _last_error(log)
        raise BuildError(f"real cluster: building {unit} failed ({reason}); see {log}")


def _last_error(log: Path) -> str:
    """The most telling line of a Go build log (a module the proxy does not serve, ...)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if "not available" in line or "unknown revision" in line or "404" in line:
            return line[:300]
    errors = [line for line in lines if not line.startswith("$")]
    return errors[-1][:300] if errors else "no output"


def _build_unit(unit: Unit, build: Build, say: _Say) -> None:
    log = build.logs / f"build-{unit.name}.log"
    log.unlink(missing_ok=True)
    module = GOMOD / unit.name
    go = _go()
    started = time.monotonic()
    say(f"downloading the modules of {unit.name} (log: {log})")
    _run(unit.name, [go, "mod", "download"], module, log)
    for binary, package in unit.packages:
        say(f"building {binary}")
        target = build.bin / (binary + ".partial")
        _run(
            unit.name,
            [go, "build", "-ldflags", unit.ldflags, "-o", str(target), package],
            module,
            log,
        )
        target.replace(build.bin / binary)
    say(f"{unit.name} built in {time.monotonic() - started:.0f} s")


def _module_dir(unit: str, module: str) -> Path:
    """The module cache directory of `module` as the unit's go.mod pins it."""
    done = subprocess.run(
        [_go(), "list", "-m", "-f", "{{.Dir}}", module],
        cwd=GOMOD / unit,
        env=_env(),
        capture_output=True,
        text=True,
    )
    directory = Path(done.stdout.strip())
    if done.returncode != 0 or not directory.is_dir():
        raise BuildError(
            f"real cluster: module {module} is not in the Go module cache: {done.stderr}"
        )
    return directory


def gateway_api_crds() -> Path | None:
    """The standard-channel Gateway API CRDs at the version Kueue's go.mod pins, from the Go
    module cache (the real cluster's build downloads it); None without Go or that module."""
    try:
        gateway_api = _module_dir("kueue", "sigs.k8s.io/gateway-api")
    except BuildError:
        return None
    crds = gateway_api / "config" / "crd" / "standard"
    return crds if crds.is_dir() else None


def _copy_pinned_files(build: Build) -> None:
    kueue = _module_dir("kueue", "sigs.k8s.io/kueue")
    shutil.rmtree(build.kueue_crds, ignore_errors=True)
    # copyfile: the module cache is read-only, the copies must not be (a rebuild replaces them).
    shutil.copytree(
        kueue / "config" / "components" / "crd" / "bases",
        build.kueue_crds,
        copy_function=shutil.copyfile,
    )
    build.kueue_crds.chmod(0o755)
    build.kueue_webhooks.mkdir(exist_ok=True)
    for name in KUEUE_WEBHOOK_FILES:
        source = kueue / "config" / "components" / "webhook" / name
        shutil.copyfile(source, build.kueue_webhooks / name)
    kwok = _module_dir("kwok", "sigs.k8s.io/kwok")
    build.kwok_stages.mkdir(exist_ok=True)
    node_stages = kwok / "kustomize" / "stage" / "node"
    for name in (
        "fast/node-initialize.yaml",
        "heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    ):
        shutil.copyfile(node_stages / name, build.kwok_stages / Path(name).name)


class _Say:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"real-cluster: {message}", file=sys.stderr, flush=True)


def ensure_built(*, quiet: bool = False) -> Build:
    """The build for the current pins, building what is missing. Raises `BuildError`."""
    build = current()
    if build.complete() and all(build.binary(name).exists() for name in BINARIES):
        return build
    say = _Say(quiet)
    build.bin.mkdir(parents=True, exist_ok=True)
    build.logs.mkdir(exist_ok=True)
    started = time.monotonic()
    for unit in UNITS:
        if all(build.binary(binary).exists() for binary, _ in unit.packages):
            continue
        _build_unit(unit, build, say)
    _copy_pinned_files(build)
    (build.root / "complete").write_text(
        f"kubernetes {KUBERNETES_VERSION}\nkueue {KUEUE_VERSION}\nkwok {KWOK_VERSION}\n"
    )
    say(f"built in {time.monotonic() - started:.0f} s into {build.root}")
    return build


def built() -> Build | None:
    """The build for the current pins if it is complete, without building anything."""
    build = current()
    return build if build.complete() else None
