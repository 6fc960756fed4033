"""Default private fits on data no one here wrote: how many are useless, and how many of those warn.

Issue 46's done-when measurement. Three data sets bundled with installed libraries (no network):

- ``digits``: scikit-learn's ``load_digits`` (1,797 rows, 10 classes, softmax), the 61
  non-constant pixels;
- ``breast_cancer``: scikit-learn's ``load_breast_cancer`` (569 rows, binary, logistic), 30 features;
- ``randhie``: statsmodels' bundled RAND health-insurance data, ``mdvis`` (doctor visits, counts,
  Poisson) on its 9 covariates, a seeded subsample of 3,500 of its 20,190 rows.

Features are standardised (with the data's own means and sds: a scaling outside the ledger,
as ``fedgdp fit --standardize data`` declares). Rows go to clients by a seeded Dirichlet(1)
draw of the client shares (10, 5 and 8 clients of unequal sizes), at least 20 rows each.

For each data set, mu and clipping setting, ``--fits`` fits with fresh noise (no method, no
``random_state``; ``classes`` given). A fit is *useless* when, in sample, its AUC < 0.6
(binary), accuracy < 0.5 (10 classes) or mean Poisson deviance > 2 times the non-private
pooled fit's (``np_pooled``), the issue's definitions, and (counts) also a mean deviance above the
intercept-only model's, a stricter reading this measurement added. A useless fit *warned* when it raised a
``ConvergenceWarning`` (``NoiseDominatedWarning`` included: noise, or the forecast before the
fit), a ``ClipWarning`` or a ``FeatureScaleWarning``; a refused fit (ValueError) counts as
refused. Clip settings: the default (``clip=None``, the public rule), and fixed public bounds
for comparison.

    python scripts/outside_data_defaults.py            # 20 fits per cell (about 10 min on 2 cores)
    python scripts/outside_data_defaults.py --fits 5   # quicker
"""
from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

from fedgdp import FederatedGLM
from fedgdp.api.diagnostics import ClipWarning, ConvergenceWarning, FeatureScaleWarning, NoiseDominatedWarning

CLIPS = {"default": None, "B=1": 1.0, "B=3": 3.0, "B=20": 20.0}


def _why(w) -> str | None:
    """What a caught warning says is wrong: forecast, noise, convergence, clip, scale (None: none of these)."""
    if issubclass(w.category, NoiseDominatedWarning):
        return "forecast" if str(w.message).startswith("forecast") else "noise"
    if issubclass(w.category, ConvergenceWarning):
        return "convergence"
    return {ClipWarning: "clip", FeatureScaleWarning: "scale"}.get(w.category)


def _clients(n: int, m: int, seed: int, least: int = 20) -> np.ndarray:
    """A seeded Dirichlet(1) split of n rows over m clients, at least ``least`` rows each."""
    rng = np.random.default_rng(seed)
    while True:
        share = rng.dirichlet(np.ones(m))
        cl = rng.choice(m, size=n, p=share)
        if np.bincount(cl, minlength=m).min() >= least:
            return cl


def _standardise(X: np.ndarray) -> np.ndarray:
    X = X[:, X.std(axis=0) > 0]
    return (X - X.mean(axis=0)) / X.std(axis=0)


def load(name: str):
    """(X standardised, y, clients, family, classes) of a bundled data set."""
    if name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        return _standardise(d.data), d.target, _clients(len(d.target), 10, 0), "multinomial", list(range(10))
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        d = load_breast_cancer()
        return _standardise(d.data), d.target, _clients(len(d.target), 5, 1), "logistic", [0, 1]
    if name == "randhie":
        from statsmodels.datasets import randhie

        df = randhie.load_pandas().data
        rows = np.sort(np.random.default_rng(2).choice(len(df), 3500, replace=False))
        X, y = df.drop(columns="mdvis").to_numpy(float)[rows], df["mdvis"].to_numpy(float)[rows]
        return _standardise(X), y, _clients(len(y), 8, 2), "poisson", None
    raise ValueError(f"unknown data set {name!r}")


def _deviance(y: np.ndarray, m: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(y > 0, y * np.log(y / m), 0.0)
    return float(np.mean(2 * (term - (y - m))))


def score(est, X, y) -> float:
    """AUC (binary), accuracy (classes) or mean deviance (counts), in sample."""
    if est.family == "logistic":
        from sklearn.metrics import roc_auc_score

        return float(roc_auc_score(y, est.predict_proba(X)[:, 1]))
    if est.family == "multinomial":
        return float(np.mean(est.predict(X) == y))
    return _deviance(y, est.predict(X))


def null_score(family: str, y: np.ndarray) -> float:
    """The intercept-only model's score: AUC 0.5, the majority class's accuracy, the deviance at the mean count."""
    if family == "logistic":
        return 0.5
    if family == "multinomial":
        return float(np.max(np.bincount(y.astype(int))) / len(y))
    return _deviance(y, np.full(len(y), y.mean()))


def useless(family: str, value: float, reference: float, null: float) -> bool:
    """The issue's definitions of a useless fit; counts also when worse than the intercept-only model."""
    if not math.isfinite(value):
        return True
    if family == "logistic":
        return value < 0.6
    if family == "multinomial":
        return value < 0.5
    return value > 2 * reference or value > null


def cell(name: str, mu: float, clip, fits: int, data=None) -> dict:
    """``fits`` default fits of one (data set, mu, clip): counts of useless, warned, refused and the reasons."""
    X, y, cl, family, classes = data if data is not None else load(name)
    ref = score(FederatedGLM(family=family, classes=classes, method="np_pooled", mu=math.inf).fit(X, y, cl), X, y)
    null = null_score(family, y)
    out = {"useless": 0, "useless_warned": 0, "refused": 0, "warned": 0, "why": {}, "scores": [], "methods": set()}
    for _ in range(fits):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                est = FederatedGLM(family=family, classes=classes, mu=mu, clip=clip).fit(X, y, cl)
            except ValueError:
                out["refused"] += 1
                continue
        reasons = {_why(w) for w in caught} - {None}
        value = score(est, X, y)
        out["scores"].append(value)
        out["methods"].add(est.method_)
        out["warned"] += bool(reasons)
        if useless(family, value, ref, null):
            out["useless"] += 1
            out["useless_warned"] += bool(reasons)
        for r in reasons:
            out["why"][r] = out["why"].get(r, 0) + 1
    out["reference"], out["null"] = ref, null
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fits", type=int, default=20, help="fits per cell (fresh noise each)")
    ap.add_argument("--data", default="breast_cancer,digits,randhie", help="comma-separated data sets")
    ap.add_argument("--mu", default="1,2,5", help="comma-separated mu")
    ap.add_argument("--clips", default=",".join(CLIPS), help=f"comma-separated of {', '.join(CLIPS)}")
    args = ap.parse_args(argv)
    print(f"{args.fits} fits per cell; useless: AUC < 0.6 (binary), accuracy < 0.5 (10 classes), mean deviance > 2x "
          "np_pooled's or > the intercept-only model's (counts), in sample; "
          "warned: a ConvergenceWarning, NoiseDominatedWarning, ClipWarning or FeatureScaleWarning\n")
    print("| data | clip | mu | method | useless | of which warned | refused | warned (all) | why | median score "
          "(non-private; intercept only) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    start = time.time()
    for name in args.data.split(","):
        data = load(name)
        for clip_name in args.clips.split(","):
            for mu in (float(v) for v in args.mu.split(",")):
                r = cell(name, mu, CLIPS[clip_name], args.fits, data)
                why = ", ".join(f"{k} {v}" for k, v in sorted(r["why"].items())) or "-"
                med = f"{np.median(r['scores']):.3g}" if r["scores"] else "-"
                print(f"| {name} | {clip_name} | {mu:g} | {'/'.join(sorted(r['methods'])) or '-'} | {r['useless']} "
                      f"| {r['useless_warned']} | {r['refused']} | {r['warned']} | {why} | {med} "
                      f"({r['reference']:.3g}; {r['null']:.3g}) |",
                      flush=True)
    print(f"\n{time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
