"""The fast estimators against the loop oracle on one cell: CPU seconds and their ratio.

Both implementations run in one process on the same cell (same data, same noise
draws): by default logistic, m = 100, equal(400), p = 5, mu = 2, K = 50, 100
replicates, all four methods, float64. The ratio is oracle CPU time / fast CPU time
(``time.process_time``, so other processes on the machine do not count); the largest
difference between the two sets of estimates is printed too, as a check that they
computed the same thing.

The oracle (``tests/oracle.py``) is a test module, not part of the installed package,
so this script lives in the repository beside the tests rather than in ``fedgdp``
(in ``scripts/``: ``benchmarks/`` holds the workflow's per-rule timings, not tracked)::

    python scripts/speedup.py                 # the default cell
    python scripts/speedup.py --replicates 20 --m 50 --out speedup.json

``fedgdp bench --suite`` (in the package) times every study's cells, without the oracle.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["load_oracle", "main", "run_speedup"]

#: The tests folder, where the loop oracle lives (``tests/oracle.py``).
TESTS = Path(__file__).resolve().parents[1] / "tests"


def load_oracle() -> dict:
    """The keyword arguments of :func:`fedgdp.simulation.run.run_cell` that run the loop oracle."""
    # The oracle is a test module, outside the installed package: put the tests folder
    # on the import path so that ``import oracle`` finds it (pytest does the same for the tests).
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from oracle import ORACLE

    return ORACLE


def run_speedup(*, replicates: int = 100, m: int = 100, n: int = 400, model: str = "logistic",
                out: str | None = None) -> dict:
    """Time the fast code and the loop oracle on one cell; print and return the measurements.

    Parameters
    ----------
    replicates : replicates of the cell (seeds 0..replicates-1)
    m, n : clients and the size of each (``equal(n)``)
    model : ``logistic`` or ``poisson``
    out : optional JSON file for the measurements

    Returns
    -------
    dict with ``cell``, ``reference_s`` and ``fast_s`` (CPU seconds), ``ratio``, the wall
    times, ``clock``, ``max_abs_diff`` (estimates, fast vs oracle) and the versions.
    """
    import numpy as np

    from fedgdp.commands.bench import timed, versions, write_json
    from fedgdp.simulation.params import resolve
    from fedgdp.simulation.run import run_cell

    oracle = load_oracle()
    p = resolve({"model": model, "m": m, "sizes": f"equal({n})", "mu": 2.0, "K": 50})
    seeds = list(range(replicates))
    run_cell(p, seeds[:1])                      # warm-up (imports, tau1, compiled kernels)
    fast, t_fast, w_fast = timed(run_cell, p, seeds)
    ref, t_ref, w_ref = timed(run_cell, p, seeds, **oracle)
    diff = max(float(np.max(np.abs(np.subtract(a["theta_hat"], b["theta_hat"])))) for a, b in zip(fast, ref))
    result = {
        "cell": f"{model}, m={m}, equal({n}), p={len(p.beta_true)}, mu=2, K=50, "
                f"{replicates} replicates, methods={','.join(p.methods)}",
        "reference_s": round(t_ref, 3), "fast_s": round(t_fast, 3), "ratio": round(t_ref / t_fast, 2),
        "reference_wall_s": round(w_ref, 3), "fast_wall_s": round(w_fast, 3),
        "clock": "process_time (CPU seconds of this process)",
        "max_abs_diff": diff, **versions(),
    }
    print(f"cell       : {result['cell']}")
    print(f"oracle     : {t_ref:8.2f} CPU-s  ({w_ref:.2f} s wall)")
    print(f"fast       : {t_fast:8.2f} CPU-s  ({w_fast:.2f} s wall)")
    print(f"ratio      : {t_ref / t_fast:8.1f} x (oracle / fast, CPU time)")
    print(f"max |diff| : {diff:.2e} (estimates, fast vs oracle)")
    write_json(result, out)
    return result


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python scripts/speedup.py [--replicates R] [--m M] [--n N] [--model X] [--out F.json]``."""
    # One BLAS thread, as the ``fedgdp`` commands run (set before numpy is imported).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from fedgdp.common.arguments import output_path

    ap = argparse.ArgumentParser(prog="python scripts/speedup.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=100, help="replicates (default 100)")
    ap.add_argument("--m", type=int, default=100, help="clients (default 100)")
    ap.add_argument("--n", type=int, default=400, help="samples per client (default 400)")
    ap.add_argument("--model", default="logistic", choices=["logistic", "poisson"])
    ap.add_argument("--out", type=output_path(".json"), help="optional JSON file for the measurements")
    args = ap.parse_args(argv)
    run_speedup(replicates=args.replicates, m=args.m, n=args.n, model=args.model, out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
