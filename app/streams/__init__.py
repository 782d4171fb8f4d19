"""Live streams: the change feed and its subscriptions (`/watch`), and the limits on open log
follows. The HTTP layer (`app.api.watches`, `app.api.workload_views`) only adapts them to routes.

- `changefeed` — one reader of the change log (workloads and services) per process, fanned out
  in memory;
- `kinds` — what a stream follows (workloads or services), and how each is shown;
- `subscriptions` — one open stream's side of it, and the SSE frames;
- `opening` — what a stream sends first (the current objects, or a resume's replay), then live;
- `follows` — how many pod log follows may be open at once.
"""
