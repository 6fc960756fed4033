"""The reference problems of `FederatedGLM`'s defaults: is a default private fit the MLE plus noise?

Each problem: standardised Gaussian features (independent, or equicorrelated at 0.5 with
alternating-sign slopes), equal clients, a known truth; the non-private MLE on the pooled rows
(statsmodels' GLM, its standard errors) beside ``FederatedGLM(family, classes, mu=2)`` fitted 5
times with fresh noise (seeds 0-4, so the table reproduces). Reported per problem: the RMS error
against the truth (the fits' mean over the 5, and the MLE's), the largest |mean of the 5 fits - MLE|
over the coefficients in the MLE's standard errors (with 5 fits the noise alone gives about
``2.3 sd_noise / sqrt(5)``), the share of (coefficient, fit) pairs whose 95% interval covers the
truth, the statuses, CPU seconds per fit, and the observed RMS of (fit - MLE) over two statements of
the noise: the forecast (`fedgdp.forecast`, public inputs only, before any data: the curvature at
theta = 0, and at the outcome's mean and linear predictor's sd that a planner who guessed them right
would give) and the fit's own (``fit_info_["noise_se"]``: the noise through the curvature the fit
released, costing no privacy).

Is the bias systematic? Beside the 5 fits' largest |mean - MLE|, the table gives what the noise alone
makes of it (``bias_from_noise_5``: the median, over normal draws with the fits' own noise sds, of
the largest |mean of 5 draws| in se; with no systematic bias the observed value is near it), and the
same bias over 20 fits (``max_bias_in_se_20``), which the noise shrinks by about half while a
systematic bias stays.

Then the same on outside data (`outside`): a real design in its natural clients, with its real y (the
truth unknown: no coverage) and with y drawn from its own MLE (a correlated real design, known truth).

    python scripts/bench_reference_problems.py docs/results/reference-problems

``--family poisson`` (or ``logistic``) runs that family's rows only, into a folder of their own (the
committed results are the full run's).
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
#: Poisson's problem is run twice: at the default (FedIRLS) and with FedHybrid named, the paper's method that
#: was the default before the count scale (docs/default-estimator.md)
NAMED = {"poisson": "fedhybrid"}
FITS = 5
#: The fits of the bias check (the first `FITS` are the table's)
FITS_BIAS = 20


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


def outside(name: str):
    """A real design from a bundled library (no network), features standardised with its own means and
    sds, split into its natural clients: (family, Z, y, clients).

    - ``fair``: statsmodels' affairs survey (6,366 rows), y = any affair, 7 covariates, clients = the
      wife's occupation (6 groups of 41-2,783 rows);
    - ``randhie``: statsmodels' RAND health-insurance data, doctor visits (counts up to 77, overdispersed)
      on its 9 covariates, a seeded 3,500-row subsample in 8 seeded clients
      (`scripts/outside_data_defaults.py`'s split).
    """
    if name == "randhie":
        sys.path.insert(0, str(Path(__file__).parent))
        import outside_data_defaults as od

        Z, y, clients, family, _ = od.load("randhie")
        return family, Z, y, clients
    import statsmodels.api as sm

    df = sm.datasets.fair.load_pandas().data
    cols = ["rate_marriage", "age", "yrs_married", "children", "religious", "educ", "occupation_husb"]
    Z = df[cols].to_numpy(float)
    Z = (Z - Z.mean(0)) / Z.std(0)
    return "logistic", Z, (df["affairs"].to_numpy() > 0).astype(int), df["occupation"].to_numpy().astype(int)


def problem(name, family, N, m, p, rho):
    """A reference problem's data and truth."""
    return make(family, N, m, p, rho)


def outside_problem(name, data, known_truth):
    """An outside data set, its real y (truth unknown) or y drawn from its MLE (known truth) on its real design."""
    family, Z, y, clients = outside(data)
    if not known_truth:
        return Z, y, clients, None
    truth, _ = mle(family, Z, y)
    eta = truth[0] + Z @ truth[1:]
    rng = np.random.default_rng(1)
    y = (rng.random(len(y)) < 1 / (1 + np.exp(-eta))).astype(int) if family == "logistic" else rng.poisson(np.exp(eta))
    return Z, y, clients, truth


OUTSIDE = [
    # name, data, known truth
    ("fair (affairs, 6,366 rows, 6 occupation clients), real y", "fair", False),
    ("fair's real design, y drawn from its MLE (known truth)", "fair", True),
    ("randhie (doctor visits, 3,500 rows, 8 clients), real y", "randhie", False),
]


def run(name, family, data, method="auto") -> dict:
    from fedgdp import FederatedGLM

    Z, y, clients, truth = data
    ref, se = mle(family, Z, y)
    coefs, cover, status, cpu, noise_se = [], [], [], [], []
    for r in range(FITS_BIAS):
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = FederatedGLM(family, classes=[0, 1] if family == "logistic" else None, mu=2, method=method,
                               random_state=r).fit(Z, y, clients)
            s = est.summary(withheld="show")
        cpu.append(time.process_time() - t0)
        coefs.append(est.theta_[:, 0])
        if truth is not None:
            cover.append((s["ci_low"].to_numpy() <= truth) & (truth <= s["ci_high"].to_numpy()))
        status.append(est.fit_info_["status"])
        noise_se.append(np.asarray(est.fit_info_["noise_se"], float).ravel())
    everything, coefs, noise_se = np.array(coefs), np.array(coefs[:FITS]), np.array(noise_se)
    cover, status = cover[:FITS], status[:FITS]
    import fedgdp

    sizes = np.unique(clients, return_counts=True)[1]
    forecast_rmse = float(fedgdp.forecast(family, sizes, Z.shape[1], 2.0, method=est.method_)["noise_rmse"].iloc[0])
    beta = truth if truth is not None else ref          # a planner who guessed the outcome's mean and signal right
    eta = beta[0] + Z @ beta[1:]
    planned = float(fedgdp.forecast(family, sizes, Z.shape[1], 2.0, method=est.method_, signal_sd=float(eta.std()),
                                    outcome_mean=float(np.mean(1 / (1 + np.exp(-eta)) if family == "logistic"
                                                               else np.exp(eta))))["noise_rmse"].iloc[0])
    observed = float(np.sqrt(np.mean((coefs - ref) ** 2)))
    at_fit = float(np.sqrt(np.mean(noise_se[:FITS] ** 2)))
    sd = np.sqrt(np.mean(noise_se ** 2, axis=0))              # each coefficient's noise sd, as the fits state it
    draws = np.random.default_rng(0).standard_normal((4000, FITS, len(sd))) * sd
    noise_only = float(np.median(np.max(np.abs(draws.mean(axis=1)) / se, axis=1)))
    return {"problem": name, "method": est.method_ + (" (named)" if method != "auto" else ""),
            "error_vs_truth": float(np.sqrt(np.mean((coefs.mean(0) - truth) ** 2))) if truth is not None else math.nan,
            "error_per_fit": float(np.sqrt(np.mean((coefs - truth) ** 2))) if truth is not None else math.nan,
            "mle_error": float(np.sqrt(np.mean((ref - truth) ** 2))) if truth is not None else math.nan,
            "max_bias_in_se": float(np.max(np.abs(coefs.mean(0) - ref) / se)),
            "bias_from_noise_5": noise_only,
            "max_bias_in_se_20": float(np.max(np.abs(everything.mean(0) - ref) / se)),
            "coverage": float(np.mean(cover)) if cover else math.nan,
            "converged": f"{status.count('converged')} of {FITS}",
            "forecast_rmse": forecast_rmse, "observed_rmse_vs_mle": observed,
            "observed_over_forecast": observed / forecast_rmse,
            "forecast_planned_rmse": planned, "observed_over_planned": observed / planned,
            "noise_rmse_at_fit": at_fit, "observed_over_at_fit": observed / at_fit,
            "cpu_s_per_fit": float(np.median(cpu))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder for results.csv and results.md")
    ap.add_argument("--family", choices=("logistic", "poisson"), help="run this family's rows only")
    args = ap.parse_args(argv)
    keep = (lambda family: True) if args.family is None else (lambda family: family == args.family)
    problems = [prob for prob in PROBLEMS if keep(prob[1])]
    rows = [run(prob[0], prob[1], problem(*prob)) for prob in problems]
    rows += [run(prob[0], prob[1], problem(*prob), method=NAMED[prob[1]]) for prob in problems if prob[1] in NAMED]
    rows += [run(name, outside(data)[0], outside_problem(name, data, known)) for name, data, known in OUTSIDE
             if keep(outside(data)[0])]
    df = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "results.csv", index=False)
    (args.out / "results.md").write_text(
        "# Reference problems: default `FederatedGLM` fits at mu = 2 against the MLE\n\n"
        f"Made by `python scripts/bench_reference_problems.py {args.out}"
        f"{'' if args.family is None else ' --family ' + args.family}` ({FITS} fits per problem, seeds 0-"
        f"{FITS - 1}; error: RMS over the coefficients; bias: the largest |mean of the fits - MLE| in the MLE's "
        "standard errors, `bias_from_noise_5` what the noise alone makes of it, `max_bias_in_se_20` over seeds "
        f"0-{FITS_BIAS - 1}; coverage: 95% intervals covering the truth, over (coefficient, fit) pairs; "
        "`forecast_rmse`: the noise forecast before any data at theta = 0, `forecast_planned_rmse`: the same "
        "given the outcome's mean and the linear predictor's sd (`fedgdp.forecast(..., outcome_mean=, signal_sd=)`, "
        "as a planner who guessed them right would: from the truth, or the MLE where the truth is unknown), "
        "`noise_rmse_at_fit`: the fits' own statement of it; each against the observed RMS of fit - MLE).\n\n"
        + df.to_markdown(index=False, floatfmt=".4g") + "\n")
    print(df.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
