"""What `.../compute-pools/{pool}/forecast-accuracy` answers (docs/PLANNING.md)."""

from __future__ import annotations

from typing import Annotated

import msgspec


class ForecastAccuracy(msgspec.Struct, kw_only=True):
    """Estimates of the pool's queued workloads' admission, scored when Kueue admitted them."""

    compute_pool: Annotated[str, msgspec.Meta(examples=["h100-pool"])]
    window_seconds: Annotated[int, msgspec.Meta(examples=[604800])]
    samples: Annotated[
        int, msgspec.Meta(ge=0, description="scored estimates that had a band", examples=[120])
    ]
    without_estimate: Annotated[
        int,
        msgspec.Meta(
            ge=0, description="scored estimates that had no band (no basis)", examples=[3]
        ),
    ]
    median_absolute_error_seconds: Annotated[
        float | None,
        msgspec.Meta(description="median of |admission - likely| (null: no sample)"),
    ]
    inside_band: (
        Annotated[
            float,
            msgspec.Meta(
                ge=0,
                le=1,
                description="share of admissions between earliest (p10) and latest (p90)",
                examples=[0.86],
            ),
        ]
        | None
    )
    median_band_seconds: Annotated[
        float | None, msgspec.Meta(description="median width of the band (latest - earliest)")
    ]
    p90_wait_seconds: Annotated[
        float | None, msgspec.Meta(description="p90 of the time from estimate to admission")
    ]
