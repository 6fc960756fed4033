"""mu-GDP privacy (paper §§2.2-3): clipping, the clipping-bound rules, the calibration core, the ledger, the checks.

One module per responsibility (docs/ARCHITECTURE.md, `core/privacy`); every name is re-exported here, so
``fedgdp.core.privacy.X`` is the one address of each. ``mu = inf`` means non-private: no clipping, no noise.
"""
from .calibration import (
    CLIP_HISTOGRAM,
    CURVATURE,
    GRADIENT,
    LOCAL_STEP,
    LOCAL_STEP_HALF1,
    NEWTON,
    NOISE_ULPS,
    Calibration,
    ReleaseSpec,
    calibrate,
    calibrate_schedule,
    check_noise_resolves,
)
from .checks import (
    CLIP_MAX,
    CLIP_MIN,
    DEFAULT_PRIVACY,
    HESSIAN_CLIP,
    HESSIAN_CLIP_RANGE,
    MU_FLOOR,
    MU_MAX,
    NOISE_BOUND,
    PRIVACY_MODES,
    RELEASE_MAX,
    RELEASES,
    adds_noise,
    check_clip,
    check_clip_bound,
    check_privacy,
    check_release_bound,
    clips,
    iterate_bound,
    parse_fraction,
    parse_mu,
)
from .clipping import (
    CLIP_SLACK,
    CLIP_WORK_ROUNDINGS,
    TINY64,
    U64,
    clip_factors,
    clip_margin,
    clip_rows,
    clip_scale,
    round_down_subnormal,
    row_norms,
)
from .gdp import apportion, compose, gdp_delta, gdp_epsilon, gdp_mu, headroom, share_of
from .ledger import GUARANTEE, Ledger, Release
from .plans import (
    COUNT_SCALE,
    NEWTON_ASSUMPTION,
    SECOND_MOMENTS,
    calibrate_with_clip,
    count_share,
    irls_shares,
    plan_fedavg,
    plan_fedhybrid,
    plan_fedirls,
    plan_fednewton,
    plan_fednewton_iter,
    plan_fedsgd,
)
from .rules import (
    DEFAULT_CLIP,
    Fixed,
    PrivateQuantile,
    Quantile,
    bound_of_rule,
    clip_bound,
    clip_histogram,
    clip_rule,
    clip_share,
    clip_unaccounted,
    histogram_grid,
    plan_clip_histogram,
    private_clip_bound,
)

__all__ = [
    "DEFAULT_CLIP", "HESSIAN_CLIP", "DEFAULT_PRIVACY", "GRADIENT", "LOCAL_STEP", "LOCAL_STEP_HALF1", "NEWTON",
    "CLIP_HISTOGRAM",
    "PRIVACY_MODES", "MU_FLOOR", "MU_MAX", "CLIP_MIN", "CLIP_MAX", "HESSIAN_CLIP_RANGE", "RELEASE_MAX",
    "NOISE_BOUND", "iterate_bound", "check_release_bound", "parse_mu", "parse_fraction", "check_clip",
    "check_clip_bound", "check_privacy", "RELEASES",
    "adds_noise", "clips",
    "clip_rows", "row_norms", "U64", "CLIP_SLACK", "CLIP_WORK_ROUNDINGS", "TINY64", "round_down_subnormal",
    "clip_margin", "clip_scale", "clip_factors", "clip_bound", "bound_of_rule", "Release",
    "Ledger", "ReleaseSpec",
    "Calibration",
    "calibrate", "calibrate_schedule", "NOISE_ULPS", "check_noise_resolves",
    "calibrate_with_clip", "plan_fedsgd", "plan_fedavg", "plan_fedhybrid",
    "plan_fednewton", "plan_fednewton_iter",
    "plan_fedirls", "irls_shares", "SECOND_MOMENTS", "COUNT_SCALE", "count_share", "CURVATURE", "plan_clip_histogram",
    "NEWTON_ASSUMPTION", "GUARANTEE", "private_clip_bound", "clip_histogram", "histogram_grid", "clip_share",
    "clip_unaccounted", "clip_rule", "Fixed", "Quantile", "PrivateQuantile", "gdp_delta", "gdp_epsilon", "gdp_mu",
    "compose", "headroom", "apportion", "share_of",
]
