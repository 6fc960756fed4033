"""Tables from study summaries: the paper's Table 1 and the rates table (docs/methods.md §4).

- `table1`: rounds, total communication and error-bound order of each method
  (`fedgdp.core.theory.TABLE1`) beside what the simulation measured at one
  reference cell: rounds, floats sent up and down, empirical MSE and its Monte
  Carlo standard error.
- `rates`: fitted log-log slopes of empirical MSE against m or N
  (statsmodels OLS of log MSE on log x over the cells of a group, with a 95%
  confidence interval) beside the exponent the method's bound predicts over the
  same cells (`fedgdp.core.theory.local_exponent` of
  `fedgdp.simulation.summary.theory_bounds`), by default in the K-explicit form of
  Remark 3.4 with the iteration counts the study ran (column ``bound_form``).

Writers: `write_csv`, `write_markdown`, `write_latex`.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..common.io import write_text
from ..core.settings import spec_of
from ..simulation.plots import method_label
from ..simulation.summary import normalise, theory_bounds

__all__ = ["Table1Spec", "RatesSpec", "table1", "rates", "write_csv", "write_markdown", "write_latex"]


@dataclass(frozen=True)
class Table1Spec:
    """What `table1` reads: ``model``, ``study``, ``cell`` (``sizes``, ``m``, ``mu``, ``K``: the reference
    cell) and ``methods`` (row order; None: as in the summary)."""

    model: str
    study: str
    cell: dict
    methods: list | None = None

    @classmethod
    def of(cls, spec) -> Table1Spec:
        """The typed spec of its JSON mapping (keys it does not read are ignored).

        Parameters
        ----------
        spec : dict or Table1Spec
        """
        return spec_of(cls, spec, ("model", "study", "cell"), "table1")


@dataclass(frozen=True)
class RatesSpec:
    """What `rates` reads (its docstring): ``fits``, ``models``, ``studies``, ``d`` per model, the default
    ``method_settings`` and the ``bound_form``."""

    fits: list
    models: list
    studies: dict
    d: dict = field(default_factory=dict)
    method_settings: dict | None = None
    bound_form: str = "k_explicit"

    @classmethod
    def of(cls, spec) -> RatesSpec:
        """The typed spec of its JSON mapping (keys it does not read are ignored).

        Parameters
        ----------
        spec : dict or RatesSpec
        """
        return spec_of(cls, spec, ("fits", "models", "studies"), "rates")


# ------------------------------------------------------------------------ Table 1
def table1(summary: pd.DataFrame, spec) -> pd.DataFrame:
    """Table 1 with measurements at the reference cell: one row per method, columns `TABLE1_HEADERS` (theory,
    then measurements; empty for a method absent from the cell); ValueError without a summary row at the
    reference cell.

    Parameters
    ----------
    summary : DataFrame
        Study summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`; reads
        ``model``, ``study``, ``method``, the cell's keys, ``rounds``, ``floats_up``,
        ``floats_down``, ``mse``, ``se``, ``replicates``, ``diverged``).
    spec : Table1Spec or dict
        ``model``, ``study``, ``cell`` (``sizes``, ``m``, ``mu``, ``K``: the reference
        cell) and optionally ``methods`` (row order; default: as in the summary).
    """
    from ..core.theory import TABLE1
    from ..simulation.backend import REGISTRY

    spec = Table1Spec.of(spec)
    sel = (summary["model"] == spec.model) & (summary["study"] == spec.study)
    for key, value in spec.cell.items():
        sel &= summary[key] == normalise(key, value)
    rows = summary[sel].set_index("method")
    if rows.empty:
        raise ValueError(f"table1: no summary rows for the reference cell {spec.cell} "
                         f"of {spec.model} {spec.study}")
    out = []
    for name in spec.methods or list(rows.index):
        theory = TABLE1.get(name, {})
        r = rows.loc[name] if name in rows.index else None
        out.append({
            "method": method_label(name),
            "algorithm": getattr(REGISTRY.get(name), "algorithm", ""),
            "rounds_theory": theory.get("rounds", ""),
            "communication_theory": theory.get("communication", ""),
            "bound_theory": theory.get("bound", ""),
            "rounds": _int(r, "rounds"),
            "floats_up": _int(r, "floats_up"),
            "floats_down": _int(r, "floats_down"),
            "mse": np.nan if r is None else float(r["mse"]),
            "se": np.nan if r is None else float(r["se"]),
            "replicates": _int(r, "replicates"),
            "diverged": _int(r, "diverged"),
        })
    return pd.DataFrame(out)


def _int(row, key):
    return pd.NA if row is None else int(round(float(row[key])))


TABLE1_HEADERS = {
    "method": "Method", "algorithm": "Algorithm", "rounds_theory": "Rounds (theory)",
    "communication_theory": "Communication (theory)", "bound_theory": "MSE bound (order)",
    "rounds": "Rounds", "floats_up": "Floats up", "floats_down": "Floats down",
    "mse": "Empirical MSE", "se": "MC SE", "replicates": "Replicates", "diverged": "Diverged",
}


# ---------------------------------------------------------------------- rates
def rates(summary: pd.DataFrame, spec) -> pd.DataFrame:
    """Fitted and predicted log-log slopes of empirical MSE, one row per (model, fit, group, method):
    ``points``, ``slope``, ``ci_low``, ``ci_high`` (95%), ``predicted`` and ``within_ci``.

    Parameters
    ----------
    summary : DataFrame
        Study summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`; reads
        ``model``, ``study``, ``method``, ``m``, ``N_mean``, ``K``, ``mse`` and the ``by`` axes).
    spec : RatesSpec or dict
        ``fits``: list of ``{study, x, by, label}`` where ``x`` is ``m`` or ``N`` (the
        mean total sample size of a cell) and ``by`` an optional grid axis (cells
        sharing its value form one group; without it all cells of the study are one
        group); ``models``: models to fit; ``studies``: the studies' config entries
        (methods, schedule, and their ``method_settings`` when they differ from the defaults);
        ``d``: dimension per model; ``method_settings``.
    """
    import statsmodels.api as sm

    spec = RatesSpec.of(spec)
    out = []
    for fit in spec.fits:
        study = fit["study"]
        study_cfg = spec.studies[study]
        xcol = "N_mean" if fit["x"] == "N" else fit["x"]
        for model in spec.models:
            rows = summary[(summary["model"] == model) & (summary["study"] == study)]
            if rows.empty:
                continue
            groups = [(None, rows)] if not fit.get("by") else list(rows.groupby(fit["by"], sort=False))
            for group, grows in groups:
                for method in study_cfg.get("methods") or list(dict.fromkeys(grows["method"])):
                    cells = grows[grows["method"] == method].sort_values(xcol)
                    cells = cells[(cells["mse"] > 0) & np.isfinite(cells["mse"])]
                    x = cells[xcol].to_numpy(float)
                    y = cells["mse"].to_numpy(float)
                    slope = lo = hi = np.nan
                    if np.unique(x).size >= 2:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            res = sm.OLS(np.log(y), sm.add_constant(np.log(x))).fit()
                            slope = float(res.params[1])
                            if res.df_resid > 0:
                                lo, hi = (float(v) for v in res.conf_int(0.05)[1])
                    predicted = _predicted(cells, x, method, model, spec, study_cfg)
                    form = _bound_form(cells, method, spec, study_cfg)
                    out.append({
                        "model": model, "study": study,
                        "fit": fit.get("label") or f"log MSE on log {fit['x']}",
                        "group": "all cells" if group is None else str(group),
                        "method": method_label(method), "points": int(x.size),
                        "slope": slope, "ci_low": lo, "ci_high": hi, "predicted": predicted,
                        "within_ci": bool(lo <= predicted <= hi) if np.isfinite(lo) else pd.NA,
                        "bound_form": form,
                    })
    return pd.DataFrame(out, columns=["model", "study", "fit", "group", "method", "points", "slope",
                                      "ci_low", "ci_high", "predicted", "within_ci", "bound_form"])


def _predicted(cells, x, method, model, spec, study_cfg) -> float:
    from ..core.theory import local_exponent

    if np.unique(x).size < 2:
        return np.nan
    try:
        bound = theory_bounds(cells, method, d=int(spec.d[model]),
                              schedule=study_cfg.get("schedule", "paper"),
                              method_settings=study_cfg.get("method_settings", spec.method_settings),
                              form=spec.bound_form)
    except ValueError:
        return np.nan
    return local_exponent(x, bound)


_FORM_NAMES = {"table1": "Table 1", "k_explicit": "K-explicit (Remark 3.4)"}


def _bound_form(cells, method, spec, study_cfg) -> str:
    """Which bound a row's prediction uses: the form, its privacy term
    (`fedgdp.core.theory.BOUND_TERMS`) and the iteration counts of the cells."""
    from ..core.theory import BOUND_TERMS
    from ..simulation.backend import REGISTRY
    from ..simulation.params import method_settings

    form = spec.bound_form
    term = BOUND_TERMS.get((method, form))
    if term is None or cells.empty or method not in REGISTRY:
        return ""
    counts: dict = {}
    meth = REGISTRY[method]
    given = (study_cfg.get("method_settings", spec.method_settings) or {}).get(meth.name)
    for K in dict.fromkeys(int(k) for k in cells["K"]):
        st = method_settings(meth, K, study_cfg.get("schedule", "paper"), given)
        for key in ("R", "K", "K2"):
            if key in st and key in term.split():
                counts.setdefault(key, []).append(str(st[key]))
    used = ", ".join(f"{k} = {'/'.join(dict.fromkeys(v))}" for k, v in counts.items())
    return f"{_FORM_NAMES[form]}: d/N + {term}" + (f"; {used}" if used else "")


RATES_HEADERS = {
    "model": "Model", "study": "Study", "fit": "Fit", "group": "Cells", "method": "Method",
    "points": "Points", "slope": "Fitted slope", "ci_low": "95% CI low", "ci_high": "95% CI high",
    "predicted": "Predicted exponent", "within_ci": "Prediction in CI", "bound_form": "Bound used",
}


# --------------------------------------------------------------------- writers
#: MSE-like columns: scientific notation in every format (3 significant digits in
#: Markdown and LaTeX, 7 in CSV), whatever the values' size
SCIENTIFIC = ("mse", "se", "median")
#: slope-like columns: fixed point (3 decimals in Markdown and LaTeX, 6 in CSV)
FIXED = ("slope", "ci_low", "ci_high", "predicted")
_DIGITS = {"display": {"sci": 2, "fixed": 3}, "csv": {"sci": 6, "fixed": 6}}


def column_styles(df: pd.DataFrame) -> dict:
    """Column name -> ``"sci"``, ``"fixed"`` or ``"auto"`` (floats not in `SCIENTIFIC` or `FIXED`: by range).

    Such a float column is fixed point when every finite non-zero value lies in ``[0.01, 1e5)``.

    Parameters
    ----------
    df : DataFrame
        The table.
    """
    styles = {}
    for col in df.columns:
        if col in SCIENTIFIC or col in FIXED:
            styles[col] = "sci" if col in SCIENTIFIC else "fixed"
        elif pd.api.types.is_float_dtype(df[col]):
            v = np.abs(df[col].to_numpy(float))
            v = v[np.isfinite(v) & (v > 0)]
            styles[col] = "fixed" if ((v >= 1e-2) & (v < 1e5)).all() else "sci"
        else:
            styles[col] = "auto"
    return styles


def _fmt(value, style: str = "auto", digits: str = "display") -> str:
    """One cell as text in the column's ``style`` (`column_styles`)."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)) and style == "auto":
        return f"{int(value)}"
    if isinstance(value, (int, float, np.integer, np.floating)):
        value = float(value)
        if math.isnan(value):
            return ""
        if style == "auto":
            style = "sci" if value != 0 and (abs(value) < 1e-2 or abs(value) >= 1e5) else "fixed"
        places = _DIGITS[digits][style]
        return f"{value:.{places}e}" if style == "sci" else f"{value:.{places}f}"
    return str(value)


def _tex_number(text: str) -> str:
    """``2.72e-02`` -> ``$2.72 \\times 10^{-2}$`` (an empty cell stays empty)."""
    mantissa, e, exponent = text.partition("e")
    if not e or not exponent.lstrip("+-").isdigit():
        return _tex_text(text)
    return rf"${mantissa} \times 10^{{{int(exponent)}}}$"


def write_csv(df: pd.DataFrame, path) -> None:
    """Machine-readable table: raw column names; numbers in their column's style
    (`column_styles`) with 7 significant digits (scientific) or 6 decimals.

    Parameters
    ----------
    df : DataFrame
        The table.
    path : str or path-like
        The CSV file (written atomically).
    """
    styles = column_styles(df)
    out = df.copy()
    for col, style in styles.items():
        if style != "auto":
            out[col] = [_fmt(v, style, "csv") for v in df[col]]
    write_text(path, out.to_csv(index=False, lineterminator="\n"))


def write_markdown(df: pd.DataFrame, path, headers: dict, *, title: str = "", note: str = "") -> None:
    """A GitHub-flavoured Markdown table with readable headers, one number format per column.

    Parameters
    ----------
    df : DataFrame
        The table.
    path : str or path-like
        The Markdown file (written atomically).
    headers : dict of str to str
        Column name -> header shown (a column not in it shows its name).
    title : str, default=""
        A level-1 heading above the table (empty: none).
    note : str, default=""
        A paragraph below the table (empty: none).
    """
    cols = list(df.columns)
    styles = column_styles(df)
    lines = [f"# {title}", ""] if title else []
    lines.append("| " + " | ".join(headers.get(c, c) for c in cols) + " |")
    lines.append("|" + "|".join("---" for _ in cols) + "|")
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_fmt(row[c], styles[c]).replace("|", "\\|") for c in cols) + " |")
    if note:
        lines += ["", note]
    write_text(path, "\n".join(lines) + "\n")


_TEX_ESCAPE = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "~": r"\textasciitilde{}"}


def _tex_text(s: str) -> str:
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in s)


def _tex_math(s: str) -> str:
    """A bound or order such as ``d/N + m d^2 log N / (mu^2 N^2)`` in math mode."""
    if not s:
        return ""
    for word, cmd in (("Omega", r"\Omega"), ("log", r"\log"), ("mu", r"\mu")):
        s = s.replace(word, cmd + " ")
    return "$" + s.replace("  ", " ") + "$"


def write_latex(df: pd.DataFrame, path, headers: dict, *, math_cols=(), caption: str = "",
                label: str = "") -> None:
    """A booktabs ``table`` environment; ``math_cols`` are typeset in math mode, numbers in
    their column's style (`column_styles`), scientific ones as ``$a \\times 10^{b}$``.

    Parameters
    ----------
    df : DataFrame
        The table.
    path : str or path-like
        The .tex file (written atomically).
    headers : dict of str to str
        Column name -> header shown (a column not in it shows its name).
    math_cols : iterable of str, default=()
        Columns of bounds or orders (``d/N + ...``) set in math mode.
    caption : str, default=""
        The table's caption (empty: none).
    label : str, default=""
        Its ``\\label`` (empty: none).
    """
    cols = list(df.columns)
    align = "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in cols)
    lines = [r"\begin{table}[ht]", r"\centering", r"\small"]
    if caption:
        lines.append(rf"\caption{{{_tex_text(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\toprule",
              " & ".join(_tex_text(headers.get(c, c)) for c in cols) + r" \\", r"\midrule"]
    styles = column_styles(df)
    for _, row in df.iterrows():
        cells = [_tex_math(str(row[c])) if c in math_cols
                 else _tex_number(_fmt(row[c], "sci")) if styles[c] == "sci"
                 else _tex_text(_fmt(row[c], styles[c])) for c in cols]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    write_text(path, "\n".join(lines) + "\n")
