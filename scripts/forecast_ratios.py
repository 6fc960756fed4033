"""The noise forecast against the noise fits carry: observed / forecast per cell and method.

The grids and helpers are tests/api/test_forecast.py's (``FAST_GRID``, ``LARGER_GRID``,
``_observed``, ``LINEAR_RANGE``): each cell's fits at the default rule's bound, 4 seeds, the
private fit minus the same fit at mu = 1e8. Prints one line per (cell, method), then the
range of the ratio within and beyond ``LINEAR_RANGE`` for each grid (docs/real-data.md,
"Before the data").

    python scripts/forecast_ratios.py            # both grids (a few minutes on 2 cores)
    python scripts/forecast_ratios.py --fast     # the fast grid only
    python scripts/forecast_ratios.py --data breast_cancer --mu 1   # one outside data set, every method

``--data`` loads, standardises and splits a data set as scripts/outside_data_defaults.py does
and compares each method's forecast with the same difference on those rows (4 seeds).
"""
from __future__ import annotations

import argparse
import runpy
import warnings
from pathlib import Path

import fedgdp

T = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tests" / "api" / "test_forecast.py"))


def ratios(grid) -> list[tuple]:
    """(observed / forecast, family, client rows, clients, mu, method, forecast, observed) per cell and method."""
    rows = []
    for family, sizes, mu in grid:
        t = fedgdp.forecast(family, sizes, 4, mu)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obs = T["_observed"](family, sizes, 4, mu, range(4), list(t.method), float(t.clip_bound.iloc[0]))
        for m, f in zip(t.method, t.noise_rmse):
            rows.append((round(obs[m] / f, 2), family, sizes[0], len(sizes), mu, m, round(f, 3), round(obs[m], 3)))
            print(*rows[-1], flush=True)
    return rows


def on_data(name: str, mu: float) -> None:
    """Forecast and observed noise of every method on an outside data set, at the default bound."""
    import math

    import numpy as np

    from fedgdp import FederatedGLM

    script = runpy.run_path(str(Path(__file__).resolve().parent / "outside_data_defaults.py"))
    X, y, cl, family, classes = script["load"](name)
    sizes = np.bincount(np.unique(cl, return_inverse=True)[1])
    kw = {"n_classes": len(classes)} if family == "multinomial" else {}
    t = fedgdp.forecast(family, sizes, X.shape[1], mu, **kw)
    for m, f in zip(t.method, t.noise_rmse):
        errs = []
        for seed in range(4):
            fit = dict(family=family, classes=classes, method=m, clip=float(t.clip_bound.iloc[0]), random_state=seed,
                       inference_share=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a = FederatedGLM(mu=mu, **fit).fit(X, y, cl).theta_
                b = FederatedGLM(mu=T["MU_REF"], **fit).fit(X, y, cl).theta_
            errs.append(np.mean((a - b) ** 2))
        obs = math.sqrt(np.mean(errs))
        print(f"{name} mu={mu:g} sizes {sizes.min()}-{sizes.max()} ({len(sizes)} clients), d={X.shape[1] + 1}: {m} "
              f"forecast {f:.3f} observed {obs:.3f} ratio {obs / f:.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="the fast grid only")
    ap.add_argument("--data", help="an outside data set of scripts/outside_data_defaults.py instead of the grids")
    ap.add_argument("--mu", type=float, default=1.0, help="mu for --data")
    args = ap.parse_args()
    if args.data:
        on_data(args.data, args.mu)
        return
    grids = {"fast": T["FAST_GRID"]} if args.fast else {"fast": T["FAST_GRID"], "larger": T["LARGER_GRID"]}
    for label, grid in grids.items():
        rows = ratios(grid)
        for side, part in (("within", [r for r in rows if r[6] <= T["LINEAR_RANGE"]]),
                           ("beyond", [r for r in rows if r[6] > T["LINEAR_RANGE"]])):
            if part:
                print(f"{label}: {len(part)} {side} LINEAR_RANGE, observed / forecast {min(part)[0]}-{max(part)[0]}; "
                      f"lowest {min(part)[1:]}, highest {max(part)[1:]}")


if __name__ == "__main__":
    main()
