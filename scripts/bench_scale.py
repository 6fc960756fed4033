"""`FederatedGLM`'s default fit at scale beside scikit-learn and statsmodels on the same rows (issue 62).

Logistic, d = 20 standardised Gaussian features, a known truth, rows dealt to m equal clients at random.
Each (tool, N, m) runs in its own fresh process with one BLAS thread, and reports the CPU seconds of the
fit alone (``time.process_time`` around the call, after a small warm-up fit that loads every lazy import)
and the peak memory the fit adds: the process's peak resident set is reset just before the fit
(``/proc/self/clear_refs``, 5) and the reading is ``VmHWM`` after it minus ``VmRSS`` before it.

The tools:

- ``fedgdp``: ``FederatedGLM("logistic", classes=[0, 1], mu=2, random_state=0).fit(X, y, clients)``, the
  default method (``method="auto"``) on the public label domain;
- ``sklearn``: ``LogisticRegression(solver="lbfgs")`` (its defaults: C = 1, max_iter = 100) on the pooled rows;
- ``statsmodels``: ``sm.GLM(y, add_constant(X), family=Binomial()).fit()`` (IRLS) on the pooled rows,
  up to N = 10^6 (at 10^7 its design copies exceed this machine's memory; issue 62).

The pooled tools ignore the clients, so they run once per N. Every run is repeated (``--repeat``, default 2)
and both readings are written. Usage::

    python scripts/bench_scale.py docs/results/scale-2026-12-07b           # the grid below
    python scripts/bench_scale.py OUT --grid quick                          # N = 10^5 only (a smoke run)
    PYTHONPATH=/path/to/other/checkout/src python scripts/bench_scale.py OUT    # another version of fedgdp

Writes ``OUT/scale.csv`` (one row per run) and ``OUT/scale.md`` (the table and the ratios).
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):     # one BLAS thread
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

D = 20
GRIDS = {
    # (N, m) for fedgdp; the pooled tools run once per N (statsmodels up to STATSMODELS_MAX_N)
    "full": [(10 ** 5, 10), (10 ** 5, 100), (10 ** 5, 1000), (10 ** 6, 10), (10 ** 6, 100), (10 ** 6, 1000),
             (10 ** 6, 10 ** 4), (4 * 10 ** 6, 100), (10 ** 7, 100)],
    "quick": [(10 ** 5, 10), (10 ** 5, 100), (10 ** 5, 1000)],
}
STATSMODELS_MAX_N = 10 ** 6


def make_data(N: int, m: int, seed: int = 0):
    """Standardised Gaussian features (N, D), 0/1 labels from a logistic truth, m equal clients at random."""
    rng = np.random.default_rng([seed, N, m])
    X = rng.standard_normal((N, D))
    beta = rng.standard_normal(D) / np.sqrt(D)
    eta = X @ beta
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    del eta
    clients = rng.permutation(np.arange(N) % m)
    return X, y, clients


def _status(key: str) -> int:
    """A ``/proc/self/status`` reading in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _fitter(tool: str):
    """The fit call of ``tool`` (imports done here, before the timing)."""
    if tool == "fedgdp":
        from fedgdp import FederatedGLM

        return lambda X, y, c: FederatedGLM("logistic", classes=[0, 1], mu=2, random_state=0).fit(X, y, c)
    if tool == "sklearn":
        from sklearn.linear_model import LogisticRegression

        return lambda X, y, c: LogisticRegression(solver="lbfgs").fit(X, y)
    if tool == "statsmodels":
        import statsmodels.api as sm

        return lambda X, y, c: sm.GLM(y, sm.add_constant(X), family=sm.families.Binomial()).fit()
    raise ValueError(f"unknown tool {tool!r}")


def run_one(tool: str, N: int, m: int) -> dict:
    """One timed fit in this process: CPU seconds and the peak memory it adds."""
    fit = _fitter(tool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit(*make_data(2000, 10, seed=1))            # warm-up: lazy imports, compiled kernels
        X, y, clients = make_data(N, m)
        rss0 = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")      # reset the peak resident set to the current one
        t0 = time.process_time()
        fit(X, y, clients)
        cpu = time.process_time() - t0
    peak = _status("VmHWM")
    source = sys.modules["fedgdp"].__file__ if "fedgdp" in sys.modules else ""
    return {"tool": tool, "N": N, "m": m, "cpu_s": cpu, "peak_added_bytes": peak - rss0, "fedgdp_source": source,
            "design_bytes": X.nbytes, "rss_before_bytes": rss0, "peak_bytes": peak}


def runs(grid: str):
    """(tool, N, m) of the grid, in run order."""
    out, pooled = [], []
    for N, m in GRIDS[grid]:
        if N not in pooled:
            pooled.append(N)
            out.append(("sklearn", N, m))
            if N <= STATSMODELS_MAX_N:
                out.append(("statsmodels", N, m))
        out.append(("fedgdp", N, m))
    return out


def table(df) -> str:
    """The markdown summary: per (N, m) the two readings of each tool, and the ratios."""
    lines = ["| N | m | fedgdp CPU s | sklearn lbfgs CPU s | statsmodels CPU s | fedgdp / sklearn "
             "| fedgdp peak added / design |", "|---|---|---|---|---|---|---|"]

    def cell(tool, N, m=None, col="cpu_s"):
        sel = df[(df.tool == tool) & (df.N == N)]
        if m is not None:
            sel = sel[sel.m == m]
        return list(sel[col])

    for N, m in sorted({(int(a), int(b)) for a, b in df[df.tool == "fedgdp"][["N", "m"]].values}):
        f, s, sm = cell("fedgdp", N, m), cell("sklearn", N), cell("statsmodels", N)
        ratio = [a / b for a, b in zip(f, s)] if s else []
        mem = [a / b for a, b in zip(cell("fedgdp", N, m, "peak_added_bytes"), cell("fedgdp", N, m, "design_bytes"))]

        def fmt(v, spec=".3g"):
            return " / ".join(format(x, spec) for x in v) if v else "-"

        lines.append(f"| {N:.0e} | {m} | {fmt(f)} | {fmt(s)} | {fmt(sm)} | {fmt(ratio, '.2f')} | {fmt(mem, '.2f')} |")
    lines.append("")
    for N in sorted({int(v) for v in df[df.tool == "fedgdp"].N}):
        base = cell("fedgdp", N, 100)
        for m in sorted({int(v) for v in df[(df.tool == "fedgdp") & (df.N == N)].m}):
            if m != 100 and base:
                r = [a / b for a, b in zip(cell("fedgdp", N, m), base)]
                lines.append(f"- N = {N:.0e}: fedgdp at m = {m} / m = 100: "
                             + " / ".join(f"{x:.2f}" for x in r))
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="output folder")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="full")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--one", nargs=3, metavar=("TOOL", "N", "M"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a.one[0], int(a.one[1]), int(a.one[2]))))
        return
    if not a.out:
        ap.error("the output folder is required")
    import pandas as pd

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for rep in range(1, a.repeat + 1):
        for tool, N, m in runs(a.grid):
            started = time.time()
            proc = subprocess.run([sys.executable, __file__, "--one", tool, str(N), str(m)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"{tool} N={N} m={m} failed:\n{proc.stderr[-3000:]}")
            row = {"run": rep, **json.loads(proc.stdout.strip().splitlines()[-1]),
                   "wall_s": time.time() - started, "loadavg_1min": os.getloadavg()[0]}
            rows.append(row)
            print(f"run {rep} {tool:12s} N={N:>9d} m={m:>6d} cpu {row['cpu_s']:8.3f} s  peak added "
                  f"{row['peak_added_bytes'] / 2 ** 20:8.1f} MiB  (design {row['design_bytes'] / 2 ** 20:.0f} MiB)",
                  flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / "scale.csv", index=False)
    (out / "scale.md").write_text(table(df))
    print(table(df))


if __name__ == "__main__":
    main()
