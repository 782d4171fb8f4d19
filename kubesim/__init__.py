"""kubesim: a Kubernetes + Kueue + fake-GPU cluster in one asyncio process (see docs/KUBESIM.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["Cluster"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `import kubesim.store` (the controllers) does not pull in aiohttp.
    if name == "Cluster":
        from kubesim.cluster import Cluster

        return Cluster
    raise AttributeError(name)
