"""Figures 7 and 8: per-client AUC / accuracy of the nine real-data methods (docs/methods.md §5).

One panel per mu (largest first): one box per method over its m x S per-client values,
the private methods at that mu, then, shaded, the non-private baselines (the same in
every panel); a non-private twin has its algorithm's colour, hatched.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from ..common.figures import HATCHED, method_style, pyplot, rows_of, save_figure
from .parameters import METRICS, NONPRIVATE, PRIVATE, REGISTRY

__all__ = ["plot_realdata", "method_colors", "realdata_medians"]

_YLABEL = {"auc": "per-client AUC (out-of-fold)", "accuracy": "per-client accuracy (out-of-fold)"}
_METRIC_NAME = {"auc": "AUC", "accuracy": "accuracy"}
_TASK_TITLE = {"binary": "binary logistic regression (odd vs even digit)",
               "multiclass": "10-class softmax regression"}


def method_colors() -> dict[str, str]:
    """Box colour of every real-data method (`fedgdp.common.figures.METHOD_STYLE`)."""
    return {name: method_style(name)["color"] for name in REGISTRY}


def realdata_medians(df: pd.DataFrame) -> pd.DataFrame:
    """Median, quartiles and count of the per-client values, one row per (task, dataset, method, mu):
    ``mu_certified`` (inf unless every release and the bound are certified, so a nominal mu never shows as a
    guarantee), ``median``, ``q25``, ``q75``, ``count``; private levels by mu descending, then mu = inf,
    registry order.

    Parameters
    ----------
    df : pandas.DataFrame
        Real-data rows (`fedgdp.realdata.run.COLUMNS`); NaN values are left out.
    """
    rows = df.dropna(subset=["value"])
    keys = ["task", "dataset", "method", "mu"]
    g = rows.groupby(keys, sort=False)["value"]
    out = g.agg(median="median", q25=lambda v: v.quantile(0.25), q75=lambda v: v.quantile(0.75),
                count="count").reset_index()
    cert = rows["mu_certified"] if "mu_certified" in rows else pd.Series(np.inf, index=rows.index)
    out.insert(4, "mu_certified", cert.groupby([rows[k] for k in keys], sort=False).max().to_numpy())
    order = {name: i for i, name in enumerate(REGISTRY)}
    out["_mu"] = np.where(np.isinf(out["mu"]), -1.0, out["mu"])   # private (mu descending), then mu = inf
    out["_method"] = out["method"].map(order)
    out = out.sort_values(["task", "_mu", "_method"], ascending=[True, False, True])
    return out.drop(columns=["_mu", "_method"]).reset_index(drop=True)


def _mu_title(mu: float, certified: bool = False) -> str:
    """``mu = 2``, said to be nominal unless every private release behind it is certified."""
    if math.isinf(mu):
        return r"$\mu = \infty$"
    return rf"$\mu = {mu:g}$" if certified else rf"nominal $\mu = {mu:g}$"


def plot_realdata(df: pd.DataFrame, *, task: str, pdf: str | os.PathLike | None = None,
                  png: str | os.PathLike | None = None, title: str | None = None,
                  methods: list[str] | None = None):
    """Draw Figure 7 (binary) or 8 (multiclass) from real-data rows; return the figure.

    Parameters
    ----------
    df : DataFrame
        Rows of `fedgdp.realdata.run_split` (several splits concatenated).
    task : {"binary", "multiclass"}
        The task.
    pdf, png : str, path or None
        Paths to write (either or both).
    title : str or None
        Figure title (default: task, data set and layout).
    methods : list of str or None
        Subset and order (default: the registry order).
    """
    plt = pyplot()

    rows = rows_of(df, "task", task, list(METRICS), "the real-data files")
    present = set(rows["method"])
    methods = [m for m in (methods or list(REGISTRY)) if m in present]
    private = [m for m in methods if m in PRIVATE]
    nonpriv = [m for m in methods if m in NONPRIVATE]
    mus = sorted({float(mu) for mu in rows.loc[rows["private"], "mu"]}, reverse=True) or [math.inf]
    colors = method_colors()
    metric = METRICS[task]

    fig, axes = plt.subplots(1, len(mus), figsize=(1.0 + 4.6 * len(mus), 4.4), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, mu in zip(axes, mus):
        data: list = []
        positions: list[float] = []
        names: list = []
        for j, name in enumerate(private):
            v = rows.loc[(rows["method"] == name) & (rows["mu"] == mu), "value"].dropna().to_numpy()
            data.append(v)
            positions.append(j)
            names.append(name)
        gap = len(private) + 0.6 if private else 0
        for j, name in enumerate(nonpriv):
            v = rows.loc[rows["method"] == name, "value"].dropna().to_numpy()
            data.append(v)
            positions.append(gap + j)
            names.append(name)
        if nonpriv:
            ax.axvspan(gap - 0.55, gap + len(nonpriv) - 0.45, color="0.92", zorder=0)
        box = ax.boxplot([d if d.size else [np.nan] for d in data], positions=positions, widths=0.65,
                         patch_artist=True, showfliers=True, medianprops={"color": "black", "linewidth": 1.4},
                         flierprops={"marker": ".", "markersize": 3, "alpha": 0.6})
        for patch, name in zip(box["boxes"], names):
            patch.set_facecolor(colors.get(name, "0.6"))
            patch.set_alpha(0.55 if name in HATCHED else 0.85)
            if name in HATCHED:
                patch.set_hatch("///")
            patch.set_zorder(2)
        ax.set_xticks(positions)
        ax.set_xticklabels([REGISTRY[n].label for n in names], rotation=40, ha="right", fontsize=9)
        at = rows[rows["private"] & (rows["mu"] == mu)]
        certified = "mu_certified" in at and bool(np.isfinite(at["mu_certified"]).all())
        ax.set_title(f"private methods at {_mu_title(mu, certified)}", fontsize=11)
        ax.grid(axis="y", alpha=0.3)
        label_y = {"transform": ax.get_xaxis_transform(), "ha": "center", "va": "top", "fontsize": 9,
                   "color": "0.3", "style": "italic"}
        if private:
            ax.text((len(private) - 1) / 2, 0.985, "private", **label_y)
        if nonpriv:
            ax.text(gap + (len(nonpriv) - 1) / 2, 0.985, r"non-private ($\mu = \infty$)", **label_y)
        ax.set_xlim(-0.7, (gap + len(nonpriv) - 0.3) if nonpriv else len(private) - 0.3)
    axes[0].set_ylabel(_YLABEL[metric])
    lo, hi = axes[0].get_ylim()
    axes[0].set_ylim(lo, hi + 0.08 * (hi - lo))  # room for the group labels
    ds = ", ".join(sorted(set(rows["dataset"])))
    layout = (f"{ds}: {int(rows['m'].iloc[0])} clients x {rows['split'].nunique()} splits, "
              f"{int(rows['folds'].iloc[0])}-fold out-of-fold {_METRIC_NAME[metric]}")
    title = f"{_TASK_TITLE[task]} on {layout}" if title is None else f"{title}\n{layout}"
    fig.suptitle(title, fontsize=11)
    fig.text(0.5, 0.01, "boxes: quartiles and median of the per-client values (fold averages) over "
             "all clients and splits; whiskers 1.5 IQR; non-private baselines repeated in every panel",
             ha="center", va="bottom", fontsize=8, color="0.3")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save_figure(fig, pdf, png, title=title, bbox_inches="tight")
    return fig
