"""The ``fedgdp nn-*`` subcommands (torch is imported only by the commands that train).

``nn-run``       one run (every method on one partition) -> one Parquet file
``nn-summarise`` run files -> one summary Parquet (median accuracy per method and x)
``nn-plot``      summary files -> Figure 9 or 10 (PDF + PNG)
``nn-fetch``     download MNIST / CIFAR-10 with checksums (clear error offline)
``nn-bench``     time one client-step of the paper's CNNs (plain gradient, fedgdp's clipped
                 step, the vmap path, opacus' hooks and ghost clipping), extrapolate the grid
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["add_parsers"]


def _settings(args) -> dict:
    from ..common.arguments import _spec, load_params_file
    from ..core.settings import flag_values
    from .settings import NNSettings

    out: dict = load_params_file(args.params) if args.params else {}  # type: ignore[assignment]  # many=False: a dict
    if args.spec:
        out.update(_spec(args.spec))
    return out | flag_values(args, NNSettings)


def _cmd_nn_run(args) -> int:
    from .settings import resolve

    p = resolve(_settings(args))
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    from .data import load_images

    data = load_images(p.dataset, args.data_dir)     # fails early, before torch starts
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("nn-run needs PyTorch: pip install 'fedgdp[nn]' (see docs/cnns.md for GPU builds)") from None
    from .run import run_nn, write_runs
    from .train import keep_freed_memory

    keep_freed_memory()          # this process's own setting: the big freed blocks are reused (no page faults)

    rows, ledgers = run_nn(p, device=args.device, threads=args.threads, data=data, return_ledgers=True,
                           progress=True, fresh_noise=args.fresh_noise)
    meta = {"ledgers": json.dumps({k: [{"stage": r.stage, "count": np.asarray(r.count).tolist(),
                                        "sensitivity": r.sensitivity[0].tolist(), "sigma": r.sigma[0].tolist()}
                                       for r in led.releases] for k, led in ledgers.items()})}
    write_runs(rows, p, args.out, extra_meta=meta)
    for r in rows:
        print(f"{r['label']:<18} acc {r['test_accuracy']:.3f}  rounds {r['rounds']:>3}  "
              f"mu {r['mu_composed']:.3f}  {r['elapsed_s']:.1f} s")
    if p.release == "private" and not args.fresh_noise:
        print("noise: derived seed, known to anyone with the settings (noise_secret = False): the mu-GDP guarantee "
              "is void for private data; use --fresh-noise there")
    return 0


def _cmd_nn_readings(args) -> int:
    from .readings import collect, load_readings, medians_markdown, plot_readings, run_missing, summary_markdown

    cfg = load_readings(args.config)
    _whole_grids(args.reading_summaries, [])          # a bad --reading-summaries file fails before any work
    if args.run:
        try:
            import torch  # noqa: F401
        except ImportError:
            raise ValueError("nn-readings --run needs PyTorch: pip install 'fedgdp[nn]'") from None
        from .train import keep_freed_memory

        keep_freed_memory()
        run_missing(cfg, args.runs_dir, device=args.device, threads=args.threads, budget_s=args.budget_s)
    table, missing = collect(cfg, args.runs_dir)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from ..common.io import atomic_path

    with atomic_path(out / "readings.csv") as tmp:
        table.to_csv(tmp, index=False)
    if len(table):
        plot_readings(table, cfg, out / "readings.png")
        with atomic_path(out / "readings.md") as tmp:
            Path(tmp).write_text(medians_markdown(table, cfg))
        written = _write_reading_summaries(cfg, args.runs_dir, table, missing, Path(args.summaries)) \
            if args.summaries else []
        grids = _whole_grids(args.reading_summaries, written)
        if cfg.summary:
            with atomic_path(out / "summary.md") as tmp:
                Path(tmp).write_text(summary_markdown(table, cfg, c6=args.c6(table, grids) if args.c6 else None))
        if args.grid:
            from .panels import levels_markdown, plot_panels, read_grid

            plot_panels(read_grid(args.grid), table, cfg, cfg.panels, out / "figures.png")
            if args.summaries:
                with atomic_path(out / "levels.md") as tmp:
                    Path(tmp).write_text(levels_markdown(read_grid(args.grid), grids, cfg))
    print(f"{len(table)} rows from {len(table.groupby(['reading', 'figure', 'x', 'run']))} pieces; "
          f"{len(missing)} pieces missing" + (f" (first: {missing[0]})" if missing else ""))
    return 0


def _whole_grids(paths: list | None, written: list):
    """The whole-grid summaries C6 is judged on, as files (the numbers `fedgdp claims --nn-reading-summaries`
    reads): those of ``--reading-summaries``, a (reading, figure) just written by ``--summaries`` in place of
    a given file's; None when there are none."""
    import pandas as pd

    from .readings import read_reading_summaries

    done = {Path(p).resolve() for p in written}
    by_key = {}
    for path in [p for p in paths or [] if Path(p).resolve() not in done] + list(written):
        for key, g in read_reading_summaries([path]).groupby(["reading", "figure"], sort=False):
            by_key[key] = g
    return pd.concat(by_key.values(), ignore_index=True) if by_key else None


def _write_reading_summaries(cfg, runs_dir: str, table, missing: list, root: Path) -> list[Path]:
    """``<root>/paper-nn-<dataset>-<reading>/<figure>_summary.csv`` of each figure a reading has whole
    (`fedgdp.nn.readings.reading_summaries`), a line on stdout for each; returns the files."""
    from ..common.io import atomic_path
    from .readings import reading_summaries

    written = []
    for (reading, figure), summary in reading_summaries(cfg, runs_dir, table, missing).items():
        folder = root / f"paper-nn-{cfg.dataset}-{reading}"
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / f"{figure}_summary.csv") as tmp:
            summary.to_csv(tmp, index=False, float_format="%.4f")
        written.append(folder / f"{figure}_summary.csv")
        print(f"{reading}: {figure} whole, its summary in {written[-1]}")
    return written


def _cmd_nn_summarise(args) -> int:
    from ..common.io import atomic_path
    from .plots import summarise_runs
    from .run import read_runs

    s = summarise_runs(read_runs(args.inputs))
    with atomic_path(args.out) as tmp:
        s.to_parquet(tmp, index=False)
    if args.csv:
        with atomic_path(args.csv) as tmp:
            s.to_csv(tmp, index=False, float_format="%.4f")
    return 0


def _cmd_nn_plot(args) -> int:
    from ..common.io import read_parquet_files
    from .plots import SUMMARY_COLUMNS, plot_nn_figure

    summary = read_parquet_files(args.inputs, SUMMARY_COLUMNS, "summary")
    plot_nn_figure(summary, args.figure, args.out, png=not args.no_png)
    if args.csv:
        from ..common.io import atomic_path

        with atomic_path(args.csv) as tmp:
            summary[summary["figure"] == args.figure].to_csv(tmp, index=False, float_format="%.4f")
    return 0


def _cmd_nn_fetch(args) -> int:
    from .data import fetch

    folder = fetch(args.dataset, args.data_dir, timeout=args.timeout)
    print(f"{args.dataset}: files verified in {folder}")
    return 0


def _cmd_nn_bench(args) -> int:
    from ..core.settings import integer, name_list
    from .bench import run_nn_bench

    sizes = tuple(integer(2, strict=False)("--sizes", s) for s in name_list("--sizes", args.sizes))
    datasets = name_list("--datasets", args.datasets)
    bad = [d for d in datasets if d not in ("mnist", "cifar10", "digits")]
    if bad or not datasets:
        raise ValueError(f"--datasets: unknown network(s) {bad or datasets}; known: mnist, cifar10, digits")
    if args.repeats < 1 or args.rounds < 1:
        raise ValueError(f"--repeats and --rounds must be at least 1, got {args.repeats} and {args.rounds}")
    run_nn_bench(datasets=datasets, sizes=sizes, repeats=args.repeats, rounds=args.rounds, clip=args.clip,
                 device=args.device, threads=args.threads, out=args.out, md=args.md)
    return 0


def _default(key):
    """The default of a setting as ``fedgdp --help`` shows it (a per-data-set one lists them)."""
    from .settings import COMMON, DATASET_DEFAULTS

    per_dataset = {ds: d[key] for ds, d in DATASET_DEFAULTS.items() if key in d}
    if per_dataset:
        return "per data set: " + ", ".join(f"{ds} {v:g}" for ds, v in per_dataset.items())
    if key == "n":
        return "none (fig10: the full training split)"
    return COMMON[key]


def _seconds(value: str) -> float:
    """``--budget-s``: a finite number of seconds, zero or more."""
    import argparse
    import math

    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of seconds, got {value!r}") from None
    if not (math.isfinite(seconds) and seconds >= 0):
        raise argparse.ArgumentTypeError(f"a finite number of seconds >= 0, got {value!r}")
    return seconds


def add_parsers(sub) -> None:
    """Add the ``nn-*`` subcommands to ``fedgdp``'s subparsers.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        ``fedgdp``'s subparsers (``ArgumentParser.add_subparsers()``).
    """
    from ..common.arguments import output_dir, output_path, show_defaults
    from ..core.settings import add_flags
    from .settings import NNSettings

    run = sub.add_parser("nn-run", help="CNN experiments: one run (all methods) -> Parquet (needs torch)")
    g = run.add_argument_group("settings (defaults: fedgdp.nn.settings)")
    g.add_argument("--params", help="YAML mapping of settings")
    g.add_argument("--spec", help="settings as a JSON object (over --params; flags override both)")
    add_flags(g, NNSettings, shown=_default)      # a flag per setting
    run.add_argument("--device", default="auto", help="auto (CUDA if present, else CPU) | cpu | cuda | cuda:N")
    run.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    run.add_argument("--data-dir", default="data", help="folder holding mnist/ and cifar10/")
    run.add_argument("--fresh-noise", action="store_true",
                     help="seed the noise from the operating system's entropy (for private data: the rows say "
                          "noise_secret = True); default: the derived seed, reproducible and known, so "
                          "noise_secret = False and the guarantee is void while the seed is known")
    run.add_argument("--out", required=True, type=output_path(".parquet"), help="output .parquet path")
    run.set_defaults(func=_cmd_nn_run)
    show_defaults(run, _default)

    rd = sub.add_parser("nn-readings", help="the CNN readings map: run the missing pieces (--run), then the table "
                                            "readings.csv and its figure (docs/cnns.md)")
    rd.add_argument("config", help="readings config (YAML), e.g. config/nn-readings.yaml")
    rd.add_argument("--runs-dir", default="results/nn-readings/runs", help="folder of the pieces (one Parquet each)")
    rd.add_argument("--out-dir", default="results/nn-readings", type=output_dir,
                    help="where readings.csv, readings.md, readings.png and summary.md go (with --grid and "
                         "--summaries also levels.md: level and trend per reading and figure)")
    rd.add_argument("--run", action="store_true", help="run the pieces not yet in --runs-dir first (needs torch)")
    rd.add_argument("--grid", metavar="DIR", help="folder of the grid's fig09_summary.csv and fig10_summary.csv "
                                                  "(e.g. docs/results/paper-nn-mnist): also draw figures.png, "
                                                  "Figures 9-10 with the config's panels readings beside the grid")
    rd.add_argument("--summaries", metavar="DIR", type=output_dir,
                    help="also write the summary of each figure a reading has whole, as the grid's are, with a "
                         "reading and a certified_mu column, to DIR/paper-nn-<dataset>-<reading>/<figure>_summary.csv "
                         "(e.g. docs/results)")
    rd.add_argument("--reading-summaries", nargs="+", metavar="CSV",
                    help="whole-grid summaries of readings (--summaries' files, e.g. "
                         "docs/results/paper-nn-mnist-*/fig*_summary.csv): summary.md's C6 of such a reading is "
                         "judged on its whole grid, as fedgdp claims --nn-reading-summaries judges it")
    rd.add_argument("--device", default="auto", help="auto (CUDA if present, else CPU) | cpu | cuda | cuda:N")
    rd.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    rd.add_argument("--budget-s", type=_seconds, metavar="SECONDS",
                    help="with --run: start no piece after this many seconds (a started piece finishes)")
    rd.set_defaults(func=_cmd_nn_readings, c6=None)   # fedgdp's cli hands in C6's rule (reports, a floor up)

    summ = sub.add_parser("nn-summarise", help="CNN run files -> summary Parquet (median accuracy)")
    summ.add_argument("inputs", nargs="+", help="run .parquet files")
    summ.add_argument("--out", required=True, type=output_path(".parquet"), help="summary .parquet path")
    summ.add_argument("--csv", type=output_path(".csv"), help="optional CSV copy of the summary")
    summ.set_defaults(func=_cmd_nn_summarise)

    plot = sub.add_parser("nn-plot", help="summary files -> Figure 9 or 10 (PDF and PNG)")
    plot.add_argument("inputs", nargs="+", help="summary .parquet files (one per dataset, or one in all)")
    plot.add_argument("--figure", required=True, choices=["fig09", "fig10"])
    plot.add_argument("--out", required=True, type=output_path(".pdf"), help="output .pdf (the .png goes beside it)")
    plot.add_argument("--no-png", action="store_true", help="write the PDF only")
    plot.add_argument("--csv", type=output_path(".csv"), help="optional CSV of the plotted medians")
    plot.set_defaults(func=_cmd_nn_plot)

    fe = sub.add_parser("nn-fetch", help="download MNIST or CIFAR-10, verify checksums")
    fe.add_argument("--dataset", required=True, choices=["mnist", "cifar10", "digits"])
    fe.add_argument("--data-dir", default="data", type=output_dir, help="folder to download into")
    fe.add_argument("--timeout", type=float, default=30.0, help="seconds per connection attempt")
    fe.set_defaults(func=_cmd_nn_fetch)

    be = sub.add_parser("nn-bench", help="time one client-step of the CNNs against a plain gradient and opacus, "
                                         "extrapolate the paper's grid (needs torch)")
    be.add_argument("--datasets", default="mnist,cifar10", help="networks: mnist, cifar10, digits")
    be.add_argument("--sizes", default="100,600", help="client sizes n to time")
    be.add_argument("--repeats", type=int, default=3, help="timed calls per method and round (the minimum is kept)")
    be.add_argument("--rounds", type=int, default=2, help="passes over the methods, in turn")
    be.add_argument("--clip", type=float, default=1.0, help="clipping bound B")
    be.add_argument("--device", default="auto", help="auto (CUDA if present, else CPU) | cpu | cuda | cuda:N")
    be.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    be.add_argument("--out", type=output_path(".json"), help="optional JSON file")
    be.add_argument("--md", type=output_path(".md"), help="optional Markdown table")
    be.set_defaults(func=_cmd_nn_bench)

