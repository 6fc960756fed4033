"""Profile the real-data fits: one client split, every method, per method and per phase.

Runs :func:`fedgdp.realdata.run_split` on one split of a real-data configuration (by
default ``config/mnist.yaml``'s layout on the MNIST files in ``data/mnist``) under
``cProfile``, and prints

- the fit time of each method (all folds, all mu; from the rows' ``elapsed_s``),
- the CPU time of each phase (:data:`PHASES`): the gradient steps, the noise draws,
  FedNewton's Newton step, the ridge fits of the non-private baselines, the folds'
  set-up and the scoring of the test folds,
- optionally (``--products``) the product micro-benchmark behind
  :data:`fedgdp.core.glm.SPARSE_MAX_DENSITY` and :data:`fedgdp.core.glm.ZERO_COLUMNS_MIN`: dense
  against CSR and nonzero-column products at one client's and at the pooled size.

``--out rows.parquet`` keeps the split's rows, so that two versions can be compared
(``python scripts/profile_realdata.py --compare A.parquet B.parquet``: the largest
difference of each numeric column). Run it on a quiet machine, one BLAS thread::

    python scripts/profile_realdata.py --task multiclass --out /tmp/mc.parquet
    python scripts/profile_realdata.py --products
    python scripts/profile_realdata.py --pooled     # NP-Pooled: dense against CSR design
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

__all__ = ["PHASES", "main", "phase_times", "profile_split"]

#: Phase of the profile -> the functions (``module:function``) whose cumulative time it
#: sums; none of them calls another of the list, so the phases do not overlap.
PHASES = {
    "gradient steps (clipped gradients of all methods)": ["clipping.py:stacked_gradients"],
    "noise draws": ["base.py:draw"],
    "FedNewton's Newton step (CG)": ["backend.py:newton_release"],
    "ridge fits (NP-LocalFit, NP-Pooled: trust-region Newton-CG)": ["solvers.py:ridge_fit"],
    "fold set-up (designs, norms, clipping bounds)": ["run.py:_setup"],
    "test-fold scores": ["metrics.py:client_metric"],
}


def phase_times(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative time (seconds) of each phase of :data:`PHASES` in a profile, and ``other``.

    Parameters
    ----------
    stats : pstats.Stats
        The profile of one split.

    Returns
    -------
    dict
        Phase name -> seconds; ``other`` holds the rest, ``total`` the whole.
    """
    out = {name: 0.0 for name in PHASES}
    total = 0.0
    for (path, _, func), (_, _, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        total += tottime
        key = f"{os.path.basename(path)}:{func}"
        for name, funcs in PHASES.items():
            if key in funcs:
                out[name] += cumtime
    out["other"] = total - sum(out.values())
    out["total"] = total
    return out


def profile_split(config: str, task: str, split: int, methods: str | None = None, out: str | None = None) -> dict:
    """Run and profile one split; print the tables; return the measurements.

    Parameters
    ----------
    config : str
        A configuration file with a ``realdata`` section (on top of the defaults).
    task : str
        ``binary`` or ``multiclass``.
    split : int
        The client split.
    methods : str or None
        Comma-separated methods (default: the configuration's).
    out : str or None
        Parquet file for the split's rows.

    Returns
    -------
    dict
        ``wall_s``, ``cpu_s``, ``methods`` (name -> fit seconds) and ``phases`` (name -> seconds).
    """
    from threadpoolctl import threadpool_limits

    from fedgdp.common.arguments import load_params_file
    from fedgdp.common.datasets import load_dataset
    from fedgdp.realdata import resolve, run_split, write_rows

    given = dict(load_params_file(config).get("realdata", {}))
    given = {k: v for k, v in given.items() if k not in ("tasks", "splits", "workers")}   # one process: profiled
    given["task"] = task
    if methods:
        given["methods"] = methods.split(",")
    p = resolve(given)
    data = load_dataset(p.dataset, p.path)
    prof = cProfile.Profile(time.process_time)      # CPU seconds: other work on the machine does not count
    t0, c0 = time.perf_counter(), time.process_time()
    with threadpool_limits(limits=1):
        prof.enable()
        rows = run_split(p, data, split)
        prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    fit = {}
    for r in rows:
        fit[r["method"]] = fit.get(r["method"], 0.0) + (r["elapsed_s"] if r["client"] == 0 else 0.0)
    phases = phase_times(pstats.Stats(prof))
    print(f"{p.dataset} {task}, split {split}: {data.N} images, d = {data.X.shape[1]}, m = {p.m}: "
          f"{wall:.1f} s wall, {cpu:.1f} CPU-s")
    print("\n| method | fit s (5 folds, all mu) |\n|---|---:|")
    for name, s in fit.items():
        print(f"| {name} | {s:.1f} |")
    print("\n| phase | s |\n|---|---:|")
    for name, s in phases.items():
        print(f"| {name} | {s:.1f} |")
    if out:
        write_rows(rows, p.as_dict(), out)
    return {"wall_s": wall, "cpu_s": cpu, "methods": fit, "phases": phases}


def products(path: str = "data/mnist") -> None:
    """Print dense, CSR and nonzero-column product times (best of 5, one thread) on MNIST's rows.

    Parameters
    ----------
    path : str
        The MNIST folder.
    """
    import numpy as np
    from scipy.sparse import csr_matrix
    from threadpoolctl import threadpool_limits

    from fedgdp.common.datasets import load_dataset
    from fedgdp.core.glm import NonzeroColumns

    X = load_dataset("mnist", path).X
    rng = np.random.default_rng(0)

    def best(f) -> float:
        f()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return 1e3 * min(times)

    print("| rows | k | X V dense ms | X V CSR ms | X V nonzero columns ms | X' C dense ms | X' C CSR ms "
          "| X' C nonzero columns ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|")
    with threadpool_limits(limits=1):
        for n in (700, 56000):
            D = np.ascontiguousarray(X[:n])
            S, Z = csr_matrix(D), NonzeroColumns.of(D)
            for k in (1, 10, 20):
                V, C = rng.standard_normal((D.shape[1], k)), rng.standard_normal((n, k))
                pairs = ((D, V), (S, V), (Z, V), (D.T, C), (S.T, C), (Z.T, C))
                times = [best(lambda a=a, b=b: a @ b) for a, b in pairs]
                print(f"| {n} | {k} | " + " | ".join(f"{t:.2f}" for t in times) + " |")
        print(f"\n{n} rows: {D.shape[1] - Z.cols.size} of {D.shape[1]} columns all zero; "
              f"the first 700 rows: {D.shape[1] - NonzeroColumns.of(D[:700]).cols.size}")


def pooled(path: str = "data/mnist") -> None:
    """Print NP-Pooled's ridge fit on split 0, fold 0 with the dense and with the CSR
    design: CPU seconds and the largest difference of the two parameters.

    Parameters
    ----------
    path : str
        The MNIST folder.
    """
    import numpy as np
    from threadpoolctl import threadpool_limits

    from fedgdp.common.datasets import layout_key, load_dataset, split_layout
    from fedgdp.core.glm import matrix_model, product_design
    from fedgdp.realdata import resolve
    from fedgdp.realdata.solvers import ridge_fit

    data = load_dataset("mnist", path)
    for task in ("binary", "multiclass"):
        p = resolve({"dataset": "mnist", "path": path, "m": 80, "n_min": 800, "task": task})
        key = layout_key(p.dataset, data.N, p.m, p.n_min, p.alpha, p.folds)
        layout = split_layout(p.base_seed, key, 0)
        model = matrix_model(task)
        Y = model.targets(data.targets(task))
        train = [layout.train_test(i, 0)[0] for i in range(layout.m)]
        X, Yp = np.vstack([data.X[tr] for tr in train]), np.vstack([Y[tr] for tr in train])
        fits, times = [], []
        with threadpool_limits(limits=1):
            for design in (X, product_design(X)):
                t0 = time.process_time()
                fits.append(ridge_fit(model, design, Yp, ridge=1e-3, maxiter=200))
                times.append(time.process_time() - t0)
        print(f"{task}: dense {times[0]:.1f} CPU-s, CSR {times[1]:.1f} CPU-s; largest difference of the "
              f"parameters {np.abs(fits[0] - fits[1]).max():.2g} (largest |theta| {np.abs(fits[0]).max():.3g})")


def compare(a: str, b: str) -> int:
    """Print the largest absolute difference of each numeric column of two split files.

    Parameters
    ----------
    a, b : str
        Parquet files written by ``--out``.

    Returns
    -------
    int
        0 when every column matches within 1e-9, 1 otherwise.
    """
    import numpy as np
    import pandas as pd

    A, B = pd.read_parquet(a), pd.read_parquet(b)
    worst = 0.0
    for col in ("value", "B", "mu_composed", "mu_certified"):
        x, y = A[col].to_numpy(float), B[col].to_numpy(float)
        same_nan = np.isnan(x) == np.isnan(y)
        with np.errstate(invalid="ignore"):          # inf - inf where both are inf: equal, masked below
            diff = np.where(np.isfinite(x) & np.isfinite(y), np.abs(x - y), np.where(x == y, 0.0, np.inf))
        d = float(np.nanmax(np.where(same_nan, diff, np.inf)))
        worst = max(worst, d)
        print(f"{col}: max |diff| {d:.3g}; rows differing {int(np.sum(diff > 0))} of {len(x)}")
    return 0 if worst <= 1e-9 else 1


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(prog="python scripts/profile_realdata.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="config/mnist.yaml", help="configuration (default config/mnist.yaml)")
    ap.add_argument("--task", default="multiclass", choices=["binary", "multiclass"])
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--methods", help="comma-separated methods (default: the configuration's)")
    ap.add_argument("--out", help="Parquet file for the split's rows")
    ap.add_argument("--products", action="store_true", help="the dense / CSR product micro-benchmark only")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --out files")
    ap.add_argument("--pooled", action="store_true", help="NP-Pooled's fit with the dense and the CSR design")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.products:
        products()
        return 0
    if args.pooled:
        pooled()
        return 0
    profile_split(args.config, args.task, args.split, args.methods, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
