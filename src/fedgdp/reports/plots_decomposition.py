"""The error decomposition figure (`fedgdp.reports.decomposition`, docs/methods.md §9).

A panel per (model, K): for every method a group of bars, one per m; each bar stacks
the four terms of `fedgdp.reports.decomposition.TERMS` with their signs (positive terms
upwards from zero, negative ones downwards), and a black diamond marks the private MSE
(their sum) with +-2 Monte Carlo standard errors.
"""
from __future__ import annotations

import os
import textwrap
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..common.figures import pyplot, save_figure
from ..simulation.plots import method_label
from .decomposition import TERMS

__all__ = ["plot_decomposition", "TERM_STYLE"]

class TermStyle(NamedTuple):
    """The colour and legend label of a term's bars."""

    color: str
    label: str


#: Colour and legend label of each term.
TERM_STYLE = {
    "statistical": TermStyle("#7f7f7f", "statistical: plain MSE at K_conv"),
    "optimisation": TermStyle("#1f77b4", "optimisation: plain(K) - plain(K_conv)"),
    "clipping": TermStyle("#ff7f0e", "clipping: clip_only(K) - plain(K)"),
    "privacy": TermStyle("#d62728", "privacy noise: private(K) - clip_only(K)"),
}


def _stack(ax, x: float, row: pd.Series, width: float) -> int:
    """One signed stacked bar at ``x``; returns how many of its terms are negative."""
    up = down = 0.0
    negative = 0
    for term in TERMS:
        v = float(row[term])
        if not np.isfinite(v):
            continue
        base = up if v >= 0 else down
        ax.bar(x, v, width, bottom=base, color=TERM_STYLE[term].color, edgecolor="white", linewidth=0.3)
        if v >= 0:
            up += v
        else:
            down += v
            negative += 1
    return negative


def plot_decomposition(table: pd.DataFrame, spec: dict, pdf: str | os.PathLike | None = None,
                       png: str | os.PathLike | None = None):
    """Draw the decomposition of ``table`` (`fedgdp.reports.decomposition.decompose`).

    Parameters
    ----------
    table : DataFrame
        One row per (model, method, sizes, m, K) with the terms and ``mse_private``,
        ``se_private`` (one sizes scheme).
    spec : dict
        Optional ``title``, ``caption`` (drawn under the panels), ``methods`` (bar group
        order; default: as in the table), ``name``.
    pdf, png : str, path-like or None
        Where to write the figure (None: not in that format).
    """
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if table.empty:
        raise ValueError("the decomposition table has no rows")
    models = list(dict.fromkeys(table["model"]))
    Ks = sorted(table["K"].unique())
    methods = [m for m in spec.get("methods") or list(dict.fromkeys(table["method"]))
               if m in set(table["method"])]
    ms = sorted(table["m"].unique())
    fig, axes = plt.subplots(len(models), len(Ks), figsize=(1.9 + 1.45 * len(methods) * len(Ks),
                                                             3.6 * len(models) + 1.6), squeeze=False)
    width = 0.8 / len(ms)
    contents = []
    for i, model in enumerate(models):
        for j, K in enumerate(Ks):
            ax = axes[i, j]
            rows = table[(table["model"] == model) & (table["K"] == K)]
            ticks, labels, negative, bars = [], [], 0, 0
            for g, method in enumerate(methods):
                for k, m in enumerate(ms):
                    hit = rows[(rows["method"] == method) & (rows["m"] == m)]
                    if hit.empty:
                        continue
                    row, x = hit.iloc[0], g + (k - (len(ms) - 1) / 2) * width
                    negative += _stack(ax, x, row, width * 0.92)
                    bars += 1
                    ax.errorbar(x, row["mse_private"], yerr=2 * np.nan_to_num(row["se_private"]), fmt="D",
                                color="black", markersize=3.5, capsize=2, elinewidth=0.8, zorder=4)
                    ticks.append(x)
                    labels.append(f"{m}")
            ax.axhline(0, color="black", linewidth=0.8)
            ax.set_xticks(ticks)
            ax.set_xticklabels(labels, fontsize=7)
            for g, method in enumerate(methods):
                ax.text(g, -0.13, method_label(method), transform=ax.get_xaxis_transform(), ha="center",
                        va="top", fontsize=8)
            ax.set_xlim(-0.6, len(methods) - 0.4)
            ax.set_ylabel("MSE and its terms")
            ax.grid(True, axis="y", alpha=0.3)
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
            ax.set_title(f"({'abcdefghijklmnop'[i * len(Ks) + j]}) {model} regression, K = {K} "
                         f"(bars: m = {', '.join(map(str, ms))})", fontsize=10)
            contents.append({"model": model, "K": int(K), "bars": bars, "negative_terms": negative})
    handles: list = [Patch(color=s.color, label=s.label) for s in TERM_STYLE.values()]
    handles.append(Line2D([], [], color="black", marker="D", linestyle="none", markersize=4,
                          label="private MSE (sum of the terms), +-2 MC SE"))
    caption = textwrap.wrap(spec.get("caption", ""), width=int(fig.get_figwidth() * 17))
    bottom = 0.75 + 0.15 * len(caption)
    fig.set_figheight(fig.get_figheight() + 0.15 * len(caption))
    height = fig.get_figheight()
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False, fontsize=8,
               bbox_to_anchor=(0.5, (0.12 + 0.15 * len(caption)) / height))
    fig.text(0.5, 0.04 / height, "\n".join(caption), fontsize=7.5, color="dimgrey", ha="center", va="bottom")
    title = spec.get("title") or "Error decomposition"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, bottom / height, 1, 1), h_pad=2.0)
    from ..common.io import dumps_strict

    about = dumps_strict({"figure": spec.get("name", "decomposition"), "panels": contents})
    save_figure(fig, pdf, png, title=title, about=about)
    return fig
