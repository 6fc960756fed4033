"""Figures 9 and 10: median test accuracy of the CNN methods (numpy/pandas/matplotlib only).

Figure 9: against samples per client (m fixed); Figure 10: against the number of
clients (full training split). One panel per dataset (CIFAR-10 left, MNIST right,
as in the paper; the offline ``digits`` alone), one line per method: the median
over runs, with the range over runs as a faint band.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..common.figures import method_style, pyplot, rows_of, save_figure
from .settings import LABELS, METHODS

__all__ = ["summarise_runs", "plot_nn_figure", "SUMMARY_COLUMNS"]

_DATASET_TITLES = {"cifar10": "CIFAR-10", "mnist": "MNIST", "digits": "digits (8x8, offline smoke test)"}
#: said under a figure with a digits panel: what that panel is not
SMOKE_NOTE = ("digits is the offline smoke test of the CNN pipeline (1,437 images of 8x8 pixels): under "
              "the noise each client adds its accuracies are dominated by the privacy noise and show none of the "
              "paper's trends; the MNIST panels are config/nn-mnist.yaml.")
_DATASET_ORDER = ["cifar10", "mnist", "digits"]
_XLABEL = {"fig09": "Samples per client", "fig10": "Number of clients"}

SUMMARY_COLUMNS = ["figure", "dataset", "method", "label", "x", "m", "n", "mu", "q", "runs", "median_accuracy",
                   "q25_accuracy", "q75_accuracy", "min_accuracy", "max_accuracy",
                   "median_local_test_accuracy", "mean_rounds", "mean_elapsed_s", "mu_composed_max"]


def summarise_runs(df):
    """Per (figure, dataset, method, x): median and range of the test accuracy over runs, columns
    `SUMMARY_COLUMNS`; ``x`` is n (fig09) or m (fig10), ``m`` or ``n`` -1 where it varies.

    Parameters
    ----------
    df : pandas.DataFrame
        Run rows (columns `fedgdp.nn.run.COLUMNS`).
    """
    import pandas as pd

    keys = ["figure", "dataset", "method", "label", "x", "mu"]
    out = []
    for key, g in df.groupby(keys, sort=True, dropna=False):
        acc = g["test_accuracy"].to_numpy(float)
        row = dict(zip(keys, key))
        row.update({
            "m": int(g["m"].iloc[0]) if g["m"].nunique() == 1 else -1,
            "n": (int(g["n"].iloc[0]) if g["n"].notna().all() and g["n"].nunique() == 1 else -1),
            "q": float(g["q"].iloc[0]) if "q" in g else float("nan"),
            "runs": int(g["run"].nunique()), "median_accuracy": float(np.median(acc)),
            "q25_accuracy": float(np.quantile(acc, 0.25)), "q75_accuracy": float(np.quantile(acc, 0.75)),
            "min_accuracy": float(acc.min()), "max_accuracy": float(acc.max()),
            "median_local_test_accuracy": float(np.median(g["local_test_accuracy"])),
            "mean_rounds": float(g["rounds"].mean()), "mean_elapsed_s": float(g["elapsed_s"].mean()),
            "mu_composed_max": float(g["mu_composed"].max()),
        })
        out.append(row)
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def plot_nn_figure(summary, figure: str, out: str | Path, *, png: bool = True) -> list[Path]:
    """Draw Figure 9 or 10 from a summary; write ``out`` (PDF) and its PNG sibling; return the paths written.

    Parameters
    ----------
    summary : pandas.DataFrame
        Rows of `summarise_runs` (columns `SUMMARY_COLUMNS`).
    figure : str
        ``fig09`` or ``fig10``.
    out : str or Path
        The PDF to write.
    png : bool
        Also write ``out`` with suffix ``.png``.
    """
    plt = pyplot()

    shown = rows_of(summary, "figure", figure, list(_XLABEL), "the summary")    # the figure's summary rows
    datasets = [d for d in _DATASET_ORDER if d in set(shown["dataset"])] + \
        sorted(set(shown["dataset"]) - set(_DATASET_ORDER))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.6 * len(datasets), 3.8), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        d = shown[shown["dataset"] == ds]
        methods = [mth for mth in METHODS if mth in set(d["method"])]
        for mth in methods:
            g = d[d["method"] == mth].sort_values("x")
            st = method_style(mth)
            ax.fill_between(g["x"], g["min_accuracy"], g["max_accuracy"], color=st.get("color"), alpha=0.12,
                            linewidth=0)
            ax.plot(g["x"], g["median_accuracy"], label=g["label"].iloc[0] if len(g) else LABELS[mth],
                    linewidth=1.6, markersize=5, **st)
        xs = sorted(set(d["x"]))
        ax.set_xticks(xs)
        ax.tick_params(axis="x", labelrotation=45 if len(xs) > 6 else 0)
        ax.set_xlabel(_XLABEL[figure])
        ax.set_ylabel("Final test accuracy (median)")
        runs = int(d["runs"].min())
        extra = f"m = {int(d['m'].iloc[0])}, " if figure == "fig09" and d["m"].nunique() == 1 else ""
        extra += f"$\\mu$ = {d['mu'].iloc[0]:g}, " if d["mu"].nunique() == 1 else ""
        extra += f"q = {d['q'].iloc[0]:g}, " if d["q"].nunique() == 1 and np.isfinite(d["q"].iloc[0]) else ""
        runs_text = f"{runs} run" + ("s" if runs != 1 else "")
        ax.set_title(f"{_DATASET_TITLES.get(ds, ds)}\n{extra}median of {runs_text}", fontsize=10)
        ax.grid(alpha=0.3)
    # one legend for the figure, under the panels (an in-panel legend covers the curves),
    # and a caption saying what the lines and bands are
    import textwrap

    handles: dict = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    width = fig.get_figwidth()
    ncol = max(1, min(len(handles), int(width // 2.2)))
    most_runs = int(shown["runs"].max())
    text = ("Lines: median final test accuracy over runs; bands: range (min to max) over runs." if most_runs > 1
            else "Lines: final test accuracy of the one run at each point (no band: one run).")
    if "digits" in datasets:
        text += " " + SMOKE_NOTE
    caption = textwrap.wrap(text, width=int(width * 16))
    caption_h = 0.08 + 0.15 * len(caption)
    bottom = caption_h + 0.1 + 0.25 * -(-len(handles) // ncol)     # inches under the panels
    height = fig.get_figheight() + bottom
    fig.set_figheight(height)
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=ncol, frameon=False, fontsize=9,
               bbox_to_anchor=(0.5, (bottom - 0.05) / height))
    fig.text(0.5, 0.04 / height, "\n".join(caption), fontsize=8, color="dimgrey", ha="center", va="bottom")
    fig.tight_layout(rect=(0, bottom / height, 1, 1))
    out = Path(out)
    return save_figure(fig, out, out.with_suffix(".png") if png else None,
                       title=f"CNN test accuracy against {_XLABEL[figure].lower()}")
