"""CPU cost of one CNN method-run, this checkout against a reference checkout, in one run.

    python scripts/bench_nn_run.py --before /path/to/reference/checkout --repeats 2 \
        --out docs/results/perf-nn/bench.json

Runs ``fedgdp nn-run`` (Figure 10 on MNIST, m = 100: the full split, 480 training
images per client, 10 clients a round; one method, one thread) from each checkout in
turn, ``--repeats`` times, alternating (before, after, before, after, ...), each in a
fresh process with ``PYTHONPATH=<checkout>/src``. It records each process's wall time
and its user and system CPU seconds (``resource.getrusage(RUSAGE_CHILDREN)``), the
ratios after / before, whether the two checkouts' rows are identical (every column
but the timing ones and the columns only one of them has), and each side's accuracies. The machine's load average
at the start of each run is recorded: a loaded machine inflates both sides.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_once(checkout: Path, args, out: Path) -> dict:
    """One ``fedgdp nn-run`` from ``checkout``: wall, user and system seconds."""
    cmd = [sys.executable, "-m", "fedgdp", "nn-run", "--figure", "fig10", "--dataset", "mnist", "--m", str(args.m),
           "--methods", args.method, "--rounds", str(args.rounds), "--threads", "1", "--device", "cpu",
           "--data-dir", str(args.data_dir), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
            "load_at_start": load}


def same_rows(a: Path, b: Path) -> bool:
    """Whether two run files have the same values in their shared, non-timing columns."""
    import pandas as pd

    x, y = pd.read_parquet(a), pd.read_parquet(b)
    cols = [c for c in x.columns if c in y.columns and c not in ("elapsed_s", "threads")]
    return bool(x[cols].equals(y[cols]))


def accuracy_of(path: Path) -> dict:
    """Test accuracy by method of one run file (compare the two sides when rows differ)."""
    import pandas as pd

    df = pd.read_parquet(path)
    return {str(k): float(v) for k, v in zip(df["method"], df["test_accuracy"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, type=Path, help="the reference checkout (its src/ is imported)")
    ap.add_argument("--after", type=Path, default=REPO, help="the checkout measured (default: this one)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each checkout, alternating")
    ap.add_argument("--method", default="fedavg", help="the CNN method")
    ap.add_argument("--m", type=int, default=100, help="clients (Figure 10)")
    ap.add_argument("--rounds", type=int, default=10, help="global rounds R (the paper: 10)")
    ap.add_argument("--data-dir", type=Path, default=REPO / "data", help="folder holding mnist/")
    ap.add_argument("--out", type=Path, help="JSON file")
    args = ap.parse_args(argv)
    runs: dict = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for i in range(args.repeats):
            for side in ("before", "after"):
                files[side] = Path(tmp) / f"{side}{i}.parquet"
                runs[side].append(run_once(getattr(args, side), args, files[side]))
                print(side, i, json.dumps(runs[side][-1]), flush=True)
        identical = same_rows(files["before"], files["after"])
        accuracy = {side: accuracy_of(f) for side, f in files.items()}
    cpu = {s: [r["user_s"] + r["sys_s"] for r in runs[s]] for s in runs}
    result = {
        "command": "fedgdp nn-run --figure fig10 --dataset mnist "
                   f"--m {args.m} --methods {args.method} --rounds {args.rounds} --threads 1 --device cpu",
        "before": str(args.before), "after": str(args.after), "runs": runs,
        "cpu_ratio_after_over_before": [a / b for a, b in zip(cpu["after"], cpu["before"])],
        "wall_ratio_after_over_before": [a["wall_s"] / b["wall_s"] for a, b in zip(runs["after"], runs["before"])],
        "identical_rows": identical, "accuracy_last_run": accuracy,
        "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    print(json.dumps({k: result[k] for k in ("cpu_ratio_after_over_before", "wall_ratio_after_over_before",
                                             "identical_rows")}))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
