"""Command line: ``fedgdp COMMAND``; ``fedgdp --help`` lists every command.

Exit statuses and what a user sees: docs/cli.md. Output paths are checked at parse time
(`output_path`), ``--spec`` objects against a closed schema per command (`SPECS`). One
error path (`main`): input errors (ValueError, YAML/JSON, OSError, MemoryError, a missing
extra, a closed pipe) are one line and exit status 2 (`fedgdp.common.arguments.user_error`);
anything else is a bug: its traceback, exit status 1.

To add a command: a ``_cmd_<name>(args) -> int`` function and its parser in
`build_parser` (or a ``_<name>_commands(sub)`` adder listed there); its errors
take the one path above without further work, and ``tests/commands/test_careless.py`` lists
its careless inputs.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

from ..common.arguments import (
    _module_defaults,
    _Parser,
    _spec,
    load_params_file,
    output_dir,
    output_path,
    show_defaults,
    user_error,
)

__all__ = ["main", "build_parser", "output_path", "output_dir", "show_defaults", "SPECS"]

# ------------------------------------------------------------------ --spec schemas
# key -> (types, required, nonempty) (fedgdp.common.arguments.check_spec): what the plan's
# *_spec methods write, and nothing else, so a typo in a hand-written spec is named.
_NUM = (int, float, str)        # a number, or "inf" / "Infinity" as JSON text allows
_FIGURE_SPEC = {"layout": (str, True, False), "model": (str, True, False), "panels": (list, True, True),
                "study": (str, False, False), "title": (str, False, False), "name": (str, False, False),
                "theory": (bool, False, False), "ncols": (int, False, False), "studies": (dict, False, False),
                "d": (int, False, False), "method_settings": (dict, False, False)}
SPECS: dict[str, Any] = {
    "plot": _FIGURE_SPEC,
    "table1": {"model": (str, True, False), "study": (str, True, False), "cell": (dict, True, True),
               "methods": (list, False, True), "title": (str, False, False), "note": (str, False, False)},
    "rates": {"fits": (list, True, True), "studies": (dict, True, True), "d": (dict, True, True),
              "models": (list, False, True), "method_settings": (dict, False, False),
              "bound_form": (str, False, False), "title": (str, False, False), "note": (str, False, False)},
    "claims": {"models": (list, False, True), "studies": (dict, False, False), "title": (str, False, False)},
    "claims-map": {"designs": (dict, True, True), "variants": (dict, False, False),
                   "realdata_variants": (dict, False, False), "order": (list, False, False),
                   "realdata": (list, False, False), "skipped": (list, False, False),
                   "replicates": (int, False, False), "title": (str, False, False),
                   "provenance": (str, False, False), "caption": (str, False, False)},
    "decompose": {"studies": (dict, True, True), "K_conv": (int, True, False), "methods": (list, False, True),
                  "title": (str, False, False), "caption": (str, False, False), "name": (str, False, False)},
    "coverage-cell": {"settings": (dict, True, True), "cell": (str, True, False)},
    "coverage": {"settings": (dict, True, True), "title": (str, False, False), "caption": (str, False, False)},
}


def _cell_args(ap: argparse.ArgumentParser) -> None:
    from ..core.settings import add_flags
    from ..simulation.params import CellSettings

    g = ap.add_argument_group("cell")
    g.add_argument("--params", help="YAML file of parameters (flags override it); simulate also takes "
                                    "a list of them: several cells, one after another, one file")
    add_flags(g, CellSettings)               # a flag per cell parameter that has a flag type
    g.add_argument("--clip", help="quantile:q or a fixed bound B")
    _privacy_args(g)
    show_defaults(ap, _module_defaults("fedgdp.simulation.params"))


def _privacy_args(g) -> None:
    g.add_argument("--privacy-mode", dest="privacy_mode", choices=["paper", "certified"],
                   help="paper: the algorithms as printed (nominal mu); certified: every release's "
                        "sensitivity holds for all inputs (needs a fixed or private_quantile clip)")
    g.add_argument("--hessian-clip", dest="hessian_clip", type=float,
                   help="certified FedNewton's per-sample Hessian bound, as a factor of tau1 (default 4)")
    g.add_argument("--private-clip", dest="private_clip", metavar="Q[:SHARE]",
                   help="private clipping bound: the Q-quantile from noisy histograms spending SHARE "
                        "of mu^2 (default 0.1), e.g. 0.9:0.1")


def _privacy_overrides(args, out: dict) -> dict:
    """Fold the privacy flags into the overrides ``out`` (in place; returned)."""
    if args.privacy_mode is not None or args.hessian_clip is not None:
        priv = dict(out.get("privacy") or {})
        if args.privacy_mode is not None:
            priv["mode"] = args.privacy_mode
        if args.hessian_clip is not None:
            priv["hessian_clip"] = args.hessian_clip
        out["privacy"] = priv
    if args.private_clip is not None:
        q, _, share = args.private_clip.partition(":")
        try:
            out["clip"] = {"rule": "private_quantile", "q": float(q)} | ({"share": float(share)} if share else {})
        except ValueError:
            raise ValueError(f"bad --private-clip {args.private_clip!r}: use Q or Q:SHARE, e.g. 0.9:0.1") from None
    return out


def _overrides(args, given: dict | None = None) -> dict:
    """The cell's parameters: ``given`` (default: the --params file), then the flags."""
    from ..core.settings import flag_values
    from ..simulation.params import CellSettings

    out: dict = dict(given) if given is not None else (load_params_file(args.params) if args.params else {})  # type: ignore[assignment]
    out.update(flag_values(args, CellSettings))
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
    return _privacy_overrides(args, out)


def _cmd_simulate(args) -> int:
    """One cell, or several (--params holding a list of mappings; the flags apply to
    each), run one after another in this process and written to one file: rows in the
    order of the cells, then replicate and method; every cell checked before any work."""
    from ..simulation.params import parse_seeds, resolve
    from ..simulation.run import run_cell, write_cell

    loaded = load_params_file(args.params, many=True) if args.params else {}
    cells = [resolve(_overrides(args, c)) for c in (loaded if isinstance(loaded, list) else [loaded])]
    seeds = parse_seeds(args.seeds)
    for p in cells:
        _check_memory(p, len(seeds))
    rows = [row for p in cells for row in run_cell(p, seeds)]
    write_cell(rows, cells if isinstance(loaded, list) else cells[0], args.out)
    return 0


def _check_memory(p, n_seeds: int) -> None:
    """Refuse a cell (resolved `fedgdp.simulation.params.CellSettings`) whose estimated memory exceeds this
    machine's (before any work)."""
    from ..simulation.run import memory_estimate

    need = memory_estimate(p, n_seeds)
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):    # not on this platform: no check
        return
    if need > have:
        raise ValueError(f"cell m={p.m}, sizes={p.sizes} needs about {_gib(need)} of memory, more than "
                         f"this machine's {_gib(have)}: use fewer clients (--m) or smaller --sizes")


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n < 2**40 else f"{n / 2**40:.3g} TiB"


def _cmd_ledger(args) -> int:
    from ..common.io import strict_json
    from ..simulation.params import resolve
    from ..simulation.run import run_cell

    over = _overrides(args)
    over["methods"] = [args.method]
    p = resolve(over)
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    _check_memory(p, 1)
    _, ledgers = run_cell(p, [args.seed], return_ledgers=True)
    _, ledger, j = ledgers[args.method][0]
    report = {"method": args.method, "replicate": args.seed, "mu": p.mu,
              "clients": ledger.client_report(j)}
    report["mu_composed_max"] = max(c["mu"] for c in report["clients"])
    report["mu_certified_max"] = max(c["mu_certified"] for c in report["clients"])
    report["privacy_mode"] = p.privacy["mode"]
    report["unaccounted"] = list(ledger.unaccounted)
    # strict JSON: an infinite sensitivity or mu is the string "inf", NaN is null
    json.dump(strict_json(report), sys.stdout, indent=1 if args.pretty else None, allow_nan=False)
    sys.stdout.write("\n")
    return 0


def _cmd_audit(args) -> int:
    from .. import audit
    from .audit import config_targets, read_run_config

    if args.readings and args.configfile:
        raise ValueError("audit: give --configfile (a run's settings) or --readings (a readings config), not both")
    config = read_run_config(args.configfile) if args.configfile else None
    targets = config_targets(config) if config else None
    if args.readings:
        targets = audit.readings_targets(args.readings)
        if not targets:
            raise ValueError(f"audit --readings {args.readings}: no certified reading (every reading is clip_only, "
                             "plain or mu = inf)")
    rows = audit.run_audit(quick=args.quick, targets=targets, seed=args.seed, histogram=not args.readings)
    if args.readings and not rows:
        raise ValueError("audit --readings: the CNN releases need torch (the nn extra)")
    as_dicts, format_table, write_audit = audit.as_dicts, audit.format_table, audit.write_audit
    if args.table:
        write_audit(rows, args.table)
    if args.empirical:
        from ..audit import default_targets, nn_targets
        from .empirical import plot_empirical, run_empirical, write_rows

        mu = float(config["defaults"].get("mu", 2.0)) if config else 2.0
        emp = run_empirical(targets if targets is not None else default_targets() + nn_targets(), trials=args.trials,
                            mu=mu if 0 < mu < float("inf") else 2.0,
                            calibration=max(100, args.trials // 4), seed=args.seed, alpha=1 - args.confidence)
        write_rows(emp, f"{args.empirical}.csv")
        plot_empirical(emp, f"{args.empirical}.pdf", f"{args.empirical}.png")
    if args.json:
        from ..common.io import strict_json

        json.dump(strict_json(as_dicts(rows)), sys.stdout, indent=1, allow_nan=False)   # inf: "inf"
        sys.stdout.write("\n")
    else:
        print(format_table(rows))
    return 0


def _cmd_nn_restore(args) -> int:
    from .. import plan
    from .audit import read_run_config

    for flag, folder in (("pieces", args.pieces), ("--readings", args.readings)):
        if folder is not None and not os.path.isdir(folder):
            raise ValueError(f"nn-restore {flag}: {folder} is not a folder of committed run files")
    if args.pieces is None and args.readings is None:
        raise ValueError("nn-restore: give a folder of committed grid runs, --readings DIR, or both")
    config = read_run_config(args.configfile)
    try:
        the_plan = plan.load(config, args.schema, plan.invocation_overrides(args.configfile[1:], None))
    except plan.ConfigError as exc:
        raise ValueError(str(exc)) from None
    rows = the_plan.nn_restore(args.pieces, readings=args.readings, dry_run=args.dry_run)
    for row in rows:
        if row["action"] in ("restored", "differs"):
            action = "would restore" if args.dry_run and row["action"] == "restored" else row["action"]
            print(f"{action:9} {row['file']}" + (f" ({row['reason']})" if row["reason"] else
                                                        f" (commit {row['commit'][:7]})"))
    counts = {a: sum(r["action"] == a for r in rows) for a in ("restored", "kept", "differs", "absent")}
    verb = "would restore" if args.dry_run else "restored"
    print(f"run {the_plan.run}: {verb} {counts['restored']}, kept {counts['kept']} already there, "
          f"{counts['differs']} committed under other settings (not used), {counts['absent']} not committed "
          f"(of {len(rows)} run files)")
    return 0


def _cmd_bench(args) -> int:
    if not args.suite:      # the single-cell oracle benchmark lives outside the package
        raise ValueError("bench times the study cells only: add --suite; the speedup of the fast code over "
                         "the loop oracle (a test module) is `python scripts/speedup.py` in the repository")
    from .bench import run_suite

    studies = [x for x in args.studies.split(",") if x] if args.studies else None
    run_suite(config=args.config, replicates=args.replicates, studies=studies, out=args.out)
    return 0


def _cmd_summarise(args) -> int:
    from ..simulation.summary import read_cells, summarise, write_summary

    write_summary(summarise(read_cells(args.cells)), args.out, sources=args.cells)
    return 0


def _cmd_plot(args) -> int:
    from ..simulation.plots import plot_figure
    from ..simulation.summary import read_summaries

    if not (args.pdf or args.png):
        raise ValueError("give --pdf and/or --png")
    spec = _spec(args.spec, SPECS["plot"])
    plot_figure(spec, read_summaries(args.summaries), pdf=args.pdf, png=args.png)
    return 0


def _cmd_table(args) -> int:
    from ..reports import tables
    from ..simulation.summary import read_summaries

    spec = _spec(args.spec, SPECS[args.kind])
    if not (args.csv or args.md or args.tex):
        raise ValueError("give at least one of --csv, --md, --tex")
    summary = read_summaries(args.summaries)
    if args.kind == "table1":
        math_cols: tuple[str, ...] = ("rounds_theory", "communication_theory", "bound_theory")
        df, headers = tables.table1(summary, spec), tables.TABLE1_HEADERS
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
    from .. import __version__

    ap = _Parser(prog="fedgdp", description=_DESCRIPTION)
    ap.add_argument("--version", action="version", version=f"fedgdp {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND",
                            title="commands (fedgdp COMMAND --help: its options and their defaults)")

    sim = sub.add_parser("simulate", help="run one cell (or a list of cells), write one Parquet file")
    _cell_args(sim)
    sim.add_argument("--seeds", default="0-99", help="replicates, e.g. 0-99")
    sim.add_argument("--out", required=True, type=output_path(".parquet"), help="output .parquet path")
    sim.set_defaults(func=_cmd_simulate)

    led = sub.add_parser("ledger", help="print one replicate's privacy ledger as JSON")
    _cell_args(led)
    led.add_argument("--seed", type=int, default=0, help="replicate index")
    led.add_argument("--method", required=True, help="the method whose releases are printed")
    led.add_argument("--pretty", action="store_true", help="indent the JSON")
    led.set_defaults(func=_cmd_ledger)

    aud = sub.add_parser("audit", help="empirical privacy audit: each release's largest observed change "
                                       "beside its recorded sensitivity (a lower bound: it can find "
                                       "leaks, not prove their absence)")
    aud.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    aud.add_argument("--quick", action="store_true", help="smaller client data sets, a shorter search (faster)")
    aud.add_argument("--configfile", nargs="+", metavar="FILE",
                     help="audit the releases of this run's settings (methods, privacy mode, tau1, H_c, clip "
                          "rule, Newton solver): config.yaml first, then the run's files (or its "
                          "results/<run>/config.resolved.yaml); default: every method at the defaults")
    aud.add_argument("--readings", metavar="FILE",
                     help="audit every certified reading of a readings config (config/nn-readings.yaml) at its own "
                          "settings, on a tiny network: each release run by the CNN backend, against its ledger")
    aud.add_argument("--table", metavar="PREFIX", help="also write the rows as PREFIX.csv and PREFIX.md")
    aud.add_argument("--empirical", metavar="PREFIX", help="also run the distinguishing test (empirical lower "
                     "bound on mu, simulation methods) and write PREFIX.csv, PREFIX.pdf, PREFIX.png")
    aud.add_argument("--trials", type=int, default=2000, help="runs of the mechanism per data set (--empirical)")
    aud.add_argument("--confidence", type=float, default=0.95, help="confidence of the lower bound (--empirical)")
    aud.add_argument("--seed", type=int, default=0, help="seed of the search and of the test's noise")
    aud.set_defaults(func=_cmd_audit)

    res = sub.add_parser("nn-restore", help="copy committed CNN run files back into a run's results, so "
                                             "Snakemake runs only the missing (point, run) pairs")
    res.add_argument("pieces", nargs="?", help="folder of committed run files of Figures 9-10, laid out as "
                                               "results/<run>/nn/ (e.g. docs/results/paper-nn-mnist/runs)")
    res.add_argument("--readings", metavar="DIR", help="folder of committed pieces of the readings map (nn.readings), "
                                                     "laid out as results/<run>/nn_readings/ "
                                                     "(e.g. docs/results/nn-readings/runs)")
    res.add_argument("--configfile", nargs="+", metavar="FILE", required=True,
                     help="the run's config files as given to snakemake: config.yaml first, then --configfile's")
    res.add_argument("--schema", default="workflow/schemas/config.schema.yaml", help="the config schema")
    res.add_argument("--dry-run", action="store_true", help="say what would be copied, copy nothing")
    res.set_defaults(func=_cmd_nn_restore)

    ben = sub.add_parser("bench", help="CPU seconds of every study's cells (--suite); the speedup over "
                                       "the loop oracle is `python scripts/speedup.py`")
    ben.add_argument("--suite", action="store_true",
                     help="time every study's cells of --config (CPU-s per study and method); required")
    ben.add_argument("--replicates", type=int, default=None, help="replicates per cell (default: the config's)")
    ben.add_argument("--out", type=output_path(".json"), help="optional JSON file for the measurements")
    ben.add_argument("--config", default="config.yaml", help="the pipeline config")
    ben.add_argument("--studies", help="comma-separated studies (default all)")
    ben.set_defaults(func=_cmd_bench)

    summ = sub.add_parser("summarise", help="reduce cell files to one summary file (per cell and method)")
    summ.add_argument("cells", nargs="+", help="cell .parquet files")
    summ.add_argument("--out", required=True, type=output_path(".parquet"), help="output summary .parquet path")
    summ.set_defaults(func=_cmd_summarise)

    plot = sub.add_parser("plot", help="draw one figure from summary files")
    plot.add_argument("summaries", nargs="+", help="summary .parquet files")
    plot.add_argument("--spec", required=True, help="the figure as JSON (layout, model, study, panels)")
    plot.add_argument("--pdf", type=output_path(".pdf"), help="output PDF path")
    plot.add_argument("--png", type=output_path(".png"), help="output PNG path")
    plot.set_defaults(func=_cmd_plot)

    tab = sub.add_parser("table", help="write Table 1 or the rates table from summary files")
    tab.add_argument("kind", choices=["table1", "rates"])
    tab.add_argument("summaries", nargs="+", help="summary .parquet files")
    tab.add_argument("--spec", required=True, help="the table's settings as JSON")
    tab.add_argument("--csv", type=output_path(".csv"), help="output CSV path")
    tab.add_argument("--md", type=output_path(".md"), help="output Markdown path")
    tab.add_argument("--tex", type=output_path(".tex"), help="output LaTeX path")
    tab.set_defaults(func=_cmd_table)
    _realdata_commands(sub)
    _nn_commands(sub)
    _claims_commands(sub)
    _claims_map_commands(sub)
    _decompose_commands(sub)
    _coverage_commands(sub)
    from ..api.fitting import add_parser as add_fit_parser  # fedgdp fit (fedgdp.api.fitting)
    add_fit_parser(sub)
    _describe(sub)
    return ap


_DESCRIPTION = ("Differentially private federated M-estimation (fedgdp): simulations, real-data and "
                "CNN experiments, figures and tables of the paper.")


def _describe(sub) -> None:
    """Give each command's own --help its one-line summary (the text ``fedgdp --help`` lists)."""
    summaries = {a.dest: a.help for a in sub._choices_actions}
    for name, parser in sub.choices.items():
        if parser.description is None:
            parser.description = summaries.get(name)


def _failed(exc: Exception) -> int:
    """Report an error: one line and status 2 for the user's input or environment
    (`fedgdp.common.arguments.user_error`), else the traceback, a line saying it is a
    bug, and status 1."""
    message = user_error(exc)
    if message is None:
        import traceback

        traceback.print_exception(exc)
        sys.stderr.write(f"fedgdp: internal error ({type(exc).__name__}): a bug in fedgdp, not in your "
                         "input; please report it with the traceback above\n")
        return 1
    if isinstance(exc, BrokenPipeError):     # nothing more can go to stdout: silence the final flush
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
    sys.stderr.write(f"fedgdp: error: {message}\n")
    return 2


class _Terminated(BaseException):
    """SIGTERM (e.g. a scheduler or Snakemake stopping the job), raised like Ctrl-C so that
    writers remove their temporary files on the way out."""


#: the stop a signal asked for, set by its handler (`_on_stop`): KeyboardInterrupt (Ctrl-C,
#: exit 130) or `_Terminated` (SIGTERM, exit 143). A library that wraps the raised exception
#: in its own (numba compiling a kernel turns it into a RuntimeError) still ends the run as
#: stopped, with this exit status.
_STOPPING: type[BaseException] | None = None

#: exit status and stderr line of each stop
_STOPS = {KeyboardInterrupt: (130, "fedgdp: interrupted"), _Terminated: (143, "fedgdp: terminated")}

#: how often a stop that arrived while numba compiled looks again (seconds)
_RECHECK_S = 0.05


def _compiling() -> bool:
    """Whether this thread holds numba's compiler lock (False when numba is not loaded)."""
    lock = sys.modules.get("numba.core.compiler_lock")
    return bool(lock is not None and lock.global_compiler_lock.is_locked())


def _on_stop(signum, frame):
    """SIGINT or SIGTERM: raise its stop (`_STOPS`); inside a numba compile, once the compile
    is over: an exception raised inside the compiler can leave LLVM's objects half-built, and
    the process then crashes (SIGSEGV), hangs at teardown, or prints LLVM's errors instead of
    its one line (seen on a cold kernel cache, 3 Ctrl-C tests in 40)."""
    global _STOPPING
    _STOPPING = KeyboardInterrupt if signum == signal.SIGINT else _Terminated
    _stop_when_safe()


def _on_alarm(signum, frame):
    """SIGALRM: a deferred stop looks again (`_on_stop`); otherwise nothing."""
    if _STOPPING is not None:
        _stop_when_safe()


def _stop_when_safe() -> None:
    if _compiling():
        signal.setitimer(signal.ITIMER_REAL, _RECHECK_S)      # `_on_alarm` looks again
        return
    raise _STOPPING()  # type: ignore[misc]  # set by _on_stop before any call


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit status: 0 done, 2 bad input (one line on stderr), 1 an
    internal error (a bug: its traceback and a line saying so), 130 interrupted by
    Ctrl-C, 143 stopped by SIGTERM.

    Parameters
    ----------
    argv : list of str or None, default=None
        The command line without the program name (None: ``sys.argv[1:]``).
    """
    # numpy's OpenBLAS: one thread per process unless the user says otherwise. The
    # estimators multiply tiny matrices, where BLAS threads only add contention, and
    # parallelism comes from running cells side by side (Snakemake jobs).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import threading

    in_main_thread = threading.current_thread() is threading.main_thread()   # signals need it
    handlers = {}
    if in_main_thread:
        handlers = {signal.SIGTERM: signal.signal(signal.SIGTERM, _on_stop),
                    signal.SIGALRM: signal.signal(signal.SIGALRM, _on_alarm)}
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:   # not where Ctrl-C is ignored
            handlers[signal.SIGINT] = signal.signal(signal.SIGINT, _on_stop)
    global _STOPPING
    _STOPPING = None
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except Exception as exc:      # the one error path of every command
        if _STOPPING is not None:          # a stop, wrapped by a library on its way out
            return _stopped(_STOPPING)
        return _failed(exc)
    except KeyboardInterrupt:
        return _stopped(KeyboardInterrupt)
    except _Terminated:
        return _stopped(_Terminated)
    finally:
        if in_main_thread:
            signal.setitimer(signal.ITIMER_REAL, 0)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)


def _stopped(stop: type[BaseException]) -> int:
    code, line = _STOPS[stop]
    sys.stderr.write(line + "\n")
    return code


def console() -> None:
    """The ``fedgdp`` command: `main`'s exit status; stopped by Ctrl-C or SIGTERM, the
    process ends at once after its line (``os._exit``: a signal that arrived while numba
    compiled can leave the compiler in a state the interpreter's teardown crashes on)."""
    code = main()
    if code in (130, 143):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


# ---------------------------------------------------------------- real data (docs/methods.md §5)
_REALDATA_PIPELINE_KEYS = ("tasks", "splits", "figures", "workers")   # config keys of the pipeline, not of one run


def _realdata_overrides(args) -> dict:
    from ..core.settings import flag_values
    from ..realdata.parameters import RealdataSettings

    out: dict = {}
    if args.params:
        loaded = load_params_file(args.params)
        out.update(loaded.get("realdata", loaded))  # type: ignore[union-attr]  # many=False: a dict
    if args.spec:
        out.update(_spec(args.spec))
    for key in _REALDATA_PIPELINE_KEYS:
        out.pop(key, None)
    out.update(flag_values(args, RealdataSettings))
    return _privacy_overrides(args, out)


def _cmd_realdata(args) -> int:
    from ..common.datasets import load_dataset
    from ..realdata import resolve, run_split, write_rows

    p = resolve(_realdata_overrides(args))
    if args.split < 0:
        raise ValueError(f"--split must be >= 0, got {args.split}")
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    try:
        data = load_dataset(p.dataset, p.path)
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if args.verbose else None
    try:  # small matrices: one BLAS thread per job is much faster than oversubscribing
        from threadpoolctl import threadpool_limits
    except ImportError:
        rows = run_split(p, data, args.split, progress=log, workers=args.workers)
    else:
        with threadpool_limits(limits=args.threads):
            rows = run_split(p, data, args.split, progress=log, workers=args.workers)
    write_rows(rows, {**p.as_dict(), "split": args.split}, args.out)
    return 0


def _cmd_realdata_plot(args) -> int:
    from ..realdata import read_rows
    from ..realdata.plots import plot_realdata, realdata_medians

    if not (args.pdf or args.png or args.medians):
        raise ValueError("give --pdf, --png and/or --medians")
    df = read_rows(args.results)
    plot_realdata(df, task=args.task, pdf=args.pdf, png=args.png, title=args.title or None)
    if args.medians:
        from ..common.io import atomic_path

        with atomic_path(args.medians) as tmp:
            realdata_medians(df[df["task"] == args.task]).to_csv(tmp, index=False)
    return 0


def _cmd_fetch_mnist(args) -> int:
    from ..common.datasets import fetch_mnist

    try:
        for path in fetch_mnist(args.dir, timeout=args.timeout):
            print(path)
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    return 0


def _realdata_commands(sub) -> None:
    from ..core.settings import add_flags
    from ..realdata.parameters import RealdataSettings

    real = sub.add_parser("realdata", help="real-data logistic regression: every method on every fold "
                                           "of one client split, one Parquet file")
    real.add_argument("--params", help="YAML file: realdata parameters, or a config with a realdata section")
    real.add_argument("--spec", help="realdata parameters as a JSON object (flags override it)")
    add_flags(real, RealdataSettings)       # a flag per parameter that has a flag type
    _privacy_args(real)
    real.add_argument("--split", type=int, required=True, help="client split index s (0, 1, ...)")
    real.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    real.add_argument("--workers", type=int, default=1,
                      help="processes sharing the split's (fold, method) fits; same rows for any number (default 1)")
    real.add_argument("--verbose", action="store_true", help="log each fit to stderr")
    real.add_argument("--out", required=True, type=output_path(".parquet"), help="output .parquet path")
    real.set_defaults(func=_cmd_realdata)
    show_defaults(real, _module_defaults("fedgdp.realdata"))

    rplot = sub.add_parser("realdata-plot", help="draw Figure 7 or 8 from real-data Parquet files")
    rplot.add_argument("results", nargs="+", help="real-data .parquet files (all splits)")
    rplot.add_argument("--task", required=True, choices=["binary", "multiclass"])
    rplot.add_argument("--title", help="figure title (default: task, data set, layout)")
    rplot.add_argument("--pdf", type=output_path(".pdf"), help="output PDF path")
    rplot.add_argument("--png", type=output_path(".png"), help="output PNG path")
    rplot.add_argument("--medians", type=output_path(".csv"),
                       help="output CSV of median and quartiles per method and mu")
    rplot.set_defaults(func=_cmd_realdata_plot)

    fetch = sub.add_parser("fetch-mnist", help="download the MNIST IDX files and check their MD5 sums")
    fetch.add_argument("--dir", required=True, type=output_dir, help="folder to write the four .gz files to")
    fetch.add_argument("--timeout", type=float, default=30.0, help="seconds per connection attempt")
    fetch.set_defaults(func=_cmd_fetch_mnist)


# ---------------------------------------------------------------- CNNs (docs/methods.md §6, extra nn)
def _nn_commands(sub) -> None:
    """``nn-run``, ``nn-readings``, ``nn-summarise``, ``nn-plot``, ``nn-fetch``, ``nn-bench`` (in
    `fedgdp.nn.commands`; only the commands that train import torch); ``nn-readings`` gets
    C6's verdict per reading from here, since `fedgdp.nn` sits below the reports."""
    from ..nn.commands import add_parsers

    add_parsers(sub)
    sub.choices["nn-readings"].set_defaults(c6=_reading_verdicts)


def _reading_verdicts(table, summaries=None):
    """C6 per reading (`fedgdp.reports.claims.reading_c6`: on a reading's whole grid where its summaries are
    given, else on the map's two points), for summary.md."""
    from ..reports.claims import reading_c6

    return reading_c6(table, summaries)


# ---------------------------------------------------------------- claims report (issue 11)
def _cmd_claims(args) -> int:
    from ..common.io import read_parquet_files
    from ..nn.readings import read_reading_summaries
    from ..reports import claims
    from ..simulation.summary import read_summaries

    _need_output(args, ".csv", ".md")
    spec = _spec(args.spec, SPECS["claims"]) if args.spec else {}
    if not (args.summaries or args.realdata or args.nn or args.nn_reading_summaries):
        raise ValueError("claims has no data: give --summaries, --realdata, --nn and/or --nn-reading-summaries files "
                         "(a report of no results would conclude nothing)")
    summary = read_summaries(args.summaries) if args.summaries else None
    real = None
    if args.realdata:
        from ..realdata import read_rows

        real = read_rows(args.realdata)
    nn = None
    if args.nn:
        from ..nn.plots import SUMMARY_COLUMNS

        nn = read_parquet_files(args.nn, SUMMARY_COLUMNS, "CNN summary")
    readings = None
    if args.nn_readings:
        import pandas as pd

        try:
            readings = pd.read_csv(args.nn_readings)
        except (OSError, pd.errors.ParserError) as exc:
            raise ValueError(f"cannot read --nn-readings {args.nn_readings}: {exc}") from None
        missing = {"dataset", "figure", "x", "run", "reading", "release", "certified_mu", "accuracy"} - set(readings)
        if missing:
            raise ValueError(f"--nn-readings {args.nn_readings} lacks the column(s) {sorted(missing)} of "
                             f"fedgdp nn-readings' readings.csv")
    report = claims.assess(summary, real, nn, spec, readings, read_reading_summaries(args.nn_reading_summaries))
    if args.csv:
        claims.write_csv(report, args.csv)
    if args.md:
        sources = (f"{len(args.summaries)} summary files, {len(args.realdata)} real-data files and "
                   f"{len(args.nn)} CNN summaries")
        if args.nn_reading_summaries:
            sources += f", with {len(args.nn_reading_summaries)} whole-grid CNN summaries under other readings"
        claims.write_markdown(report, args.md, title=spec.get("title", claims.TITLE), sources=sources)
    return 0


_OUTPUT_HELP = {".csv": "output CSV path", ".md": "output Markdown path", ".pdf": "output PDF path",
                ".png": "output PNG path"}


def _output_args(ap, *suffixes: str) -> None:
    """``--csv``, ``--md``, ``--pdf``, ``--png`` (those named): output files, checked at parse time."""
    for suffix in suffixes:
        ap.add_argument(f"--{suffix[1:]}", type=output_path(suffix), help=_OUTPUT_HELP[suffix])


def _need_output(args, *suffixes: str) -> None:
    if not any(getattr(args, suffix[1:]) for suffix in suffixes):
        raise ValueError(f"give at least one of {', '.join('--' + x[1:] for x in suffixes)}")


def _claims_commands(sub) -> None:
    cl = sub.add_parser("claims", help="test the paper's claims (C1-C6) on the results: verdicts "
                                       "and evidence as CSV and Markdown")
    cl.add_argument("--summaries", nargs="*", default=[], help="study summary .parquet files (C1-C4)")
    cl.add_argument("--realdata", nargs="*", default=[], help="real-data .parquet files (C5)")
    cl.add_argument("--nn", nargs="*", default=[], help="CNN summary .parquet files (C6)")
    cl.add_argument("--nn-readings", help="the CNN readings map's readings.csv (fedgdp nn-readings): C6 names the "
                                          "ceiling and the best private reading")
    cl.add_argument("--nn-reading-summaries", nargs="*", default=[],
                    help="whole-grid CNN summaries under other readings (fedgdp nn-readings --summaries: "
                         "paper-nn-mnist-<reading>/fig*_summary.csv): C6 judged per reading on the whole grid")
    cl.add_argument("--spec", help="JSON: models, studies (claim -> studies), title")
    _output_args(cl, ".csv", ".md")
    cl.set_defaults(func=_cmd_claims)


# ---------------------------------------------------------------- claims map (the sensitivity study)
def _cmd_claims_map(args) -> int:
    from ..reports import sensitivity
    from ..simulation.summary import read_summaries

    _need_output(args, ".csv", ".md", ".pdf", ".png")
    spec = _spec(args.spec, SPECS["claims-map"])
    if not (args.summaries or args.realdata):
        raise ValueError("claims-map has no data: give --summaries and/or --realdata files "
                         "(a map of no results would conclude nothing)")
    summary = read_summaries(args.summaries) if args.summaries else None
    real = {}
    if args.realdata:
        from ..realdata import read_rows

        given = set(args.realdata)
        for run in spec.get("realdata", []):
            missing = [f for f in run["files"] if f not in given]
            if missing:
                raise ValueError(f"--realdata lacks {missing[0]} (variant {run['variant']}, dataset {run['dataset']})")
            real[(run["variant"], run["dataset"])] = read_rows(run["files"])
    df = sensitivity.claims_map(summary, real, spec)
    if args.csv:
        sensitivity.write_csv(df, args.csv)
    if args.md:
        sensitivity.write_markdown(df, args.md, spec)
    if args.pdf or args.png:
        sensitivity.draw(df, spec, pdf=args.pdf, png=args.png)
    return 0


def _claims_map_commands(sub) -> None:
    cm = sub.add_parser("claims-map", help="the sensitivity study's claims map: the claims tested on "
                                           "every variant (CSV, Markdown, a figure)")
    cm.add_argument("--summaries", nargs="*", default=[], help="summary .parquet files of the sens_* studies")
    cm.add_argument("--realdata", nargs="*", default=[], help="real-data .parquet files of the variants (C5)")
    cm.add_argument("--spec", required=True, help="JSON: designs, variants, realdata runs, title "
                                                   "(fedgdp.plan.Plan.sensitivity_map_spec)")
    _output_args(cm, ".csv", ".md", ".pdf", ".png")
    cm.set_defaults(func=_cmd_claims_map)


def _cmd_decompose(args) -> int:
    from ..reports import decomposition as dc

    _need_output(args, ".csv", ".md", ".pdf", ".png")
    spec = _spec(args.spec, SPECS["decompose"])
    missing = [r for r in dc.ROLES if r not in spec["studies"]]
    if missing:
        raise ValueError(f"--spec studies lacks the release(s) {missing}; give a study for each of "
                         f"{', '.join(dc.ROLES)}")
    table = dc.decompose(dc.paired(dc.read_rows(args.cells), spec["studies"], int(spec["K_conv"])))
    table = dc.ordered(table, spec.get("methods"))
    if args.csv:
        dc.write_csv(table, args.csv)
    if args.md:
        dc.write_markdown(table, args.md, title=spec.get("title", ""), note=spec.get("caption", ""))
    if args.pdf or args.png:
        from ..reports.plots_decomposition import plot_decomposition

        plot_decomposition(table, spec, args.pdf, args.png)
    return 0


def _coverage_settings(spec: dict) -> tuple:
    """The coverage study's checked settings of a spec, and its cells by name."""
    from ..api import coverage as cv

    settings = cv.check_settings(spec["settings"])
    return settings, {cv.cell_name(c): c for c in cv.cells(settings)}


def _cmd_coverage_cell(args) -> int:
    import pyarrow as pa

    from ..api import coverage as cv
    from ..common.io import write_parquet

    spec = _spec(args.spec, SPECS["coverage-cell"])
    settings, by_name = _coverage_settings(spec)
    if spec["cell"] not in by_name:
        raise ValueError(f"--spec cell {spec['cell']!r} is not a cell of the settings' grid "
                         f"(e.g. {next(iter(by_name))})")
    cell = by_name[spec["cell"]]
    rows = cv.run_cell(cell, replicates=settings.replicates, base_seed=settings.base_seed,
                       alpha=settings.alpha, cov_type=settings.cov_type)
    write_parquet(pa.Table.from_pandas(rows, preserve_index=False), args.out,
                  {"cell": cell, **{k: getattr(settings, k) for k in ("replicates", "base_seed", "alpha", "cov_type")}})
    return 0


def _cmd_coverage(args) -> int:
    from ..api import coverage as cv
    from ..common.io import read_parquet_files

    _need_output(args, ".csv", ".md", ".pdf", ".png")
    spec = _spec(args.spec, SPECS["coverage"])
    _coverage_settings(spec)
    table = cv.coverage_table(read_parquet_files(args.cells, cv.ROW_COLUMNS, "coverage cell"))
    cv.write_table(table, args.csv, args.md, caption=spec.get("caption", ""))
    if args.pdf or args.png:
        cv.plot_coverage(table, args.pdf, args.png, title=spec.get("title", ""), caption=spec.get("caption", ""))
    return 0


def _coverage_commands(sub) -> None:
    cc = sub.add_parser("coverage-cell", help="one cell of the coverage study: every replicate's FederatedGLM fit "
                                              "and its intervals on known-truth data (fedgdp.api.coverage)")
    cc.add_argument("--spec", required=True, help="JSON: settings (the config's coverage section), cell (its name, "
                                                  "e.g. logistic_m10_n1000_mu2_auto)")
    cc.add_argument("--out", required=True, type=output_path(".parquet"), help="output .parquet of the rows")
    cc.set_defaults(func=_cmd_coverage_cell)
    co = sub.add_parser("coverage", help="the coverage study's table and figure from its cell files: coverage "
                                         "of the intervals per coefficient with Monte Carlo SEs")
    co.add_argument("cells", nargs="+", help="cell .parquet files (fedgdp coverage-cell)")
    co.add_argument("--spec", required=True, help="JSON: settings (the config's coverage section); optional "
                                                  "title, caption")
    _output_args(co, ".csv", ".md", ".pdf", ".png")
    co.set_defaults(func=_cmd_coverage)


def _decompose_commands(sub) -> None:
    de = sub.add_parser("decompose", help="split each method's MSE into statistical, optimisation, clipping "
                                          "and privacy terms from paired private / clip_only / plain cells")
    de.add_argument("cells", nargs="+", help="cell .parquet files of the three studies")
    de.add_argument("--spec", required=True, help="JSON: studies (release -> study), K_conv; optional "
                                                  "methods (order), title, caption, name")
    _output_args(de, ".csv", ".md", ".pdf", ".png")
    de.set_defaults(func=_cmd_decompose)
