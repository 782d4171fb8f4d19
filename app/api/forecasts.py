"""`.../compute-pools/{pool}/forecast-accuracy`: how the pool's estimates of queued workloads'
starts turned out (docs/PLANNING.md "Measured accuracy"). Every member of the project reads."""

from typing import Annotated

from litestar import get
from litestar.params import Parameter

from app.api.deps import CallerDep, DbDep
from app.api.docs import READ, problems
from app.api.pools import ONE, PoolPath
from app.domain.errors import NotFound
from app.domain.planning.accuracy import ForecastAccuracy
from app.store import planning

DEFAULT_WINDOW_SECONDS = 7 * 86400
Window = Annotated[
    int,
    Parameter(
        ge=60,
        le=365 * 86400,
        description="Only estimates scored within this many seconds (default 7 days)",
    ),
]


@get(
    ONE + "/forecast-accuracy",
    summary="How good the pool's start estimates were",
    description="Over the estimates of the pool's queued workloads scored within "
    "`window_seconds` (each estimate is scored when Kueue admits its workload): the sample "
    "count, the median absolute error of the likely (p50) time, the share of admissions inside "
    "the band shown (`earliest` to `latest`), the band's median width and the p90 wait.",
    responses=problems(*READ),
    tags=["compute-pools"],
    operation_id="getForecastAccuracy",
)
async def get_forecast_accuracy(
    caller: CallerDep,
    db: DbDep,
    pool: str = PoolPath,
    window_seconds: Window = DEFAULT_WINDOW_SECONDS,
) -> ForecastAccuracy:
    project = caller.require_project()
    async with db.connection() as conn:
        pool_id = await planning.pool_id(conn, project.id, pool)
        if pool_id is None:
            raise NotFound(f"Compute pool {pool!r} not found.")
        found = await planning.accuracy(conn, pool_id, window_seconds)
    return ForecastAccuracy(
        compute_pool=pool,
        window_seconds=window_seconds,
        samples=found.samples,
        without_estimate=found.without_estimate,
        median_absolute_error_seconds=found.median_absolute_error_seconds,
        inside_band=found.inside_band,
        median_band_seconds=found.median_band_seconds,
        p90_wait_seconds=found.p90_wait_seconds,
    )


ROUTES = [get_forecast_accuracy]
