"""The Kubernetes adapter: client setup, informers (list+watch caches) and writes.

- `client`: `KubeClient.connect(KubeSettings(...))` — configuration lookup and write limiter.
- `errors`: the `KubeError` hierarchy every call here raises.
- `resources`: the kinds aicp uses (`JOBS`, `WORKLOADS`, ...) and raw calls on them.
- `watching` / `cache`: one informer and its indexed cache; `informers`: the set aicp runs.
- `apply`: server-side apply (manager `aicp`), deletes, finalizer removal, pod logs.
"""
