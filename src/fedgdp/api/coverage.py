"""The coverage study of `FederatedGLM.summary()`'s intervals on known-truth data
(docs/methods.md §10, "Coverage"; pipeline target ``coverage``, config ``coverage``).

A cell is (family, m, n_i, mu, method): m clients of n_i standard normal rows, responses
from the family at the configured ``truth``, one default `FederatedGLM` fit per replicate.
Per coefficient the table gives the coverage of its ``1 - alpha`` interval with Monte Carlo
SE, beside width, ``se_sampling``, ``se_noise``, sd and bias. A replicate's data depend
on (family, truth, m, n_i) only, so every mu and method sees the same data sets.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.families import get_family
from ..core.seeds import seed_sequence
from ..core.settings import Settings, setting

__all__ = ["FAMILIES", "ROW_COLUMNS", "TABLE_COLUMNS", "HOLDS", "CoverageSettings", "check_settings", "cells",
           "cell_name", "replicate", "run_cell", "coverage_table", "write_table", "plot_coverage"]

#: The families of the study (known truth on standard normal features)
FAMILIES = ("logistic", "poisson")
#: Where coverage is said to hold (docs/methods.md §10)
HOLDS = (0.93, 0.97)
#: One row per (replicate, coefficient) of a cell
ROW_COLUMNS = ("family", "m", "n", "mu", "method", "replicate", "term", "truth", "coef", "ci_low", "ci_high",
               "covered", "se_sampling", "se_noise", "method_used", "status", "failed")
#: The table's columns: one row per (cell, coefficient)
TABLE_COLUMNS = ("family", "m", "n", "mu", "method", "method_used", "term", "truth", "replicates", "failed",
                 "coverage", "mc_se", "mean_width", "mean_se_sampling", "mean_se_noise", "sd_coef", "bias",
                 "converged")
_KEYS = {"families", "m", "n", "mu", "methods", "replicates", "base_seed", "alpha", "cov_type"}


def _positive_ints(key: str, value) -> list[int]:
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in value):
        raise ValueError(f"coverage.{key} must be a non-empty list of positive integers, got {value!r}")
    return [int(v) for v in value]


def _families(key: str, fam) -> dict:
    if not isinstance(fam, dict) or not fam:
        raise ValueError(f"coverage.families must map a family to its truth, got {fam!r}")
    for name, truth in fam.items():
        if name not in FAMILIES:
            raise ValueError(f"coverage.families: unknown family {name!r}; choose from {', '.join(FAMILIES)}")
        if not isinstance(truth, (list, tuple)) or len(truth) < 2 or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in truth):
            raise ValueError(f"coverage.families.{name}: the truth must be a list of at least 2 finite numbers "
                             f"(intercept first), got {truth!r}")
    return {k: [float(v) for v in t] for k, t in fam.items()}


def _mus(key: str, value) -> list[float]:
    mus = []
    for v in value if isinstance(value, (list, tuple)) else [None]:
        try:
            x = float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            x = math.nan
        if not x > 0:
            raise ValueError(f"coverage.mu must be a list of positive numbers or inf, got {value!r}")
        mus.append(x)
    return mus


def _methods(key: str, methods) -> list[str]:
    from ..realdata import REGISTRY

    known = ["auto", *REGISTRY]
    if not isinstance(methods, (list, tuple)) or not methods or any(m not in known for m in methods):
        raise ValueError(f"coverage.methods must be a list of {', '.join(known)}, got {methods!r}")
    return list(methods)


def _count(low: int, what: str):
    def parse(key: str, value) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"coverage.{key} must be a {what} integer, got {value!r}")
        return value
    return parse


def _alpha(key: str, alpha) -> float:
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise ValueError(f"coverage.alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def _cov_type(key: str, value) -> str:
    from .inference import COV_TYPES

    if value not in COV_TYPES:
        raise ValueError(f"coverage.cov_type must be one of {', '.join(COV_TYPES)}, got {value!r}")
    return value


@dataclass(frozen=True)
class CoverageSettings(Settings):
    """The coverage study's settings (the config's ``coverage`` section), checked field by field
    (`check_settings`)."""

    WHAT: ClassVar[str] = "coverage setting"

    families: dict = setting(help="family -> truth, a list of numbers, intercept first", parse=_families,
                             factory=dict)
    m: list = setting(help="clients per cell (positive integers)", parse=_positive_ints, factory=list)
    n: list = setting(help="rows per client (positive integers)", parse=_positive_ints, factory=list)
    mu: list = setting(help="mu of the cells (positive numbers or inf), as floats", parse=_mus, factory=list)
    methods: list = setting(help="FederatedGLM methods, auto included", parse=_methods, factory=list)
    replicates: int = setting(1, "replicates per cell", parse=_count(1, "positive"))
    base_seed: int = setting(0, "the study's base seed", parse=_count(0, "non-negative"))
    alpha: float = setting(0.05, "the intervals' 1 - level, in (0, 1)", parse=_alpha)
    cov_type: str = setting("model", "summary()'s cov_type", parse=_cov_type)
    title: str | None = setting(None, "the figure's title")


def check_settings(settings: dict) -> CoverageSettings:
    """The study's settings checked (ValueError naming the key and value), mu as floats.

    Parameters
    ----------
    settings : dict
        ``families`` (family -> truth, a list of numbers, intercept first), ``m``, ``n``
        (lists of positive integers), ``mu`` (positive numbers or ``inf``), ``methods``
        (`FederatedGLM` methods, ``auto`` included), ``replicates``, ``base_seed``,
        ``alpha`` and ``cov_type`` (every one needed), and an optional ``title``.

    Returns
    -------
    CoverageSettings
    """
    if not isinstance(settings, dict):
        raise ValueError(f"coverage settings must be a mapping, got {settings!r}")
    missing, unknown = _KEYS - set(settings), set(settings) - _KEYS - {"title"}
    if missing or unknown:
        raise ValueError(f"coverage: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
    return CoverageSettings.build(settings)


def cells(settings: CoverageSettings) -> list[dict]:
    """The grid's cells, in order: family, m, n, mu, method (each with its truth).

    Parameters
    ----------
    settings : CoverageSettings
        Checked settings (`check_settings`).
    """
    return [{"family": f, "truth": list(truth), "m": m, "n": n, "mu": mu, "method": meth}
            for f, truth in settings.families.items() for m in settings.m for n in settings.n
            for mu in settings.mu for meth in settings.methods]


def cell_name(cell: dict) -> str:
    """A cell's file name stem, e.g. ``logistic_m10_n1000_mu2_auto`` (``muinf``).

    Parameters
    ----------
    cell : dict
    """
    return f"{cell['family']}_m{cell['m']}_n{cell['n']}_mu{float(cell['mu']):g}_{cell['method']}"


def _data(cell: dict, r: int, base_seed: int):
    key = {"family": cell["family"], "truth": [float(v) for v in cell["truth"]], "m": cell["m"], "n": cell["n"]}
    rng = np.random.default_rng(seed_sequence(base_seed, key, r))
    truth = np.asarray(cell["truth"], float)
    N = cell["m"] * cell["n"]
    X = rng.standard_normal((N, len(truth) - 1))
    s = truth[0] + X @ truth[1:]
    y = get_family(cell["family"]).draw(rng, s)
    return X, y, np.repeat(np.arange(cell["m"]), cell["n"])


def replicate(cell: dict, r: int, *, base_seed: int, alpha: float = 0.05, cov_type: str = "model") -> list[dict]:
    """One replicate of a cell: its fit's interval per coefficient (`ROW_COLUMNS`); ``failed`` if it raised.

    Parameters
    ----------
    cell : dict
        A cell of `cells`.
    r : int
        The replicate's index.
    base_seed : int
    alpha : float, default=0.05
    cov_type : {"model", "robust"}, default="model"
    """
    from .estimator import FederatedGLM

    X, y, clients = _data(cell, r, base_seed)
    truth = np.asarray(cell["truth"], float)
    terms = ["(intercept)"] + [f"x{j}" for j in range(len(truth) - 1)]
    base = {k: cell[k] for k in ("family", "m", "n", "mu", "method")} | {"replicate": r}
    key = {k: cell[k] for k in ("family", "m", "n", "mu", "method")} | {"truth": list(map(float, truth))}
    est = FederatedGLM(family=cell["family"], mu=cell["mu"], method=cell["method"],
                       random_state=seed_sequence(base_seed, key, r, stream="fit"),
                       **({"classes": [0, 1]} if get_family(cell["family"]).labelled else {}))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y, clients)
            s = est.summary(alpha=alpha, cov_type=cov_type, withheld="show")   # every interval, its note kept
    except ValueError as exc:
        return [base | {"term": t, "truth": float(b), "coef": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                        "covered": False, "se_sampling": math.nan, "se_noise": math.nan, "method_used": "",
                        "status": f"failed: {exc}"[:200], "failed": True} for t, b in zip(terms, truth)]
    status = str(est.fit_info_.get("status", ""))
    return [base | {"term": t, "truth": float(b), "coef": float(row["coef"]), "ci_low": float(row["ci_low"]),
                    "ci_high": float(row["ci_high"]), "covered": bool(row["ci_low"] <= b <= row["ci_high"]),
                    "se_sampling": float(row["se_sampling"]), "se_noise": float(row["se_noise"]),
                    "method_used": est.method_, "status": status, "failed": False}
            for t, b, (_, row) in zip(terms, truth, s.iterrows())]


def run_cell(cell: dict, *, replicates: int, base_seed: int, alpha: float = 0.05, cov_type: str = "model"):
    """Every replicate of one cell: ``replicates x d`` rows, columns `ROW_COLUMNS`.

    Parameters
    ----------
    cell : dict
    replicates : int
    base_seed : int
    alpha : float, default=0.05
    cov_type : {"model", "robust"}, default="model"
    """
    import pandas as pd

    rows = [row for r in range(replicates)
            for row in replicate(cell, r, base_seed=base_seed, alpha=alpha, cov_type=cov_type)]
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def coverage_table(rows):
    """Coverage per (cell, coefficient) of replicate rows (`run_cell`'s, any cells), columns `TABLE_COLUMNS` in
    the rows' order: ``coverage`` over the fits that returned, ``mc_se = sqrt(c (1 - c) / R)``.

    Parameters
    ----------
    rows : pandas.DataFrame
        Columns `ROW_COLUMNS`.
    """
    import pandas as pd

    missing = set(ROW_COLUMNS) - set(rows.columns)
    if missing:
        raise ValueError(f"coverage rows lack columns {sorted(missing)}")
    keys = ["family", "m", "n", "mu", "method", "term"]
    out = []
    for key, g in rows.groupby(keys, sort=False):
        ok = g[~g["failed"].astype(bool)]
        R = len(ok)
        c = float(ok["covered"].mean()) if R else math.nan
        out.append(dict(zip(keys, key)) | {
            "method_used": ",".join(sorted(set(ok["method_used"]))), "truth": float(g["truth"].iloc[0]),
            "replicates": R, "failed": int(len(g) - R), "coverage": c,
            "mc_se": math.sqrt(c * (1 - c) / R) if R else math.nan,
            "mean_width": float((ok["ci_high"] - ok["ci_low"]).mean()) if R else math.nan,
            "mean_se_sampling": float(ok["se_sampling"].mean()) if R else math.nan,
            "mean_se_noise": float(ok["se_noise"].mean()) if R else math.nan,
            "sd_coef": float(ok["coef"].std(ddof=1)) if R > 1 else math.nan,
            "bias": float(ok["coef"].mean() - g["truth"].iloc[0]) if R else math.nan,
            "converged": float((ok["status"] == "converged").mean()) if R else math.nan})
    return pd.DataFrame(out, columns=list(TABLE_COLUMNS))


def write_table(table, csv: str | os.PathLike | None = None, md: str | os.PathLike | None = None, *,
                caption: str = "") -> None:
    """The table as CSV and Markdown (each atomically; the Markdown with ``caption`` above it).

    Parameters
    ----------
    table : pandas.DataFrame
        `coverage_table`'s.
    csv, md : str, path-like or None
    caption : str, default=""
    """
    from ..common.io import write_text

    if csv:
        write_text(csv, table.to_csv(index=False, float_format="%.6g"))
    if md:
        cols = list(TABLE_COLUMNS)
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for _, r in table.iterrows():
            cells_ = [f"{v:.3f}" if isinstance(v, float) and c not in ("mu", "truth") else
                      (f"{v:g}" if isinstance(v, float) else str(v)) for c, v in r.items()]
            lines.append("| " + " | ".join(cells_) + " |")
        write_text(md, (caption + "\n\n" if caption else "") + "\n".join(lines) + "\n")


def plot_coverage(table, pdf=None, png=None, *, title: str = "", caption: str = ""):
    """The coverage figure: a panel per (family, method), points per mu with +-2 MC SEs, the band [0.93, 0.97].

    Parameters
    ----------
    table : pandas.DataFrame
        `coverage_table`'s (one alpha).
    pdf, png : str, path-like or None
    title, caption : str, default=""
    """
    from ..common.figures import pyplot, save_figure

    if table.empty:
        raise ValueError("the coverage table has no rows")
    plt = pyplot()
    fams, meths = list(dict.fromkeys(table["family"])), list(dict.fromkeys(table["method"]))
    mus = sorted(table["mu"].unique())
    sizes = list(dict.fromkeys(zip(table["m"], table["n"])))
    colors = plt.get_cmap("tab10")
    fig, axes = plt.subplots(len(fams), len(meths), figsize=(2.2 + 3.2 * len(meths), 2.9 * len(fams) + 1.2),
                             squeeze=False, sharey=True)
    width = 0.7 / max(len(sizes), 1)
    for i, fam in enumerate(fams):
        for j, meth in enumerate(meths):
            ax = axes[i, j]
            ax.axhspan(*HOLDS, color="0.85", zorder=0)
            ax.axhline(0.95, color="black", linewidth=0.8)
            sub = table[(table["family"] == fam) & (table["method"] == meth)]
            for k, (m, n) in enumerate(sizes):
                g = sub[(sub["m"] == m) & (sub["n"] == n)]
                x = np.array([mus.index(v) for v in g["mu"]], float) + (k - (len(sizes) - 1) / 2) * width
                terms = list(dict.fromkeys(g["term"]))
                jitter = np.array([terms.index(t) for t in g["term"]]) * width / (len(terms) + 1) - width / 3
                c, e = g["coverage"].to_numpy(), 2 * g["mc_se"].to_numpy()
                yerr = np.vstack([np.minimum(e, c), np.minimum(e, 1 - c)])       # within [0, 1]
                ax.errorbar(x + jitter, c, yerr=yerr, fmt="o", markersize=3, capsize=1.5,
                            elinewidth=0.7, color=colors(k % 10), label=f"m = {m}, n_i = {n}" if i == j == 0 else None)
            ax.set_xticks(range(len(mus)))
            ax.set_xticklabels([f"{v:g}" for v in mus])
            ax.set_xlabel("mu")
            ax.set_title(f"{fam}, method {meth}", fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
        axes[i, 0].set_ylabel("coverage")
    fig.legend(loc="upper center", ncol=min(len(sizes), 4), fontsize=8, bbox_to_anchor=(0.5, 0.995))
    if caption:
        fig.text(0.01, 0.005, caption, fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.12 if caption else 0.02, 1, 0.93))
    save_figure(fig, pdf, png, title=title)
    return fig
