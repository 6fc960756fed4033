"""The noise forecast against the noise fits carry: observed / forecast per cell and method.

The grids and helpers are tests/test_forecast.py's (``FAST_GRID``, ``LARGER_GRID``,
``_observed``, ``LINEAR_RANGE``): each cell's fits at the default rule's bound, 4 seeds, the
private fit minus the same fit at mu = 1e8. Prints one line per (cell, method), then the
range of the ratio within and beyond ``LINEAR_RANGE`` for each grid (docs/real-data.md,
"Before the data").

    python scripts/forecast_ratios.py            # both grids (a few minutes on 2 cores)
    python scripts/forecast_ratios.py --fast     # the fast grid only
"""
from __future__ import annotations

import argparse
import runpy
import warnings
from pathlib import Path

import fedgdp

T = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tests" / "test_forecast.py"))


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="the fast grid only")
    args = ap.parse_args()
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
