"""``fedgdp bench``: the reference loop against the vectorised estimators.

Both run in one process on the same cell (same data, same noise draws): logistic,
m = 100, equal(400), p = 5, 100 replicates, all four methods, float64 by default.
The printed ratio is reference time / fast time; the largest difference between
the two estimates is printed too, as a check that they computed the same thing.
"""
from __future__ import annotations

import json
import platform
import time

import numpy as np

from .params import resolve
from .runner import run_cell

__all__ = ["run_bench"]


def run_bench(*, replicates: int = 100, m: int = 100, n: int = 400, model: str = "logistic",
              out: str | None = None) -> dict:
    """Time both implementations; print and return the measurements."""
    p = resolve({"model": model, "m": m, "sizes": f"equal({n})", "mu": 2.0, "K": 50})
    seeds = list(range(replicates))
    run_cell(p, seeds[:1])                      # warm-up (imports, tau1, caches)
    t0 = time.perf_counter()
    fast = run_cell(p, seeds)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = run_cell(p, seeds, impl="reference")
    t_ref = time.perf_counter() - t0
    diff = max(float(np.max(np.abs(np.subtract(a["theta_hat"], b["theta_hat"])))) for a, b in zip(fast, ref))
    result = {
        "cell": f"{model}, m={m}, equal({n}), p={len(p['beta_true'])}, mu=2, K=50, "
                f"{replicates} replicates, methods={','.join(p['methods'])}",
        "reference_s": round(t_ref, 3), "fast_s": round(t_fast, 3), "ratio": round(t_ref / t_fast, 2),
        "max_abs_diff": diff, "numpy": np.__version__, "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(f"cell       : {result['cell']}")
    print(f"reference  : {t_ref:8.2f} s")
    print(f"fast       : {t_fast:8.2f} s")
    print(f"ratio      : {t_ref / t_fast:8.1f} x (reference / fast)")
    print(f"max |diff| : {diff:.2e} (estimates, fast vs reference)")
    if out:
        with open(out, "w") as fh:
            json.dump(result, fh, indent=1)
    return result
