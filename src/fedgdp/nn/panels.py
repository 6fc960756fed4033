"""Figures 9-10 with the readings beside the grid: per method, the grid's printed reading
over every point (median and range over its runs) and each chosen reading of the readings
map at the points it ran, labelled with the mu it really spends (docs/cnns.md)."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["read_grid", "plot_panels"]

_X = {"fig09": ("Figure 9: samples per client n (m = 100)", "n"), "fig10": ("Figure 10: clients m (full split)", "m")}
_MARKERS = ["s", "D", "^", "v", "P"]


def read_grid(folder: str | os.PathLike):
    """The grid's ``fig09_summary.csv`` and ``fig10_summary.csv`` of ``folder`` as one table (ValueError if missing).

    Parameters
    ----------
    folder : str or path
    """
    import pandas as pd

    files = [Path(folder) / f"{fig}_summary.csv" for fig in _X]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ValueError(f"--grid {folder}: no {', '.join(missing)} (the grid's summaries, fedgdp nn-summarise)")
    return pd.concat([pd.read_csv(f) for f in files], ignore_index=True)


def plot_panels(grid, table, cfg, readings: list[str], out: str | os.PathLike) -> list:
    """A row per figure, a panel per method: the grid's line and band, the readings' points.

    Parameters
    ----------
    grid : pandas.DataFrame
        The grid's summaries (`read_grid`): the printed reading at every point.
    table : pandas.DataFrame
        The readings map's table (`fedgdp.nn.readings.collect`).
    cfg : fedgdp.nn.readings.Readings
        The readings config (its ``band``: the paper's range per figure).
    readings : list of str
        The readings to draw beside the grid, each at the points it ran.
    out : str or path
        The PNG file (a PDF goes beside it).
    """
    from ..common.figures import pyplot, save_figure
    from .readings import privacy_label
    from .settings import LABELS, METHODS

    plt = pyplot()
    fig, axes = plt.subplots(2, len(METHODS), figsize=(3.3 * len(METHODS), 6.6), sharey=True, squeeze=False)
    for row, figure in enumerate(_X):
        for ax, method in zip(axes[row], METHODS):
            band = cfg.band.get(figure)
            if band:
                ax.axhspan(band[0], band[1], color="#d5ecd4", zorder=0,      # green: not the grid's grey band
                           label="the paper's range (its axis)")
            g = grid[(grid["figure"] == figure) & (grid["method"] == method)].sort_values("x")
            ax.fill_between(g["x"], g["min_accuracy"], g["max_accuracy"], color="0.5", alpha=0.2, linewidth=0)
            ax.plot(g["x"], g["median_accuracy"], color="0.3", marker="o", markersize=3,
                    label="as printed, the grid (certified mu = 2)")
            for k, name in enumerate(readings):
                r = table[(table["reading"] == name) & (table["figure"] == figure) & (table["method"] == method)]
                if r.empty:
                    continue
                acc = r.groupby("x")["accuracy"]
                med, lo, hi = acc.median(), acc.min(), acc.max()
                ax.errorbar(med.index, med, yerr=[med - lo, hi - med], marker=_MARKERS[k % len(_MARKERS)],
                            linestyle="--", color=f"C{k}", capsize=3, markersize=5,
                            label=f"{name} ({privacy_label(table[table['reading'] == name])})")
            ax.set_xscale("log")
            xs = sorted(set(g["x"]) | set(table.loc[table["figure"] == figure, "x"]))
            ax.set_xticks(xs, [f"{x:g}" for x in xs], fontsize=7)
            ax.minorticks_off()
            ax.set_ylim(0, 1)
            ax.grid(alpha=0.3)
            ax.set_title(f"{LABELS[method].replace('DP-', '')}", fontsize=9)
            ax.set_xlabel(_X[figure][0] if method == METHODS[0] else _X[figure][1], fontsize=8)
        axes[row][0].set_ylabel("test accuracy", fontsize=8)
    handles: dict = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(f"CNN on {cfg.dataset}: Figures 9-10 as printed (the grid: median, band over its runs) and "
                 "under other readings (each at the points it ran: median, bars over its runs)", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 0.97))
    png = Path(out)
    return save_figure(fig, png.with_suffix(".pdf"), png, title="CNN Figures 9-10 by reading")


def levels_markdown(grid, summaries, cfg) -> str:
    """Level and trend per reading and figure, in numbers: for each method the median accuracy (over a
    point's runs) at the figure's first and last point, the lowest and highest over its points, and how many
    points lie in the paper's range (the config's ``band``; a figure without one says the paper's axis is not
    read). The grid as printed first, then each reading whose whole grid is given.

    Parameters
    ----------
    grid : pandas.DataFrame
        The grid's summaries (`read_grid`).
    summaries : pandas.DataFrame or None
        Whole-grid summaries of readings (`fedgdp.nn.readings.read_reading_summaries`).
    cfg : fedgdp.nn.readings.Readings
        The readings config (its ``band``).
    """
    from .readings import privacy_label
    from .settings import LABELS, METHODS

    head = ["reading", "figure", *(LABELS[m].replace("DP-", "") for m in METHODS)]
    lines = ["Median accuracy over a point's runs: first point -> last point (lowest-highest over the points; "
             "points in the paper's range; Figure 9: its axis is not read, so no range).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    parts = [("as printed (certified mu = 2)", grid)]
    if summaries is not None:
        parts += [(f"{name} ({privacy_label(df)})", df) for name, df in summaries.groupby("reading", sort=False)]
    for name, df in parts:
        for figure in _X:
            f = df[df["figure"] == figure]
            if f.empty:
                continue
            band = cfg.band.get(figure)
            cells = []
            for method in METHODS:
                med = f[f["method"] == method].sort_values("x")["median_accuracy"]
                inside = f"{((med >= band[0]) & (med <= band[1])).sum()} of {len(med)} in {band[0]:g}-{band[1]:g}" \
                    if band else "no range read"
                cells.append(f"{med.iloc[0]:.3f} -> {med.iloc[-1]:.3f} ({med.min():.3f}-{med.max():.3f}; {inside})")
            lines.append(f"| {name} | {'Fig. 9' if figure == 'fig09' else 'Fig. 10'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
