"""The reference problems of `FederatedGLM`'s defaults: is a default private fit the MLE plus noise?

Each problem: standardised Gaussian features (independent, or equicorrelated at 0.5 with
alternating-sign slopes), equal clients, a known truth; the non-private MLE on the pooled rows
(statsmodels' GLM, its standard errors) beside ``FederatedGLM(family, classes, mu=2)`` fitted 5
times with fresh noise (seeds 0-4, so the table reproduces). Reported per problem: the RMS error
against the truth (the fits' mean over the 5, and the MLE's), the largest |mean of the 5 fits - MLE|
over the coefficients in the MLE's standard errors (with 5 fits the noise alone gives about
``2.3 sd_noise / sqrt(5)``), the share of (coefficient, fit) pairs whose 95% interval covers the
truth, the statuses, CPU seconds per fit, and the forecast noise (`fedgdp.forecast`, before any data)
against the observed RMS of (fit - MLE).

    python scripts/bench_reference_problems.py docs/results/reference-problems
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):     # one BLAS thread: CPU s per fit
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

PROBLEMS = [
    # name, family, N, m, p, rho
    ("logistic, d = 20, m = 100, N = 10^5", "logistic", 10 ** 5, 100, 20, 0.0),
    ("logistic, d = 20, m = 100, N = 10^6", "logistic", 10 ** 6, 100, 20, 0.0),
    ("logistic, d = 20, m = 100, N = 10^5, correlated 0.5", "logistic", 10 ** 5, 100, 20, 0.5),
    ("poisson, d = 10, m = 50, N = 10^5, mean count 0.17", "poisson", 10 ** 5, 50, 10, 0.0),
]
#: Poisson's default is the paper's methods (docs/default-estimator.md, "Limits"): its problem is run twice,
#: at the default and with FedIRLS named
NAMED = {"poisson": "fedirls"}
FITS = 5


def make(family: str, N: int, m: int, p: int, rho: float, seed: int = 0):
    """Features (N, p), response (N,), clients (N,) and the truth (p + 1,) (intercept first)."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((N, p))
    if rho:
        Z = math.sqrt(1 - rho) * Z + math.sqrt(rho) * rng.standard_normal((N, 1))
    slopes = np.full(p, 0.5 if family == "logistic" else 0.2) * (np.resize([1, -1], p) if rho else 1)
    truth = np.r_[0.0 if family == "logistic" else -2.0, slopes]
    eta = truth[0] + Z @ truth[1:]
    y = (rng.random(N) < 1 / (1 + np.exp(-eta))).astype(int) if family == "logistic" else rng.poisson(np.exp(eta))
    return Z, y, np.repeat(np.arange(m), N // m), truth


def mle(family: str, Z, y):
    import statsmodels.api as sm

    fam = sm.families.Binomial() if family == "logistic" else sm.families.Poisson()
    res = sm.GLM(y, sm.add_constant(Z), family=fam).fit()
    return np.asarray(res.params), np.asarray(res.bse)


def run(name, family, N, m, p, rho, method="auto") -> dict:
    from fedgdp import FederatedGLM

    Z, y, clients, truth = make(family, N, m, p, rho)
    ref, se = mle(family, Z, y)
    coefs, cover, status, cpu = [], [], [], []
    for r in range(FITS):
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = FederatedGLM(family, classes=[0, 1] if family == "logistic" else None, mu=2, method=method,
                               random_state=r).fit(Z, y, clients)
            s = est.summary(withheld="show")
        cpu.append(time.process_time() - t0)
        coefs.append(est.theta_[:, 0])
        cover.append((s["ci_low"].to_numpy() <= truth) & (truth <= s["ci_high"].to_numpy()))
        status.append(est.fit_info_["status"])
    coefs = np.array(coefs)
    import fedgdp

    sizes = np.bincount(clients)
    forecast_rmse = float(fedgdp.forecast(family, sizes, p, 2.0, method=est.method_)["noise_rmse"].iloc[0])
    observed = float(np.sqrt(np.mean((coefs - ref) ** 2)))
    return {"problem": name, "method": est.method_ + (" (named)" if method != "auto" else ""),
            "error_vs_truth": float(np.sqrt(np.mean((coefs.mean(0) - truth) ** 2))),
            "error_per_fit": float(np.sqrt(np.mean((coefs - truth) ** 2))),
            "mle_error": float(np.sqrt(np.mean((ref - truth) ** 2))),
            "max_bias_in_se": float(np.max(np.abs(coefs.mean(0) - ref) / se)),
            "coverage": float(np.mean(cover)), "converged": f"{status.count('converged')} of {FITS}",
            "forecast_rmse": forecast_rmse, "observed_rmse_vs_mle": observed,
            "observed_over_forecast": observed / forecast_rmse,
            "cpu_s_per_fit": float(np.median(cpu))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder for results.csv and results.md")
    args = ap.parse_args(argv)
    rows = [run(*prob) for prob in PROBLEMS]
    rows += [run(*prob, method=NAMED[prob[1]]) for prob in PROBLEMS if prob[1] in NAMED]
    df = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "results.csv", index=False)
    (args.out / "results.md").write_text(
        "# Reference problems: default `FederatedGLM` fits at mu = 2 against the MLE\n\n"
        f"Made by `python scripts/bench_reference_problems.py {args.out}` ({FITS} fits per problem, seeds 0-"
        f"{FITS - 1}; error: RMS over the coefficients; bias: the largest |mean of the fits - MLE| in the MLE's "
        "standard errors; coverage: 95% intervals covering the truth, over (coefficient, fit) pairs).\n\n"
        + df.to_markdown(index=False, floatfmt=".4g") + "\n")
    print(df.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
