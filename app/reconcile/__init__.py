"""The reconciler: converges what PostgreSQL says onto Kubernetes (docs/DESIGN.md §5).

`engine.Reconciler` owns the machinery — leases (`leasing`), the doorbell listener
(`doorbell`), the sweep and batched claims (`claiming`), the work queue (`queue`) and the
workers (`workers`); steps for each kind plug in with `Reconciler.register(kind, step)` and
write through `fencing`.
"""
