"""Command line: ``fedgdp simulate | ledger | bench | summarise | plot | table``.

Every bad argument ends the program with exit status 2 and one line on stderr that
names the bad value, before any work starts and without writing a file.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"fedgdp: error: {message}\n")


def _cell_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("cell")
    g.add_argument("--params", help="YAML file of parameters (flags override it)")
    g.add_argument("--model", help="logistic | poisson")
    g.add_argument("--sizes", help="equal(n) | uniform(a,b) | lognormal(mu_log,sd_log) | total(N,scheme)")
    g.add_argument("--m", type=int, help="number of clients")
    g.add_argument("--mu", help="privacy parameter mu > 0, or inf")
    g.add_argument("--K", type=int, help="the study's iteration budget (SPEC 4-5)")
    g.add_argument("--schedule", help="paper | budget (how K maps to FedAvg's local steps)")
    g.add_argument("--methods", help="comma-separated method names")
    g.add_argument("--study", help="study label stored in the output rows")
    g.add_argument("--base-seed", type=int, dest="base_seed")
    g.add_argument("--tau1", help="FedNewton eigenvalue floor, or auto")
    g.add_argument("--weights", help="size | optimal")
    g.add_argument("--clip", help="quantile:q or a fixed bound B")


def _overrides(args) -> dict:
    out: dict = load_params_file(args.params) if args.params else {}
    for key in ("model", "sizes", "m", "mu", "K", "schedule", "methods", "study", "base_seed",
                "tau1", "weights"):
        value = getattr(args, key)
        if value is not None:
            out[key] = value
    if args.clip is not None:
        rule, _, q = args.clip.partition(":")
        if rule == "quantile":
            try:
                out["clip"] = {"rule": "quantile", "q": float(q)}
            except ValueError:
                raise ValueError(f"bad --clip {args.clip!r}: use quantile:0.9 or a number") from None
        else:
            try:
                out["clip"] = {"rule": "fixed", "value": float(args.clip)}
            except ValueError:
                raise ValueError(f"bad --clip {args.clip!r}: use quantile:0.9 or a number") from None
    if out.get("tau1") not in (None, "auto"):
        try:
            out["tau1"] = float(out["tau1"])
        except ValueError:
            raise ValueError(f"tau1 must be a number or auto, got {out['tau1']!r}") from None
    return out


def _cmd_simulate(args) -> int:
    from .params import parse_seeds, resolve
    from .runner import run_cell, write_cell

    p = resolve(_overrides(args))
    seeds = parse_seeds(args.seeds)
    rows = run_cell(p, seeds)
    write_cell(rows, p, args.out)
    return 0


def _cmd_ledger(args) -> int:
    from .params import resolve
    from .runner import run_cell

    over = _overrides(args)
    over["methods"] = [args.method]
    p = resolve(over)
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    _, ledgers = run_cell(p, [args.seed], return_ledgers=True)
    _, ledger, j = ledgers[args.method][0]
    report = {"method": args.method, "replicate": args.seed, "mu": p["mu"],
              "clients": ledger.client_report(j)}
    report["mu_composed_max"] = max(c["mu"] for c in report["clients"])
    json.dump(report, sys.stdout, indent=1 if args.pretty else None)
    sys.stdout.write("\n")
    return 0


def _cmd_bench(args) -> int:
    from .bench import run_bench

    if args.suite:
        from .bench import run_suite

        studies = [x for x in args.studies.split(",") if x] if args.studies else None
        run_suite(config=args.config, replicates=args.replicates, studies=studies, out=args.out)
        return 0
    run_bench(replicates=args.replicates or 100, m=args.m, n=args.n, model=args.model, out=args.out)
    return 0


def load_params_file(path: str) -> dict:
    """A ``--params`` YAML file as a dict; ValueError naming the file otherwise."""
    import yaml

    try:
        with open(path) as fh:
            loaded = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ValueError(f"cannot read --params {path}: {exc.strerror}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"--params {path} must hold a mapping")
    return loaded


def _spec(text: str) -> dict:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--spec is not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError("--spec must be a JSON object")
    return spec


def _cmd_summarise(args) -> int:
    from .summary import read_cells, summarise, write_summary

    write_summary(summarise(read_cells(args.cells)), args.out, sources=args.cells)
    return 0


def _cmd_plot(args) -> int:
    from .plots import plot_figure
    from .summary import read_summaries

    if not (args.pdf or args.png):
        raise ValueError("give --pdf and/or --png")
    spec = _spec(args.spec)
    plot_figure(spec, read_summaries(args.summaries), pdf=args.pdf, png=args.png)
    return 0


def _cmd_table(args) -> int:
    from . import tables
    from .summary import read_summaries

    spec = _spec(args.spec)
    summary = read_summaries(args.summaries)
    if args.kind == "table1":
        df, headers, math_cols = tables.table1(summary, spec), tables.TABLE1_HEADERS, \
            ("rounds_theory", "communication_theory", "bound_theory")
    else:
        df, headers, math_cols = tables.rates(summary, spec), tables.RATES_HEADERS, ()
    title = spec.get("title", "")
    if args.csv:
        tables.write_csv(df, args.csv)
    if args.md:
        tables.write_markdown(df, args.md, headers, title=title, note=spec.get("note", ""))
    if args.tex:
        tables.write_latex(df, args.tex, headers, math_cols=math_cols, caption=title,
                           label=f"tab:{args.kind}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="fedgdp", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sim = sub.add_parser("simulate", help="run one cell, write its Parquet file")
    _cell_args(sim)
    sim.add_argument("--seeds", default="0-99", help="replicates, e.g. 0-99")
    sim.add_argument("--out", required=True, help="output .parquet path")
    sim.set_defaults(func=_cmd_simulate)

    led = sub.add_parser("ledger", help="print one replicate's privacy ledger as JSON")
    _cell_args(led)
    led.add_argument("--seed", type=int, default=0, help="replicate index")
    led.add_argument("--method", required=True)
    led.add_argument("--pretty", action="store_true")
    led.set_defaults(func=_cmd_ledger)

    ben = sub.add_parser("bench", help="time the reference against the fast implementation")
    ben.add_argument("--replicates", type=int, default=None,
                     help="replicates (default 100; with --suite the config's)")
    ben.add_argument("--m", type=int, default=100)
    ben.add_argument("--n", type=int, default=400)
    ben.add_argument("--model", default="logistic")
    ben.add_argument("--out", help="optional JSON file for the measurements")
    ben.add_argument("--suite", action="store_true",
                     help="time every study's cells of --config (CPU-s per study and method) instead")
    ben.add_argument("--config", default="config.yaml", help="with --suite: the pipeline config")
    ben.add_argument("--studies", help="with --suite: comma-separated studies (default all)")
    ben.set_defaults(func=_cmd_bench)

    summ = sub.add_parser("summarise", help="reduce cell files to one summary file (per cell and method)")
    summ.add_argument("cells", nargs="+", help="cell .parquet files")
    summ.add_argument("--out", required=True, help="output summary .parquet path")
    summ.set_defaults(func=_cmd_summarise)

    plot = sub.add_parser("plot", help="draw one figure from summary files")
    plot.add_argument("summaries", nargs="+", help="summary .parquet files")
    plot.add_argument("--spec", required=True, help="the figure as JSON (layout, model, study, panels)")
    plot.add_argument("--pdf", help="output PDF path")
    plot.add_argument("--png", help="output PNG path")
    plot.set_defaults(func=_cmd_plot)

    tab = sub.add_parser("table", help="write Table 1 or the rates table from summary files")
    tab.add_argument("kind", choices=["table1", "rates"])
    tab.add_argument("summaries", nargs="+", help="summary .parquet files")
    tab.add_argument("--spec", required=True, help="the table's settings as JSON")
    tab.add_argument("--csv", help="output CSV path")
    tab.add_argument("--md", help="output Markdown path")
    tab.add_argument("--tex", help="output LaTeX path")
    tab.set_defaults(func=_cmd_table)
    _realdata_commands(sub)
    _nn_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    # numpy's OpenBLAS: one thread per process unless the user says otherwise. The
    # estimators multiply tiny matrices, where BLAS threads only add contention, and
    # parallelism comes from running cells side by side (Snakemake jobs).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        sys.stderr.write(f"fedgdp: error: {exc}\n")
        return 2


# ---------------------------------------------------------------- real data (SPEC 6)
_REALDATA_PIPELINE_KEYS = ("tasks", "splits", "figures")   # config keys of the pipeline, not of one run


def _realdata_overrides(args) -> dict:
    out: dict = {}
    if args.params:
        loaded = load_params_file(args.params)
        out.update(loaded.get("realdata", loaded))
    if args.spec:
        out.update(_spec(args.spec))
    for key in _REALDATA_PIPELINE_KEYS:
        out.pop(key, None)
    for key in ("task", "dataset", "path", "mu", "methods", "base_seed", "tau1"):
        value = getattr(args, key)
        if value is not None:
            out[key] = value
    return out


def _cmd_realdata(args) -> int:
    from .datasets import load_dataset
    from .realdata import resolve, run_split, write_rows

    p = resolve(_realdata_overrides(args))
    if args.split < 0:
        raise ValueError(f"--split must be >= 0, got {args.split}")
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    try:
        data = load_dataset(p["dataset"], p["path"])
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if args.verbose else None
    try:  # small matrices: one BLAS thread per job is much faster than oversubscribing
        from threadpoolctl import threadpool_limits
    except ImportError:
        rows = run_split(p, data, args.split, progress=log)
    else:
        with threadpool_limits(limits=args.threads):
            rows = run_split(p, data, args.split, progress=log)
    write_rows(rows, {**p, "split": args.split}, args.out)
    return 0


def _cmd_realdata_plot(args) -> int:
    from .plots_realdata import plot_realdata, realdata_medians
    from .realdata import read_rows

    if not (args.pdf or args.png or args.medians):
        raise ValueError("give --pdf, --png and/or --medians")
    df = read_rows(args.results)
    plot_realdata(df, task=args.task, pdf=args.pdf, png=args.png, title=args.title or None)
    if args.medians:
        from pathlib import Path

        Path(args.medians).parent.mkdir(parents=True, exist_ok=True)
        realdata_medians(df[df["task"] == args.task]).to_csv(args.medians, index=False)
    return 0


def _cmd_fetch_mnist(args) -> int:
    from .datasets import fetch_mnist

    try:
        for path in fetch_mnist(args.dir, timeout=args.timeout):
            print(path)
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    return 0


def _realdata_commands(sub) -> None:
    real = sub.add_parser("realdata", help="real-data logistic regression: every method on every fold "
                                           "of one client split, one Parquet file")
    real.add_argument("--params", help="YAML file: realdata parameters, or a config with a realdata section")
    real.add_argument("--spec", help="realdata parameters as a JSON object (flags override it)")
    real.add_argument("--task", help="binary | multiclass")
    real.add_argument("--dataset", help="digits | mnist")
    real.add_argument("--path", help="folder holding the MNIST files (dataset mnist)")
    real.add_argument("--mu", help="comma-separated privacy levels, e.g. 6,2 (non-private methods run once)")
    real.add_argument("--methods", help="comma-separated method names, or all")
    real.add_argument("--base-seed", type=int, dest="base_seed")
    real.add_argument("--tau1", type=float, help="FedNewton's eigenvalue floor / ridge")
    real.add_argument("--split", type=int, required=True, help="client split index s (0, 1, ...)")
    real.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    real.add_argument("--verbose", action="store_true", help="log each fit to stderr")
    real.add_argument("--out", required=True, help="output .parquet path")
    real.set_defaults(func=_cmd_realdata)

    rplot = sub.add_parser("realdata-plot", help="draw Figure 7 or 8 from real-data Parquet files")
    rplot.add_argument("results", nargs="+", help="real-data .parquet files (all splits)")
    rplot.add_argument("--task", required=True, choices=["binary", "multiclass"])
    rplot.add_argument("--title", help="figure title (default: task, data set, layout)")
    rplot.add_argument("--pdf", help="output PDF path")
    rplot.add_argument("--png", help="output PNG path")
    rplot.add_argument("--medians", help="output CSV of median and quartiles per method and mu")
    rplot.set_defaults(func=_cmd_realdata_plot)

    fetch = sub.add_parser("fetch-mnist", help="download the MNIST IDX files and check their MD5 sums")
    fetch.add_argument("--dir", required=True, help="folder to write the four .gz files to")
    fetch.add_argument("--timeout", type=float, default=30.0, help="seconds per connection attempt")
    fetch.set_defaults(func=_cmd_fetch_mnist)


# ---------------------------------------------------------------- CNNs (SPEC 7, extra nn)
def _nn_commands(sub) -> None:
    """``nn-run``, ``nn-summarise``, ``nn-plot``, ``nn-fetch``, ``nn-bench`` (in
    :mod:`fedgdp.nn.commands`; only the commands that train import torch)."""
    from .nn.commands import add_parsers

    add_parsers(sub)
