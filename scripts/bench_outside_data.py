"""Default fits on real data sets no one here wrote, in their natural clients: useful, warned, covered?

The data come from R packages (Debian ``apt-get install r-cran-aer r-cran-cardata``), exported by
``Rscript scripts/export_r_data.R DIR`` as CSV (y, client, then the features; not redistributed here).
Each set's features are standardised with its own means and sds; the family is logistic for a 0/1 y,
else Poisson. Two measurements per set:

- **Useful or warned** (`outside_data_defaults.cell`): ``--fits`` default fits (fresh noise) at each mu;
  a fit is useless at AUC < 0.6 (binary) or a mean deviance above twice the MLE's or above the
  intercept-only model's (counts), and warned when it raised a convergence, noise, clip or scale warning.
- **Covered** (`bench_reference_problems.run`, mu = 2): y drawn from the set's own MLE on its real
  (correlated) design, so the truth is known; 20 fits on one y draw (the first 5 for coverage, the
  reference problems' columns), and `FRESH` fits each on its own y draw (``coverage_fresh_y``: the
  sampling error varies as over studies; on one draw every fit shares that MLE's own miss).

    Rscript scripts/export_r_data.R /tmp/outside
    python scripts/bench_outside_data.py /tmp/outside docs/results/outside-data
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import bench_reference_problems as ref  # noqa: E402
import outside_data_defaults as od  # noqa: E402

#: Fits of the fresh-y coverage (each its own y draw and noise)
FRESH = 20


def load(path: Path):
    """(Z standardised, y, clients, family) of one exported CSV."""
    df = pd.read_csv(path)
    y = df.pop("y").to_numpy(float)
    clients = df.pop("client").astype(str).to_numpy()
    family = "logistic" if set(np.unique(y)) <= {0.0, 1.0} else "poisson"
    return od._standardise(df.to_numpy(float)), (y.astype(int) if family == "logistic" else y), clients, family


def known_truth(Z, y, clients, family, seed: int = 1):
    """The same design with y drawn from its own MLE (``seed``), and that MLE as the truth."""
    truth, _ = ref.mle(family, Z, y)
    eta = truth[0] + Z @ truth[1:]
    rng = np.random.default_rng(seed)
    y = (rng.random(len(y)) < 1 / (1 + np.exp(-eta))).astype(int) if family == "logistic" else rng.poisson(np.exp(eta))
    return Z, y, clients, truth


def fresh_coverage(Z, y, clients, family, fits: int = FRESH) -> dict:
    """Coverage of the truth when every fit draws its own y from the MLE (seeds 1..fits): the sampling error
    varies too, as it does over studies (one y draw shares one MLE's miss across all its fits)."""
    from fedgdp import FederatedGLM

    cover, converged = [], 0
    for r in range(1, fits + 1):
        Zr, yr, cl, truth = known_truth(Z, y, clients, family, seed=r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = FederatedGLM(family, classes=[0, 1] if family == "logistic" else None, mu=2,
                               random_state=r).fit(Zr, yr, cl)
            s = est.summary(withheld="show")
        cover.append((s["ci_low"].to_numpy() <= truth) & (truth <= s["ci_high"].to_numpy()))
        converged += est.fit_info_["status"] == "converged"
    return {"coverage_fresh_y": float(np.mean(cover)), "converged_fresh_y": f"{converged} of {fits}"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, help="the folder of exported CSVs")
    ap.add_argument("out", type=Path, help="folder for useful.csv, covered.csv and results.md")
    ap.add_argument("--fits", type=int, default=10, help="fits per (set, mu) cell")
    ap.add_argument("--mu", default="1,2,5", help="comma-separated mu of the usefulness cells")
    ap.add_argument("--only", default="", help="comma-separated set names (default: every CSV)")
    args = ap.parse_args(argv)
    paths = sorted(args.data.glob("*.csv"))
    if args.only:
        paths = [p for p in paths if p.stem in args.only.split(",")]
    if not paths:
        raise SystemExit(f"no CSV in {args.data}: make them with Rscript scripts/export_r_data.R {args.data}")
    useful, covered, start = [], [], time.time()
    for path in paths:
        Z, y, clients, family = load(path)
        sizes = np.unique(clients, return_counts=True)[1]
        about = {"data": path.stem, "family": family, "rows": len(y), "features": Z.shape[1],
                 "clients": f"{len(sizes)} of {sizes.min()}-{sizes.max()}"}
        for mu in (float(v) for v in args.mu.split(",")):
            classes = [0, 1] if family == "logistic" else None
            r = od.cell(path.stem, mu, None, args.fits, (Z, y, clients, family, classes))
            useful.append({**about, "mu": mu, "method": "/".join(sorted(r["methods"])), "fits": args.fits,
                           "useless": r["useless"], "useless_unwarned": r["useless"] - r["useless_warned"],
                           "refused": r["refused"], "warned": r["warned"],
                           "why": ", ".join(f"{k} {v}" for k, v in sorted(r["why"].items())) or "-",
                           "median_score": float(np.median(r["scores"])) if r["scores"] else float("nan"),
                           "mle_score": r["reference"], "null_score": r["null"]})
            print(useful[-1], flush=True)
        row = ref.run(f"{path.stem}, y from its MLE", family, known_truth(Z, y, clients, family))
        covered.append({**about, **{k: v for k, v in row.items() if k != "problem"},
                        **fresh_coverage(Z, y, clients, family)})
        print(covered[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    u, c = pd.DataFrame(useful), pd.DataFrame(covered)
    u.to_csv(args.out / "useful.csv", index=False)
    c.to_csv(args.out / "covered.csv", index=False)
    cols = ["data", "family", "rows", "features", "clients", "method", "max_bias_in_se", "bias_from_noise_5",
            "max_bias_in_se_20", "coverage", "converged", "coverage_fresh_y", "converged_fresh_y",
            "observed_over_at_fit", "observed_over_planned"]
    (args.out / "results.md").write_text(
        "# Default fits on real data sets in their natural clients\n\n"
        f"Made by `Rscript scripts/export_r_data.R {args.data}` and `python scripts/bench_outside_data.py "
        f"{args.data} {args.out}` ({time.time() - start:.0f} s). Useless: AUC < 0.6, or a mean deviance above "
        "twice the MLE's or the intercept-only model's; unwarned: without a convergence, noise, clip or scale "
        "warning.\n\n## Useful or warned\n\n" + u.to_markdown(index=False, floatfmt=".4g")
        + "\n\n## Covered (mu = 2, y drawn from each set's MLE on its real design)\n\n"
        + c[cols].to_markdown(index=False, floatfmt=".3g") + "\n")
    print((args.out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
