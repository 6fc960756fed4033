"""The CNN readings map: MNIST runs under readings of the settings the paper leaves open (docs/cnns.md).

A *reading* is a name and settings over the dataset defaults (``{release: clip_only, clip:
10}``), declared in ``config/nn-readings.yaml``. A *piece* is one (reading, point, run): one
``fedgdp nn-run`` of every method, one Parquet file (`piece_path`); pieces on disk are kept,
so the map resumes. The table (`collect`, ``readings.csv``) gives each row's accuracy and
certified mu (`privacy_of`). Only running a piece needs torch.
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.settings import is_bool
from .settings import resolve

__all__ = ["Readings", "Point", "load_readings", "pieces", "piece_path", "run_missing", "collect", "plot_readings",
           "medians_markdown", "summary_markdown", "reading_summaries", "read_reading_summaries", "TABLE_COLUMNS",
           "privacy_of"]

#: the columns of ``readings.csv`` (the first eight are the map's; the rest say how and where)
TABLE_COLUMNS = ["reading", "figure", "x", "mu", "run", "method", "accuracy", "certified_mu", "dataset", "privacy",
                 "release", "accounting", "noise_secret", "reduction", "clip", "lr", "test_loss", "clipped_frac",
                 "mu_spent_min", "mu_spent_max", "elapsed_s", "git_commit", "before_noise_fix"]

#: The commit from which noise joins every noisy step before it meets the parameters (the float32 grid could
#: absorb noise added after: docs/methods.md §2); a piece run from a checkout without it predates the fix
NOISE_FIX = "55f946e83cfd431b4475987dfaaac096758d9ae2"

_KEYS = {"dataset", "data_dir", "points", "runs", "readings", "band", "summary", "panels"}


@dataclass(frozen=True)
class Point:
    """One point of the map: ``figure`` (``fig09``: ``x`` images per client of 100 clients; ``fig10``: ``x``
    clients), the readings run there (None: every reading) and their runs (None: the config's)."""

    figure: str
    x: int
    readings: list | None = None
    runs: int | None = None


@dataclass(frozen=True)
class Readings:
    """A checked readings config (`load_readings`): the dataset, the points, the runs per point, the readings
    (name -> settings over the dataset defaults, in file order), and where and how they are shown."""

    dataset: str
    points: list[Point]
    runs: int
    readings: dict
    data_dir: str = "data"
    band: dict = field(default_factory=dict)
    summary: list = field(default_factory=list)
    panels: list = field(default_factory=list)

    def runs_at(self, point: Point) -> int:
        """The runs of ``point`` (its own, else the config's).

        Parameters
        ----------
        point : Point
        """
        return self.runs if point.runs is None else point.runs

    def readings_at(self, point: Point) -> list:
        """The readings run at ``point`` (its own, else every reading).

        Parameters
        ----------
        point : Point
        """
        return list(self.readings) if point.readings is None else point.readings


def load_readings(path: str | os.PathLike) -> Readings:
    """Read and check a readings config; every reading's settings resolve at every point
    (ValueError naming a bad key or value; ``readings`` kept in file order).

    Parameters
    ----------
    path : str or path
        A YAML file: ``dataset``, ``points`` (``{figure, x}``, optionally the ``readings``
        run there and their ``runs``), ``runs`` (per point unless the point says),
        ``readings`` (name -> settings); optionally ``data_dir``, ``band`` (figure -> the
        paper's range), ``summary`` and ``panels`` (readings shown).
    """
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read the readings config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"the readings config {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a readings config is a mapping, got {type(raw).__name__}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {sorted(unknown)}; known: {', '.join(sorted(_KEYS))}")
    for key in ("dataset", "points", "runs", "readings"):
        if key not in raw:
            raise ValueError(f"{path}: missing key {key!r}")
    runs, readings = raw["runs"], raw["readings"]
    if is_bool(runs) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"{path}: runs must be a positive integer, got runs={runs!r}")
    if not isinstance(readings, dict) or not readings:
        raise ValueError(f"{path}: readings must be a non-empty mapping name -> settings")
    cfg = Readings(**{**raw, "points": [_point(path, point, readings) for point in raw["points"]]})
    for name, over in readings.items():
        if not isinstance(over, dict):
            raise ValueError(f"{path}: reading {name!r}: settings must be a mapping, got {over!r}")
        for given, point in zip(raw["points"], cfg.points):
            if name not in cfg.readings_at(point):
                continue
            try:
                resolve(_settings(cfg, point, over, 0))
            except ValueError as exc:
                raise ValueError(f"{path}: reading {name!r} at {given}: {exc}") from None
    for key in ("summary", "panels"):
        names = getattr(cfg, key)
        if not (isinstance(names, list) and all(isinstance(n, str) and n in readings for n in names)):
            raise ValueError(f"{path}: {key}={names!r} must be a list of declared readings "
                             f"(of {', '.join(readings)})")
    return cfg


def _point(path, point, readings: dict) -> Point:
    """A point of the YAML file, checked (ValueError naming the file and the point)."""
    if not isinstance(point, dict) or not {"figure", "x"} <= set(point) <= {"figure", "x", "readings", "runs"}:
        raise ValueError(f"{path}: a point is {{figure: fig09|fig10, x: int, readings: [names] (optional), "
                         f"runs: int (optional)}}, got {point!r}")
    out = Point(**point)
    where = f"{path}: point {out.figure} x={out.x}"
    runs = point.get("runs", 1)
    if is_bool(runs) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"{where}: runs must be a positive integer, got runs={runs!r}")
    only = point.get("readings", list(readings))
    if not (isinstance(only, list) and only and all(isinstance(n, str) and n in readings for n in only)):
        raise ValueError(f"{where}: readings={only!r} must be a non-empty list of declared readings "
                         f"(of {', '.join(readings)})")
    return out


def _settings(cfg: Readings, point: Point, over: dict, run: int) -> dict:
    """A piece's settings: the point's size, the run index, the reading's overrides."""
    size = {"m": 100, "n": point.x} if point.figure == "fig09" else {"m": point.x}
    return {"dataset": cfg.dataset, "figure": point.figure, **size, "run": run, **over}


def pieces(cfg: Readings) -> list[tuple]:
    """Every ``(reading, figure, x, run, settings)`` of the map, run by run (so a partial map has whole runs).

    Parameters
    ----------
    cfg : Readings
        A config of `load_readings`.
    """
    most = max(cfg.runs_at(pt) for pt in cfg.points)
    return [(name, pt.figure, int(pt.x), run, _settings(cfg, pt, over, run))
            for run in range(most) for pt in cfg.points for name, over in cfg.readings.items()
            if name in cfg.readings_at(pt) and run < cfg.runs_at(pt)]


def piece_path(runs_dir: str | os.PathLike, reading: str, figure: str, x: int, run: int) -> Path:
    """Where a piece's Parquet lives: ``<runs_dir>/<reading>/<figure>-<x>-run<run>.parquet``.

    Parameters
    ----------
    runs_dir : str or path
        The map's folder of pieces.
    reading, figure : str
    x, run : int
    """
    return Path(runs_dir) / reading / f"{figure}-{x}-run{run}.parquet"


def run_missing(cfg: Readings, runs_dir: str | os.PathLike, *, device: str = "auto", threads: int | None = None,
                progress: bool = True, budget_s: float | None = None) -> list[Path]:
    """Run every missing piece in `pieces`' order (each written atomically), none started after ``budget_s``.

    Parameters
    ----------
    cfg : Readings
        A config of `load_readings`.
    runs_dir : str or path
        The map's folder of pieces.
    device : str
        The torch device (``fedgdp.nn.train.resolve_device``).
    threads : int, optional
        torch CPU threads.
    progress : bool
        One line per round of every method on standard error.
    budget_s : float, optional
        Start no piece after this many seconds (a started piece runs to its end).
    """
    import sys
    import time

    from .data import load_images
    from .run import run_nn, write_runs

    start = time.monotonic()
    data = load_images(cfg.dataset, cfg.data_dir)
    written = []
    for reading, figure, x, run, over in pieces(cfg):
        out = piece_path(runs_dir, reading, figure, x, run)
        if out.exists():
            continue
        if budget_s is not None and time.monotonic() - start >= budget_s:
            print(f"budget of {budget_s:g} s spent: no piece started from {reading} {figure}-{x}-run{run} on",
                  file=sys.stderr)
            break
        p = resolve(over)
        rows = run_nn(p, device=device, threads=threads, data=data, progress=progress)
        write_runs(rows, p, out)
        written.append(out)
    return written


def privacy_of(release: str, mu: float, accounting: str, noise_secret: bool = False, noise_for: str = "release",
               mu_composed: float = math.nan) -> tuple[float, str]:
    """The privacy a run really gives: ``(certified_mu, text)``, mu where the run adds noise calibrated to it
    (inf otherwise) and what is protected, or why nothing is. A derived (known) noise seed is said in the text,
    not in ``certified_mu``: it voids the guarantee for private data only (docs/privacy.md, the seed rule).

    Parameters
    ----------
    release : str
        ``private``, ``clip_only`` or ``plain``.
    mu : float
        The run's target mu.
    accounting : str
        ``printed`` or ``schedule``.
    noise_secret : bool, default=False
        Whether the run's noise came from fresh entropy (``fedgdp nn-run --fresh-noise``).
    noise_for : str, default="release"
        ``mean``: the run spends ``mu_composed``, not ``mu`` (`fedgdp.nn.settings.NOISE_FOR`).
    mu_composed : float, default=nan
        The run's ledger composed (its largest client's); read under ``noise_for: mean``.
    """
    if release == "private" and math.isfinite(mu) and noise_for == "mean":
        return float(mu_composed), (f"not mu-GDP at mu = {mu:g}: the noise is calibrated for the mean of a summed "
                                    f"release; the ledger's record-level mu at each client (n_i mu for a method whose "
                                    f"releases are all summed; about n_i mu / sqrt(2) for FedNewton-Iter, whose Newton "
                                    f"release stays a mean) is up to {mu_composed:g}")
    if release == "private" and math.isfinite(mu):
        how = "each client's releases" if accounting == "printed" else "each drawn client's releases (schedule)"
        what = f"record-level mu-GDP at each client, calibrated to {how}"
        if noise_secret:
            return float(mu), what + "; noise from fresh entropy (secret)"
        return float(mu), (what + "; noise from the derived seed (known): void for private data while the seed "
                                  "is known, kept for public data")
    if release == "clip_only" and math.isfinite(mu):
        return math.inf, "not mu-GDP as run: clipped without noise"
    return math.inf, "not private: neither clipped nor noisy"


def collect(cfg: Readings, runs_dir: str | os.PathLike):
    """The table of every piece on disk, one row per (reading, point, run, method), columns `TABLE_COLUMNS` in
    the config's order, and the (reading, figure, x, run) not yet on disk.

    Parameters
    ----------
    cfg : Readings
        A config of `load_readings`.
    runs_dir : str or path
        The map's folder of pieces.
    """
    import pandas as pd

    from .run import piece_settings, read_runs

    rows, missing = [], []
    for reading, figure, x, run, _ in pieces(cfg):
        path = piece_path(runs_dir, reading, figure, x, run)
        if not path.exists():
            missing.append((reading, figure, x, run))
            continue
        recorded, commit = piece_settings(path)
        reduction = recorded.get("reduction", "mean")     # a piece from before it: the mean
        before = predates_noise_fix(commit)
        for r in read_runs([path]).to_dict("records"):
            cert, text = privacy_of(r["release"], r["mu"], r["accounting"], r["noise_secret"],
                                    recorded.get("noise_for", "release"), r["mu_composed"])
            rows.append({"reading": reading, "figure": figure, "x": x, "mu": r["mu"], "run": run,
                         "method": r["method"], "accuracy": r["test_accuracy"], "certified_mu": cert,
                         "dataset": r["dataset"], "privacy": text, "release": r["release"],
                         "accounting": r["accounting"], "noise_secret": r["noise_secret"], "reduction": reduction,
                         "clip": r["clip"], "lr": r["lr"], "test_loss": r["test_loss"],
                         "clipped_frac": r["clipped_frac"], "mu_spent_min": r["mu_spent_min"],
                         "mu_spent_max": r["mu_spent_max"], "elapsed_s": r["elapsed_s"], "git_commit": commit,
                         "before_noise_fix": before})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS), missing


@functools.cache
def predates_noise_fix(commit: str) -> bool | None:
    """Whether ``commit`` predates `NOISE_FIX` (True), contains it (False), or cannot be told (None: no git,
    no history, or an unknown commit), asked of the git history of this package's checkout.

    Parameters
    ----------
    commit : str
        A piece's recorded ``git_commit``.
    """
    import subprocess

    root = Path(__file__).resolve().parents[3]
    try:
        rc = subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", NOISE_FIX, commit],
                            capture_output=True, timeout=30).returncode
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: False, 1: True}.get(rc)


def code_label(rows) -> str:
    """The commits a set of pieces ran from (short), and whether that code predates `NOISE_FIX`.

    Parameters
    ----------
    rows : pandas.DataFrame
        `collect`'s rows (``git_commit``, ``before_noise_fix``).
    """
    if "git_commit" not in rows:
        return ""
    kinds: dict = {"": [], "before the noise fix: ": [], "fix unknown: ": []}
    for commit, g in rows.groupby("git_commit", sort=True):
        flag = g["before_noise_fix"].iloc[0]
        kinds["fix unknown: " if flag is None or flag != flag else "before the noise fix: " if flag else ""].append(
            str(commit)[:7])
    return "; ".join(kind + ", ".join(commits) for kind, commits in kinds.items() if commits)


def reading_summaries(cfg: Readings, runs_dir: str | os.PathLike, table, missing) -> dict:
    """Each (reading, figure) whose pieces are all on disk, summarised as the printed grid is: ``{(reading,
    figure): summary}``, a summary with a ``reading`` column first, then `fedgdp.nn.plots.SUMMARY_COLUMNS`
    (``mu`` the printed mu), then ``certified_mu``, the mu the point's runs really spend (their largest; inf
    where nothing is certified), and ``privacy``, that run's text of what it protects. A figure with a piece
    missing is left out: a median over fewer runs than the grid's is not its summary.

    Parameters
    ----------
    cfg : Readings
        A config of `load_readings`.
    runs_dir : str or path
        The map's folder of pieces.
    table : pandas.DataFrame
        `collect`'s table of those pieces (its ``certified_mu``).
    missing : list of tuple
        `collect`'s pieces not on disk, ``(reading, figure, x, run)``: the summaries read the pieces the table
        read, even while a running map adds more.
    """
    from .plots import SUMMARY_COLUMNS, summarise_runs
    from .run import read_runs

    by_figure: dict = {}
    for reading, figure, x, run, _ in pieces(cfg):
        by_figure.setdefault((reading, figure), []).append(piece_path(runs_dir, reading, figure, x, run))
    incomplete = {(m[0], m[1]) for m in missing}
    out = {}
    for (reading, figure), paths in by_figure.items():
        if (reading, figure) in incomplete:
            continue
        s = summarise_runs(read_runs(paths))
        ours = table[(table["reading"] == reading) & (table["figure"] == figure)]
        cert = ours.sort_values("certified_mu", kind="stable").groupby(["figure", "x", "method"], as_index=False)[
            ["certified_mu", "privacy"]].last()
        s = s.merge(cert, on=["figure", "x", "method"], how="left", validate="one_to_one")
        s.insert(0, "reading", reading)
        out[(reading, figure)] = s[["reading", *SUMMARY_COLUMNS, "certified_mu", "privacy"]]
    return out


def medians_markdown(table, cfg: Readings) -> str:
    """A Markdown table of median accuracy over runs: a row per (reading, point), a column per method.

    Parameters
    ----------
    table : pandas.DataFrame
        `collect`'s table.
    cfg : Readings
        The config (its order of readings and points).
    """
    from .settings import LABELS, METHODS

    code = "git_commit" in table          # which code each piece ran (collect's tables have it)
    head = ["reading", "point", *[LABELS[m].replace("DP-", "") for m in METHODS], "runs", "certified mu",
            "clipped", *(["code"] if code else [])]
    lines = ["Median test accuracy over runs (`readings.csv`; certified mu: inf = not private as run; code: the "
             f"commits the pieces ran from, marked where they predate the noise fix {NOISE_FIX[:7]}, docs/methods.md "
             "§2).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pt in cfg.points:
        for name in cfg.readings:
            g = table[(table["reading"] == name) & (table["figure"] == pt.figure) & (table["x"] == pt.x)]
            if g.empty:
                continue
            med = g.groupby("method")["accuracy"].median()
            cells = [f"{med[m]:.3f}" if m in med else "" for m in METHODS]
            point = f"{'Fig. 9, n' if pt.figure == 'fig09' else 'Fig. 10, m'} = {pt.x}"
            lines.append(f"| {name} | {point} | " + " | ".join(cells) +
                         f" | {g['run'].nunique()} | {g['certified_mu'].max():g} | {g['clipped_frac'].mean():.2f} |"
                         + (f" {code_label(g)} |" if code else ""))
    return "\n".join(lines) + "\n"


def _changes(over: dict) -> str:
    """What a reading changes from the printed settings, in words."""
    if not over:
        return "nothing (the settings as printed)"
    return ", ".join(f"{k} {v}" for k, v in over.items())


def _spent(g) -> str:
    """The mu a reading's runs really spend: none, the target, or the ledger's (paper_sum)."""
    cert = g["certified_mu"]
    if not np.isfinite(cert).any():
        return "none (not private)"
    lo, hi = (f"{round(float(v), 1):g}" for v in (cert.min(), cert.max()))   # to a tenth: 56.6, 960
    return lo if lo == hi else f"{lo}-{hi}"


def privacy_label(rows) -> str:
    """What a reading's rows spend, in words: not private, the certified mu, or the mu really spent.

    Parameters
    ----------
    rows : pandas.DataFrame
        Rows of `collect`'s table (``certified_mu``, ``privacy``).
    """
    if not np.isfinite(rows["certified_mu"]).any():
        return "not private"
    if rows["privacy"].str.startswith("record-level").all():
        return f"certified mu = {_spent(rows)}"
    return f"mu really spent {_spent(rows)}, no guarantee at the printed mu"


def summary_markdown(table, cfg: Readings, c6: dict | None = None) -> str:
    """The README's table of the ``summary`` readings: changes, mu spent, median accuracies per point, C6
    ("" when ``summary`` is empty). C6 goes in a column named after the test that gave it: "C6 (whole grid)"
    and, where a reading has no whole grid, "C6 (two points)".

    Parameters
    ----------
    table : pandas.DataFrame
        `collect`'s table.
    cfg : Readings
        The config (``summary``, ``points``, ``readings``).
    c6 : dict of str to (str, str), optional
        Reading -> (C6's verdict, its basis: "whole grid" or "two points"), as
        `fedgdp.reports.claims.reading_c6` gives them; a reading without one reads "not run" (two points).
    """
    if not cfg.summary:
        return ""
    points = sorted(cfg.points, key=lambda pt: (pt.figure != "fig10", pt.x))
    verdicts = {name: (c6 or {}).get(name, ("not run", "two points")) for name in cfg.summary}
    bases = [b for b in ("whole grid", "two points") if c6 is not None and b in {v[1] for v in verdicts.values()}]
    head = ["reading", "what it changes", "mu really spent",
            *(f"{'Fig. 9, n' if pt.figure == 'fig09' else 'Fig. 10, m'} = {pt.x}" for pt in points),
            *(f"C6 ({b})" for b in bases), *(["code"] if "git_commit" in table else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in cfg.summary:
        rows = table[table["reading"] == name]
        cells = [name, _changes(cfg.readings[name]), _spent(rows) if len(rows) else ""]
        for pt in points:
            g = rows[(rows["figure"] == pt.figure) & (rows["x"] == pt.x)]
            med = g.groupby("method")["accuracy"].median()
            cells.append(f"{med.min():.2f}-{med.max():.2f} ({g['run'].nunique()})" if len(med) else "not run")
        cells += [verdicts[name][0] if verdicts[name][1] == b else "" for b in bases]
        if "git_commit" in table:
            cells.append(code_label(rows) if len(rows) else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def read_reading_summaries(paths: list):
    """Whole-grid summaries of readings (``paper-nn-<dataset>-<reading>/<figure>_summary.csv``, as
    `reading_summaries` writes them) as one table; None when no path is given. A file that cannot be read
    or lacks a reading summary's columns is one ValueError naming it.

    Parameters
    ----------
    paths : list of str or path
        The CSV files.
    """
    if not paths:
        return None
    import pandas as pd

    from .plots import SUMMARY_COLUMNS

    tables = []
    for path in paths:
        try:
            t = pd.read_csv(path)
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise ValueError(f"cannot read the reading summary {path}: {exc}") from None
        missing = [c for c in ["reading", *SUMMARY_COLUMNS, "certified_mu", "privacy"] if c not in t]
        if missing:
            raise ValueError(f"the reading summary {path} lacks the column(s) {missing} of a reading's summary "
                             f"(fedgdp nn-readings --summaries)")
        tables.append(t)
    return pd.concat(tables, ignore_index=True)


def plot_readings(table, cfg: Readings, out: str | os.PathLike) -> list:
    """Accuracy by reading: a panel per point, a dot per (run, method), medians as bars, the paper's band.

    Parameters
    ----------
    table : pandas.DataFrame
        `collect`'s table.
    cfg : Readings
        The config (its readings' order and ``band``).
    out : str or path
        The PNG file (a PDF goes beside it).
    """
    from ..common.figures import method_style, pyplot, save_figure
    from .settings import LABELS, METHODS

    plt = pyplot()
    points = [(pt.figure, int(pt.x)) for pt in cfg.points]
    names = list(cfg.readings)
    fig, axes = plt.subplots(1, len(points), figsize=(4.2 * len(points), 0.42 * len(names) + 1.6), sharey=True,
                             squeeze=False)
    for ax, (figure, x) in zip(axes[0], points):
        band = cfg.band.get(figure)
        if band:
            ax.axvspan(band[0], band[1], color="0.85", zorder=0, label="paper's range")
        sub = table[(table["figure"] == figure) & (table["x"] == x)]
        for j, method in enumerate(METHODS):
            pts = sub[sub["method"] == method]
            ypos = [names.index(r) + (j - 1.5) * 0.15 for r in pts["reading"]]
            ax.scatter(pts["accuracy"], ypos, s=12, color=method_style(method)["color"],
                       label=LABELS[method].replace("DP-", ""))
            for r, g in pts.groupby("reading"):
                y = names.index(r) + (j - 1.5) * 0.15
                ax.plot([np.median(g["accuracy"])] * 2, [y - 0.07, y + 0.07], color=method_style(method)["color"])
        ax.set_title(f"{'Figure 9, n' if figure == 'fig09' else 'Figure 10, m'} = {x}", fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_xlabel("test accuracy")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(names)), names, fontsize=8)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))      # beside, never over, a dot
    fig.suptitle(f"CNN readings on {cfg.dataset}\ndots: runs; bars: medians over runs; grey: the paper's range",
                 fontsize=9)
    fig.tight_layout()
    png = Path(out)
    return save_figure(fig, png.with_suffix(".pdf"), png, title="CNN readings map")
