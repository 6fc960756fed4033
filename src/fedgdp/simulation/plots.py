"""Figures from study summaries: one generic drawing function, three layouts (docs/methods.md §4).

Each panel plots the empirical MSE (log scale, +-2 Monte Carlo standard errors) of a set
of cells against one axis, one line per value of another: ``m_by_size`` (Figures 1, 2,
11-14), ``m_by_method`` (Figures 3, 5, 6, 16), ``K_by_mu`` (Figures 4, 15). A figure spec
(a figure entry of ``config.yaml``) is drawn by `plot_figure`.
"""
from __future__ import annotations

import os
import re
import string
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..common.figures import METHOD_STYLE, method_style, pyplot, save_figure
from ..core.settings import spec_of
from .data import parse_sizes
from .summary import normalise

__all__ = ["LAYOUTS", "METHOD_STYLE", "FigureSpec", "plot_figure", "size_label", "size_title", "mu_label",
           "method_label", "panel_rows"]


@dataclass(frozen=True)
class FigureSpec:
    """A simulation figure to draw: its entry of ``config.yaml`` and what the plan adds
    (`fedgdp.plan.simulation.SimulationPart.figure_spec`), read once by `FigureSpec.of`.

    Attributes
    ----------
    layout : str
        A key of `LAYOUTS`.
    model : str
        The model whose summary rows it draws.
    panels : list of dict
        Each fixes ``study``/``method``/``sizes``/``mu``/``K``; optional ``title``.
    study : str or None
        The panels' study unless a panel names its own.
    name, title : str
        The figure's name and title ("": none given).
    ncols : int or None
        Panel columns (None: all panels in a row up to 3, else 2).
    theory : bool
        Whether to draw the dashed bounds of `fedgdp.core.theory` (scaled to each line).
    studies : dict
        The studies' config entries by name (line order, schedule).
    d : int or None
        Coefficients (None: no bounds drawn).
    method_settings : dict or None
        The methods' settings the bounds read.
    """

    layout: str
    model: str
    panels: list
    study: str | None = None
    name: str = ""
    title: str = ""
    ncols: int | None = None
    theory: bool = False
    studies: dict = field(default_factory=dict)
    d: int | None = None
    method_settings: dict | None = None

    @classmethod
    def of(cls, spec) -> FigureSpec:
        """The typed spec of a figure's JSON mapping (keys it does not draw by are ignored); a
        `FigureSpec` as it is.

        Parameters
        ----------
        spec : dict or FigureSpec
        """
        name = spec.name if isinstance(spec, cls) else spec.get("name", "?")
        return spec_of(cls, spec, ("layout", "model", "panels"), f"figure {name}")


@dataclass(frozen=True)
class PanelLayout:
    """What a panel plots: ``x`` against MSE, one line per value of ``line``."""

    x: str
    line: str
    xlabel: str
    xscale: str = "linear"


LAYOUTS = {
    "m_by_size": PanelLayout("m", "sizes", "number of clients $m$"),
    "m_by_method": PanelLayout("m", "method", "number of clients $m$"),
    "K_by_mu": PanelLayout("K", "mu", "total iterations $K$", xscale="log"),
}

_MU_COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b"]  # non-private is black


# ----------------------------------------------------------------------- labels
def _g(x) -> str:
    return f"{float(x):g}"


#: sizes scheme -> (legend label, panel title in the paper's words); ``{0}``, ``{1}``: its
#: arguments; a ``total(N, scheme)`` uses the inner scheme's entry of _TOTAL_TEXT
_SIZE_TEXT = {
    "equal": ("$n = {0}$", "Equal $n_i = {0}$"),
    "uniform": ("$n_i \\sim U[{0}, {1}]$", "Uniformly distributed $n_i \\sim U[{0}, {1}]$"),
    "lognormal": ("$\\log n_i \\sim N({0}, {1}^2)$",
                  "Lognormally distributed $n_i$, $\\log n_i \\sim N({0}, {1}^2)$"),
}
_TOTAL_TEXT = {
    "equal": ("equal, $N = {N}$", "Equal $n_i$ ($N = {N}$)"),
    "uniform": ("uniform weights, $N = {N}$", "Uniformly distributed $n_i$ (weights $U[{0}, {1}]$)"),
    "lognormal": ("lognormal weights, $N = {N}$",
                  "Lognormally distributed $n_i$ (weights $e^Z$, $Z \\sim N({0}, {1}^2)$)"),
}


def _size_text(text: str, which: int) -> str:
    s = parse_sizes(text)
    if s.kind in _SIZE_TEXT:
        return _SIZE_TEXT[s.kind][which].format(*map(_g, s.args))
    return _TOTAL_TEXT[s.inner.kind][which].format(*map(_g, s.inner.args), N=s.args[0])  # type: ignore[union-attr]  # total(...) has an inner scheme


def size_label(text: str) -> str:
    """Legend label (LaTeX) of a sizes scheme: ``equal(30)`` -> ``$n = 30$``.

    Parameters
    ----------
    text : str
        The sizes scheme.
    """
    return _size_text(text, 0)


def size_title(text: str) -> str:
    """Panel title of a sizes scheme, in the paper's words.

    Parameters
    ----------
    text : str
        The sizes scheme.
    """
    return _size_text(text, 1)


def mu_label(mu: float, certified: bool = False) -> str:
    """``mu = 2`` as a LaTeX label; "nominal" unless every release behind it is certified.

    Parameters
    ----------
    mu : float
        The privacy level (inf: non-private).
    certified : bool
        Whether every release behind it is certified.
    """
    if not np.isfinite(mu):
        return "non-private ($\\mu = \\infty$)"
    return f"$\\mu = {mu:g}$" if certified else f"nominal $\\mu = {mu:g}$"


def method_label(name: str) -> str:
    """The legend label of a method: its registry label, or its name when not registered.

    Parameters
    ----------
    name : str
        The method's name.
    """
    from .backend import REGISTRY

    meth = REGISTRY.get(name)
    return meth.label if meth is not None else name


# --------------------------------------------------------------------- selection
def panel_rows(summary: pd.DataFrame, spec, panel: dict) -> pd.DataFrame:
    """Summary rows of one panel: the figure's model, the panel's study and fixed values;
    ValueError when none, or several for a (line, x) point (an axis the panel should fix).

    Parameters
    ----------
    summary : pandas.DataFrame
        Summary rows (`fedgdp.simulation.summary.SUMMARY_COLUMNS`).
    spec : FigureSpec or dict
        The figure (``model``, ``layout``, optional ``study`` and ``name``).
    panel : dict
        The panel: optional ``study`` and ``title``, and the grid values it fixes.
    """
    spec = FigureSpec.of(spec)
    layout = LAYOUTS[spec.layout]
    study = panel.get("study", spec.study)
    sel = (summary["model"] == spec.model) & (summary["study"] == study)
    for key, value in panel.items():
        if key in ("study", "title"):
            continue
        sel &= summary[key] == normalise(key, value)
    rows = summary[sel]
    if rows.empty:
        raise ValueError(f"figure {spec.name or '?'}: no summary rows for panel {panel} "
                         f"(model {spec.model}, study {study})")
    dup = rows.duplicated([layout.line, layout.x])
    if dup.any():
        raise ValueError(f"figure {spec.name or '?'}: panel {panel} has several cells per "
                         f"({layout.line}, {layout.x}) point; fix the other grid axes in the panel")
    return rows


def _line_order(rows: pd.DataFrame, line: str, study_cfg: dict) -> list:
    """Line values in the order the study lists them (methods: the study's order)."""
    present = list(dict.fromkeys(rows[line]))
    if line == "method":
        listed = list(study_cfg.get("methods", []))
    else:
        listed = [normalise(line, v) for v in study_cfg.get("grid", {}).get(line, [])]
    ordered = [v for v in listed if v in present]
    return ordered + [v for v in present if v not in ordered]


def _line_style(line: str, value, index: int, count: int) -> dict:
    import matplotlib

    if line == "method":
        return dict(method_style(value), label=method_label(value))
    if line == "mu":
        color = "black" if not np.isfinite(value) else _MU_COLORS[index % len(_MU_COLORS)]
        return {"color": color, "marker": "os^Dv"[index % 5], "label": mu_label(value)}
    cmap = matplotlib.colormaps["viridis"]
    return {"color": cmap(0.9 * index / max(1, count - 1)), "marker": "os^Dvph"[index % 7],
            "label": size_label(value)}


def _panel_title(spec: FigureSpec, panel: dict, rows: pd.DataFrame, letter: str) -> str:
    if panel.get("title"):
        return f"({letter}) {panel['title']}"
    layout = spec.layout
    if layout == "m_by_size":
        equal = all(str(s).startswith("equal") for s in rows["sizes"])
        return f"({letter}) {method_label(panel['method'])}, {'same' if equal else 'different'} $n_i$"
    if layout == "m_by_method":
        return f"({letter}) {size_title(panel['sizes'])}"
    return f"({letter}) {method_label(panel['method'])}"


def _settings_text(rows: pd.DataFrame, layout: PanelLayout) -> str:
    """The settings a whole figure shares, for its title: m, n, mu and K when the figure
    neither plots nor varies them, and the number of replicates."""
    parts = []
    if "m" not in (layout.x, layout.line) and rows["m"].nunique() == 1:
        parts.append(f"$m = {int(rows['m'].iloc[0])}$")
    if layout.line != "sizes" and rows["sizes"].nunique() == 1:
        parts.append(size_label(rows["sizes"].iloc[0]).replace("n =", "n_i ="))
    if layout.line != "mu" and rows["mu"].nunique() == 1:
        certified = "mu_certified" in rows and bool(np.isfinite(rows["mu_certified"]).all())
        parts.append(mu_label(float(rows["mu"].iloc[0]), certified))
    if layout.x != "K" and rows["K"].nunique() == 1:
        parts.append(f"$K = {int(rows['K'].iloc[0])}$")
    reps = int(rows["replicates"].max())
    parts.append(f"{reps} replicates" if rows["replicates"].min() == reps else f"<= {reps} replicates")
    return ", ".join(parts)


# ------------------------------------------------------------------------ figure
def plot_figure(spec, summary: pd.DataFrame, pdf: str | os.PathLike | None = None,
                png: str | os.PathLike | None = None):
    """Draw one figure from summary rows, write it as PDF and/or PNG, and return it.

    Parameters
    ----------
    spec : FigureSpec or dict
        The figure (`FigureSpec`; its JSON mapping is read by `FigureSpec.of`).
    summary : DataFrame
        Rows of `fedgdp.simulation.summary.summarise` (several studies may be concatenated).
    pdf, png : str, path-like or None
        Where to write the figure (None: not in that format).
    """
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter, NullLocator

    spec = FigureSpec.of(spec)
    if spec.layout not in LAYOUTS:
        raise ValueError(f"unknown layout {spec.layout!r}; choose from {', '.join(LAYOUTS)}")
    layout = LAYOUTS[spec.layout]
    panels = spec.panels
    ncols = int(spec.ncols or (len(panels) if len(panels) <= 3 else 2))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.7 * nrows + 0.9), squeeze=False)
    panel_handles: list[dict[str, Line2D]] = []
    all_rows, contents = [], []
    notes: dict[str, Any] = {"partial": False, "missing": False, "lower": False, "lower_mu": set()}
    for k, panel in enumerate(panels):
        ax = axes.flat[k]
        rows = panel_rows(summary, spec, panel)
        all_rows.append(rows)
        study = panel.get("study", spec.study)
        study_cfg = spec.studies.get(study, {})
        values = _line_order(rows, layout.line, study_cfg)
        handles: dict[str, Line2D] = {}
        lower_items = []          # (x, lower bound, y, colour) of each line: the dotted lines
        for i, value in enumerate(values):
            line = rows[rows[layout.line] == value].sort_values(layout.x)
            style = _line_style(layout.line, value, i, len(values))
            x = line[layout.x].to_numpy(float)
            y = line["mse"].to_numpy(float)
            se = np.nan_to_num(line["se"].to_numpy(float))
            lower = np.minimum(2 * se, 0.95 * y)   # a log axis cannot show y - 2 SE <= 0
            ax.errorbar(x, y, yerr=[lower, 2 * se], color=style["color"], marker=style["marker"],
                        markersize=5, linewidth=1.5, capsize=3, elinewidth=1)
            partial = (line["diverged"].to_numpy() > 0) & np.isfinite(y)
            if partial.any():     # some replicates flagged as diverged: hollow marker
                ax.plot(x[partial], y[partial], linestyle="none", marker=style["marker"], markersize=5,
                        markerfacecolor="white", markeredgecolor=style["color"], zorder=3)
            notes["partial"] |= bool(partial.any())
            notes["missing"] |= bool((~np.isfinite(y)).any())
            handles[style["label"]] = Line2D([], [], color=style["color"], marker=style["marker"],
                                             markersize=5)
            if spec.theory and layout.x == "m" and len(line) >= 2:
                method = value if layout.line == "method" else panel.get("method")
                bound = _theory(line, method, spec, study_cfg)
                if bound is not None:
                    ax.plot(x, bound, color=style["color"], linestyle="--", linewidth=1, alpha=0.8)
                lower = _lower(line, spec, notes["lower_mu"])
                if lower is not None:
                    lower_items.append((x, lower, y, style["color"]))
        notes["lower"] |= _draw_lower(ax, lower_items)
        panel_handles.append(handles)
        contents.append({"lines": list(handles),
                         "points": [int((rows[layout.line] == v).sum()) for v in values]})
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        if np.floor(np.log10(hi)) - np.ceil(np.log10(lo)) >= 1:   # two powers of ten shown:
            ax.yaxis.set_minor_formatter(NullFormatter())           # label only those
        ax.set_xscale(layout.xscale)
        ax.set_xlabel(layout.xlabel)
        ax.set_ylabel("empirical MSE")
        ticks = np.unique(rows[layout.x].to_numpy())
        ax.set_xticks(ticks)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{t:g}" for t in ticks], fontsize=8 if len(ticks) > 6 else 9)
        ax.grid(True, which="major", alpha=0.3)
        ax.grid(True, which="minor", axis="y", alpha=0.1)
        ax.set_title(_panel_title(spec, panel, rows, string.ascii_lowercase[k]), fontsize=10)
        contents[-1]["title"] = ax.get_title()
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    theory = bool(spec.theory) and layout.x == "m"
    extra_handles = []
    if theory:
        extra_handles.append(("bound of Table 1 (scaled)", Line2D([], [], color="grey", linestyle="--")))
    if notes["lower"]:
        extra_handles.append(("lower bound, Theorem 3.10 (scaled)",
                              Line2D([], [], color="grey", linestyle=":", linewidth=1.5)))
    caption = _caption(theory, notes)
    legends = _legend_plan(panel_handles, extra_handles, ncols, fig.get_figwidth())
    if legends is None:       # panels plot different lines: a legend beside each panel
        fig.set_figwidth(fig.get_figwidth() + 1.9 * ncols)
        for ax, handles in zip(axes.flat, panel_handles):
            items = list(handles.items()) + extra_handles
            ax.legend([h for _, h in items], [lab for lab, _ in items], fontsize=8, frameon=False,
                      loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        legends = []
    caption_lines = _wrap(caption, width=int(fig.get_figwidth() * 16))
    legend_rows = max((-(-len(items) // ncol) for _, items, ncol in legends), default=0)
    caption_h = 0.08 + 0.15 * len(caption_lines)           # inches under the panels: caption ...
    bottom = caption_h + (0.1 + 0.25 * legend_rows if legend_rows else 0.0)   # ... then the legends
    fig.set_figheight(3.7 * nrows + 0.6 + bottom)
    height = fig.get_figheight()
    fig.text(0.5, 0.04 / height, "\n".join(caption_lines), fontsize=8, color="dimgrey", ha="center",
             va="bottom", linespacing=1.3)
    rows = pd.concat(all_rows)
    title = spec.title or f"{spec.model.capitalize()} regression"
    fig.suptitle(f"{title}\n{_settings_text(rows, layout)}", fontsize=11)
    # What the figure shows, stored in the files (PNG text chunk, PDF Subject) for checks.
    from ..common.io import dumps_strict

    about = dumps_strict({"figure": spec.name, "layout": spec.layout, "panels": contents})
    fig.tight_layout(rect=(0, bottom / height, 1, 1))
    for cols, items, ncol in legends:     # below the panels, centred under the columns they describe
        boxes = [axes[r, c].get_position() for r in range(nrows) for c in cols if axes[r, c].get_visible()]
        centre = (min(b.x0 for b in boxes) + max(b.x1 for b in boxes)) / 2
        fig.legend([h for _, h in items], [lab for lab, _ in items], loc="upper center", ncol=ncol,
                   frameon=False, fontsize=9, bbox_to_anchor=(centre, (bottom - 0.05) / height))
    save_figure(fig, pdf, png, title=title, about=about)
    return fig


def _legend_plan(panel_handles: list[dict], extra: list, ncols: int, width: float):
    """Legends outside the panels, as ``(columns, items, ncol)``: one under all columns when
    every panel plots the same lines, one under each column when a column's panels do;
    None otherwise (a legend right of each panel).
    """
    def plan(cols, handles, inches):
        items = list(handles.items()) + extra
        per_item = max(_label_inches(label) for label, _ in items)
        fit = max(1, min(len(items), int(inches // per_item)))
        return cols, items, -(-len(items) // -(-len(items) // fit))     # rows balanced

    if all(list(h) == list(panel_handles[0]) for h in panel_handles):
        return [plan(range(ncols), panel_handles[0], width)]
    by_column = {c: panel_handles[c::ncols] for c in range(ncols) if panel_handles[c::ncols]}
    if all(all(list(h) == list(col[0]) for h in col) for col in by_column.values()):
        return [plan([c], col[0], width / ncols) for c, col in by_column.items()]
    return None


def _label_inches(label: str) -> float:
    """Rough width of a legend entry at font size 9: handle, gap and text."""
    text = label
    for token in ("$", "\\sim", "\\mu", "\\infty", "\\log", "_i", "{", "}", "^2"):
        text = text.replace(token, "x" if token.startswith("\\") else "")
    return 0.75 + 0.075 * len(text)


def _wrap(text: str, width: int) -> list[str]:
    """Lines of at most about ``width`` characters, never breaking inside ``$...$``."""
    kept = re.sub(r"\$[^$]*\$", lambda m: m.group(0).replace(" ", "\0"), text)
    return [line.replace("\0", " ") for line in
            textwrap.wrap(kept, width=width, break_long_words=False, break_on_hyphens=False)]


def _caption(theory: bool, notes: dict) -> str:
    """The figure's own caption: what each kind of line and marker shows."""
    parts = ["Solid lines: empirical MSE, error bars $\\pm 2$ Monte Carlo standard errors."]
    if theory:
        parts.append("Dashed: the MSE bound of Table 1 (constants set to one), scaled to each line's data.")
        if notes["lower"]:
            parts.append("Dotted: the minimax lower bound of Theorem 3.10 (constants set to one), "
                         "scaled to touch the data from below.")
        skipped = sorted(notes["lower_mu"])
        if skipped:
            mus = ", ".join("\\infty" if not np.isfinite(mu) else f"{mu:g}" for mu in skipped)
            parts.append(f"The minimax lower bound of Theorem 3.10 is not drawn"
                          f"{' everywhere' if notes['lower'] else ''}: "
                         f"it is stated for $\\mu < 1$, and this figure has $\\mu = {mus}$.")
    if notes["partial"]:
        parts.append("Hollow marker: some replicates diverged (counted in the mean when finite).")
    if notes["missing"]:
        parts.append("No marker: no replicate of the cell gave a finite estimate.")
    return " ".join(parts)


def _lower(line: pd.DataFrame, spec: FigureSpec, skipped: set):
    """Theorem 3.10's lower bound at the line's cells (``N_mean / m`` per client), or None
    without ``spec.d`` or where the theorem does not cover a mu (added to ``skipped``).
    """
    from ..core.theory import lower_bound, lower_bound_holds

    if spec.d is None:
        return None
    mus = [float(mu) for mu in line["mu"]]
    if not all(lower_bound_holds(mu) for mu in mus):
        skipped.update(mu for mu in mus if not lower_bound_holds(mu))
        return None
    return np.array([lower_bound(np.full(int(m), float(N) / int(m)), d=int(spec.d), mu=mu)
                     for m, N, mu in zip(line["m"], line["N_mean"], mus)])


def _draw_lower(ax, items: list) -> bool:
    """Draw a panel's dotted lower bounds, each scaled to stay at or below every MSE it
    describes; True if any was drawn.
    """
    groups: dict = {}
    drawn = False
    for x, lower, y, color in items:
        groups.setdefault((tuple(x), tuple(lower)), []).append((y, color))
    for (x, lower), lines in groups.items():
        x, lower = np.array(x), np.array(lower)
        y = np.array([yy for yy, _ in lines])
        ok = np.isfinite(y) & (y > 0) & (lower > 0)
        if not ok.any():
            continue
        scale = np.min((y / lower)[ok])
        color = lines[0][1] if len(lines) == 1 else "grey"
        ax.plot(x, scale * lower, color=color, linestyle=":", linewidth=1.5)
        drawn = True
    return drawn


def _theory(line: pd.DataFrame, method: str | None, spec: FigureSpec, study_cfg: dict):
    """The bound of ``method`` at the line's cells, scaled to the line (geometric mean)."""
    from .summary import theory_bounds

    if method is None or spec.d is None:
        return None
    try:
        bound = theory_bounds(line, method, d=int(spec.d), schedule=study_cfg.get("schedule", "paper"),
                              method_settings=spec.method_settings)
    except ValueError:          # a method without a bound in Table 1
        return None
    y = line["mse"].to_numpy(float)
    ok = (y > 0) & np.isfinite(y) & (bound > 0)
    if not ok.any():
        return None
    return bound * np.exp(np.mean(np.log(y[ok]) - np.log(bound[ok])))
