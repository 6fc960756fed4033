"""Empirical coverage of FederatedGLM.summary()'s intervals on known-truth data.

``python scripts/coverage_study.py --reps 200``: logistic regression with a known truth
(``TRUTH``: intercept then 3 slopes), 10 clients of 1,000 rows, standard normal
features, mu = 2, the estimator's default settings (``method="auto"``, the public clip,
``inference_share=0.1``); per coefficient the share of replicates whose 95% interval
covers the truth, with its Monte Carlo standard error ``sqrt(c (1 - c) / R)``. Each
replicate draws new data and fresh noise from ``--seed`` and its index (a simulation: the
seeds are known, which voids no guarantee of anybody's data). The issue's coverage study
(issue 47, item 3: a grid of m, n_i, mu and methods in the pipeline) is larger; this
is its one reference cell.
"""
from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

TRUTH = np.array([-0.5, 0.8, -0.4, 0.2])          # intercept, x0, x1, x2


def replicate(r: int, *, seed: int, m: int, n: int, mu: float, method: str, cov_type: str, alpha: float,
              family: str = "logistic") -> tuple[np.ndarray, np.ndarray]:
    """One replicate: (covered (d,), width (d,))."""
    from fedgdp import FederatedGLM

    rng = np.random.default_rng([seed, r])
    X = rng.standard_normal((m * n, len(TRUTH) - 1))
    s = TRUTH[0] + X @ TRUTH[1:]
    if family == "logistic":
        y = (rng.random(m * n) < 1.0 / (1.0 + np.exp(-s))).astype(int)
        kw = {"classes": [0, 1]}
    else:
        y = rng.poisson(np.exp(s))
        kw = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(family=family, mu=mu, method=method, random_state=np.random.SeedSequence([seed, r, 1]), **kw)
        est.fit(X, y, np.repeat(np.arange(m), n))
        ci = est.conf_int(alpha=alpha, cov_type=cov_type).to_numpy()
    return (ci[:, 0] <= TRUTH) & (TRUTH <= ci[:, 1]), ci[:, 1] - ci[:, 0], est.method_


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--rows", type=int, default=1000, help="rows per client")
    ap.add_argument("--mu", type=float, default=2.0)
    ap.add_argument("--family", default="logistic", choices=["logistic", "poisson"])
    ap.add_argument("--method", default="auto")
    ap.add_argument("--cov-type", dest="cov_type", default="model", choices=["model", "robust"])
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args(argv)
    t0 = time.time()
    cov, width, methods = [], [], set()
    for r in range(args.reps):
        c, w, meth = replicate(r, seed=args.seed, m=args.clients, n=args.rows, mu=args.mu, method=args.method,
                               cov_type=args.cov_type, alpha=args.alpha, family=args.family)
        cov.append(c)
        width.append(w)
        methods.add(meth)
    cov, width = np.array(cov, float), np.array(width)
    R = len(cov)
    print(f"coverage of {100 * (1 - args.alpha):g}% intervals ({args.cov_type}): {args.family}, "
          f"{args.clients} clients x {args.rows} rows, mu = {args.mu:g}, method {', '.join(sorted(methods))}, "
          f"R = {R} replicates ({time.time() - t0:.0f} s)")
    print(f"{'coef':>12} {'truth':>7} {'coverage':>9} {'MC se':>7} {'mean width':>11}")
    for j, name in enumerate(["(intercept)", "x0", "x1", "x2"]):
        c = cov[:, j].mean()
        print(f"{name:>12} {TRUTH[j]:7.3g} {c:9.3f} {math.sqrt(c * (1 - c) / R):7.3f} {width[:, j].mean():11.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
