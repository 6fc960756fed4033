"""Which of the paper's conclusions the results support: the claims report.

Each claim of paper sections 4-5 (`CLAIMS`, C1 ... C6) is tested on the
pipeline's results, once per model (simulation claims C1-C4: logistic and Poisson
regression), per task (real-data claim C5: Figures 7 and 8) or per dataset (CNN
claim C6: Figures 9 and 10). A claim splits into *sub-claims* (e.g. "FedHybrid <
FedSGD" and "FedNewton best" for C2), and a sub-claim into *checks*, one per cell,
curve or group of cells, each ending in agree, tie or contradict; the checks, their
statistics, thresholds and verdict rules are `fedgdp.reports.checks` (re-exported
here). Every count and number a verdict uses is written into the ``evidence`` of the
report.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .checks import (
    ACC_TOL,
    BOOT_REPS,
    BOOT_SEED,
    CI_LEVEL,
    FLAT_SLOPE,
    OUTCOMES,
    THRESHOLDS,
    VERDICTS,
    Z_TIE,
    Check,
    Trend,
    _num,
    _outcome,
    _subclaim_line,
    _trend_outcome,
    combine,
    compare_less,
    median_diff_z,
    subclaim_verdict,
    trend,
    z_diff,
)

__all__ = ["TITLE", "VERDICTS", "OUTCOMES", "THRESHOLDS", "CLAIMS", "CLAIM_COLUMNS", "Check",
           "compare_less", "trend", "subclaim_verdict", "combine", "claim_c1", "claim_c2",
           "claim_c3", "claim_c4", "claim_c5", "claim_c6", "reading_trends", "reading_c6", "assess",
           "write_markdown", "write_csv"]

TITLE = "Which of the paper's claims the results support"

# ------------------------------------------------------------------ the claims
_Z = f"{Z_TIE:g}"
CLAIMS = {
    "C1": {
        "source": "4.2, 4.6; Figs 1-2, 11-14",
        "statement": "MSE falls as m grows (n_i fixed) and as n_i grows (m fixed), for every method.",
        "test": (f"Per method and group of cells (studies equal_n and varied_n): OLS slope of log MSE "
                 f"on log m per client-size scheme, and on log(mean n_i) per m, {CI_LEVEL:.0%} CI; "
                 f"a check agrees when the CI lies below 0, contradicts when above 0. One sub-claim "
                 f"per method and axis."),
    },
    "C2": {
        "source": "4.3, 4.6; Figs 3, 6",
        "statement": "FedHybrid < FedSGD and FedNewton < FedAvg in MSE; FedNewton is best, FedAvg worst.",
        "test": (f"Per cell of study compare: z = difference of mean MSE / combined MC SE. "
                 f"'A < B' agrees when z < -{_Z}, contradicts when z > {_Z}. 'FedNewton best' agrees "
                 f"when it is below each other method by more than {_Z} SE, contradicts when any "
                 f"method is below it by more than {_Z} SE; 'FedAvg worst' likewise."),
    },
    "C3": {
        "source": "4.4, 4.6; Figs 4, 15",
        "statement": ("At mu = 2, MSE against K falls then rises, and for K > 100 lies above the "
                      "mu = 6 and non-private curves."),
        "test": (f"Per method, study iterations. U-shape: K* = argmin of mean MSE at mu = 2; agrees "
                 f"when K* is interior and both the smallest and largest K lie above it by more than "
                 f"{_Z} SE; contradicts when K* is the smallest or largest K. Above: for every K > "
                 f"100, z of mu = 2 against mu = 6 and against non-private; agrees when z > {_Z}, "
                 f"contradicts when z < -{_Z}."),
    },
    "C4": {
        "source": "4.5, 4.6; Figs 5, 16",
        "statement": ("At fixed N, FedAvg's MSE rises sharply with m while FedSGD, FedHybrid and "
                      "FedNewton stay flat."),
        "test": (f"Per client-size scheme of study fixed_N: OLS slope of log MSE on log m "
                 f"({CI_LEVEL:.0%} CI). FedAvg rises sharply: CI above {FLAT_SLOPE:g} (contradicts: "
                 f"CI below it). FedAvg steepest: slope difference / combined slope SE > {_Z} against "
                 f"each other method (contradicts: < -{_Z}). Others flat: CI inside "
                 f"(-{FLAT_SLOPE:g}, {FLAT_SLOPE:g}) (contradicts: CI outside it)."),
    },
    "C5": {
        "source": "5.1; Figs 7 (AUC), 8 (accuracy)",
        "statement": ("FedNewton has the highest median per-client AUC / accuracy among the "
                      "private methods; NP-LocalFit has the lowest of all methods. (Paper-mode FedNewton's "
                      "mu is nominal: its Newton step is uncertified, docs/methods.md §2.)"),
        "test": (f"Per privacy level: difference of medians over clients (fold-averaged, all splits), "
                 f"paired bootstrap SE ({BOOT_REPS} resamples). FedNewton highest: z > {_Z} against "
                 f"each other private method (contradicts: z < -{_Z}). NP-LocalFit lowest: z < -{_Z} "
                 f"against every other method at every mu (contradicts: z > {_Z})."),
    },
    "C6": {
        "source": "5.2.3; Figs 9, 10",
        "statement": ("CNN accuracy rises with samples per client (Fig 9) and falls as the same data "
                      "is split over more clients (Fig 10); FedNewton-Iter is competitive with or "
                      "better than FedAvg at the larger numbers of clients."),
        "test": (f"Per method: OLS slope of median accuracy on log x ({CI_LEVEL:.0%} CI); Fig 9 agrees "
                 f"when the CI lies above 0, Fig 10 when below 0 (contradicts: the other side). "
                 f"FedNewton-Iter vs FedAvg at the upper half of m: agrees when its median is at least "
                 f"FedAvg's minus {ACC_TOL:g}, contradicts when its best run is below FedAvg's worst."),
    },
}
CLAIM_COLUMNS = ["claim", "model", "source", "statement", "test", "verdict", "evidence"]

# Which study each simulation claim reads (overridable through the spec).
DEFAULT_STUDIES = {"C1": ["equal_n", "varied_n"], "C2": ["compare"], "C3": ["iterations"],
                   "C4": ["fixed_N"]}
PAPER_METHODS = ["fedsgd", "fedhybrid", "fedavg", "fednewton"]
EXTRA_METHODS = ["fednewton_certified"]   # reported beside the paper's claims, never in them
PRIVATE_REAL = ["fedsgd", "fedavg", "fedhybrid", "fednewton", "dp_scaffold"]
REALDATA_FIGURES = {"binary": "Fig 7 (AUC)", "multiclass": "Fig 8 (accuracy)"}


# ------------------------------------------------------------------ rows of the report
def _label(method: str) -> str:
    from ..simulation.plots import method_label

    return method_label(method)


def _row(claim: str, model: str, verdict: str, evidence: list[str], source: str | None = None) -> dict:
    c = CLAIMS[claim]
    return {"claim": claim, "model": model, "source": source or c["source"],
            "statement": c["statement"], "test": c["test"], "verdict": verdict,
            "evidence": evidence}


def _not_run(claim: str, model: str, why: str, source: str | None = None) -> dict:
    return _row(claim, model, "not run", [why], source)


def _rows_of(summary: pd.DataFrame, model: str, studies: list[str]) -> pd.DataFrame:
    return summary[(summary["model"] == model) & summary["study"].isin(studies)]


def _methods(rows: pd.DataFrame, names: list[str]) -> list[str]:
    have = set(rows["method"])
    return [m for m in names if m in have]


def _cell_text(keys: dict) -> str:
    return ", ".join(f"{k}={_num(v) if isinstance(v, float) else v}" for k, v in keys.items())


# ------------------------------------------------------------------ C1
def claim_c1(summary: pd.DataFrame, model: str, studies: list[str]) -> dict:
    """C1: MSE falls with m (per client-size scheme) and with mean n_i (per m), every method.

    Parameters
    ----------
    summary : DataFrame
        Study summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`; reads ``model``,
        ``study``, ``method``, ``sizes``, ``m``, ``N_mean``, ``mse``, ``se``).
    model : str
        The model whose rows are tested.
    studies : list of str
        The studies read (default ``equal_n`` and ``varied_n``).
    """
    rows = _rows_of(summary, model, studies)
    if rows.empty:
        return _not_run("C1", model, f"no summary rows for {model} in studies {', '.join(studies)}")
    rows = rows.assign(n_mean=rows["N_mean"] / rows["m"])
    verdicts, evidence = [], []
    for method in _methods(rows, PAPER_METHODS):
        r = rows[rows["method"] == method]
        for axis, by, x in (("m", "sizes", "m"), ("n_i", "m", "n_mean")):
            checks, slopes = [], []
            for (study, group), g in r.groupby(["study", by], sort=False):
                t = trend(g[x], g["mse"], g["se"])
                slopes.append(t.slope)
                checks.append(Check(_trend_outcome(t, -1), f"{study} {by}={group}: {t.text()}"))
            finite = [s for s in slopes if np.isfinite(s)]
            rng = f"slopes {min(finite):+.2f} to {max(finite):+.2f}" if finite else ""
            v, line = _subclaim_line(f"{_label(method)} falls with {axis}", checks, rng)
            verdicts.append(v)
            evidence.append(line)
    return _row("C1", model, combine(verdicts), evidence)


# ------------------------------------------------------------------ C2
def _cells(rows: pd.DataFrame, keys=("sizes", "m", "mu", "K")):
    """(cell keys, {method: (mse, se)}) per cell, in summary order; the keys named are
    those that vary over the rows (all of them when none does)."""
    keys = [k for k in keys if rows[k].nunique() > 1] or list(keys)
    for key, g in rows.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        yield dict(zip(keys, key)), {m: (float(a), float(b)) for m, a, b in
                                     zip(g["method"], g["mse"], g["se"])}


def _best_check(cell: dict, name: str, vals: dict, others: list[str], sign: int) -> Check:
    """``name`` below (sign = -1: best) or above (sign = +1: worst) every other method."""
    zs = {o: z_diff(*vals[name], *vals[o]) for o in others if o in vals}
    outs = [_outcome(z, sign) for z in zs.values()]
    if outs and all(o == "agree" for o in outs):
        outcome = "agree"
    elif "contradict" in outs:
        outcome = "contradict"
    else:
        outcome = "tie"
    zt = ", ".join(f"{_label(o)} {z:+.1f}" for o, z in zs.items())
    return Check(outcome, f"{_cell_text(cell)}: z vs {zt}")


def claim_c2(summary: pd.DataFrame, model: str, studies: list[str]) -> dict:
    """C2: the ordering of the four methods at the compare cells (Figs 3, 6).

    Parameters
    ----------
    summary : DataFrame
        Study summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`; reads ``model``,
        ``study``, ``method``, ``sizes``, ``m``, ``mu``, ``K``, ``mse``, ``se``).
    model : str
        The model whose rows are tested.
    studies : list of str
        The studies read (default ``compare``).
    """
    rows = _rows_of(summary, model, studies)
    if rows.empty:
        return _not_run("C2", model, f"no summary rows for {model} in studies {', '.join(studies)}")
    pairs: dict[str, list] = {"hybrid<sgd": [], "newton<avg": [], "newton best": [], "avg worst": []}
    extra: dict[str, list] = {"cert<avg": [], "cert best": []}
    four = PAPER_METHODS
    for cell, vals in _cells(rows):
        if not all(m in vals for m in four):
            continue
        for key, (a, b) in (("hybrid<sgd", ("fedhybrid", "fedsgd")), ("newton<avg", ("fednewton", "fedavg"))):
            z = z_diff(*vals[a], *vals[b])
            pairs[key].append(Check(_outcome(z, -1), f"{_cell_text(cell)}: z {z:+.1f}"))
        others = [m for m in four if m != "fednewton"]
        pairs["newton best"].append(_best_check(cell, "fednewton", vals, others, -1))
        pairs["avg worst"].append(_best_check(cell, "fedavg", vals, [m for m in four if m != "fedavg"], +1))
        if "fednewton_certified" in vals:
            z = z_diff(*vals["fednewton_certified"], *vals["fedavg"])
            extra["cert<avg"].append(Check(_outcome(z, -1), f"{_cell_text(cell)}: z {z:+.1f}"))
            extra["cert best"].append(_best_check(cell, "fednewton_certified", vals, four, -1))
    names = {"hybrid<sgd": "FedHybrid < FedSGD", "newton<avg": "FedNewton < FedAvg",
             "newton best": "FedNewton best", "avg worst": "FedAvg worst"}
    verdicts, evidence = [], []
    for key, checks in pairs.items():
        v, line = _subclaim_line(names[key], checks)
        verdicts.append(v)
        evidence.append(line)
    evidence.append(_median_line(rows, four + EXTRA_METHODS))
    if extra["cert<avg"]:
        for key, name in (("cert<avg", "FedNewton-certified < FedAvg"),
                          ("cert best", "FedNewton-certified below the paper's four")):
            evidence.append("extra, not part of the claim: " + _subclaim_line(name, extra[key])[1])
    return _row("C2", model, combine(verdicts), evidence)


def _median_line(rows: pd.DataFrame, methods: list[str]) -> str:
    med = rows.groupby("method")["mse"].median()
    ncell = rows.groupby(["sizes", "m", "mu", "K"]).ngroups
    return (f"context: median over the {ncell} cells of mean MSE: "
            + ", ".join(f"{_label(m)} {_num(med[m])}" for m in methods if m in med.index))


# ------------------------------------------------------------------ C3
def claim_c3(summary: pd.DataFrame, model: str, studies: list[str], *, mu_low: float = 2.0,
             mu_high: float = 6.0, k_split: int = 100) -> dict:
    """C3: the K trade-off at mu = 2 (U-shape) and mu = 2 above mu = 6 and non-private for K > 100.

    Parameters
    ----------
    summary : DataFrame
        Study summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`; reads ``model``,
        ``study``, ``method``, ``sizes``, ``m``, ``mu``, ``K``, ``mse``, ``se``).
    model : str
        The model whose rows are tested.
    studies : list of str
        The studies read (default ``iterations``).
    mu_low : float, default=2.0
        The budget whose curve should be U-shaped.
    mu_high : float, default=6.0
        The larger budget it should lie above for large K (beside non-private, ``inf``).
    k_split : int, default=100
        "Large K": K above this.
    """
    rows = _rows_of(summary, model, studies)
    if rows.empty:
        return _not_run("C3", model, f"no summary rows for {model} in studies {', '.join(studies)}")
    verdicts, evidence = [], []
    for method in _methods(rows, PAPER_METHODS):
        u_checks, above = [], []
        for (sizes, m), g in rows[rows["method"] == method].groupby(["sizes", "m"], sort=False):
            low = g[g["mu"] == mu_low].sort_values("K")
            if len(low) >= 3:   # a U needs an interior K
                u_checks.append(_u_check(low, f"{sizes} m={m}"))
            for K in sorted(k for k in low["K"] if k > k_split):
                a = low[low["K"] == K].iloc[0]
                for ref, name in ((mu_high, f"mu={mu_high:g}"), (math.inf, "non-private")):
                    b = g[(g["mu"] == ref) & (g["K"] == K)]
                    if b.empty:
                        continue
                    z = z_diff(a["mse"], a["se"], b["mse"].iloc[0], b["se"].iloc[0])
                    above.append(Check(_outcome(z, +1), f"K={K} vs {name}: z {z:+.1f}"))
        for name, checks, show in ((f"{_label(method)} U-shape at mu={mu_low:g}", u_checks, "all"),
                                   (f"{_label(method)} above for K>{k_split}", above, "all")):
            v, line = _subclaim_line(name, checks, show=show)
            verdicts.append(v)
            evidence.append(line)
    return _row("C3", model, combine(verdicts), evidence)


def _u_check(curve: pd.DataFrame, where: str) -> Check:
    """U-shape of one MSE-against-K curve (rows sorted by K)."""
    mse, se, K = curve["mse"].to_numpy(float), curve["se"].to_numpy(float), curve["K"].to_numpy(int)
    k = int(np.nanargmin(mse))
    z_first = z_diff(mse[0], se[0], mse[k], se[k])
    z_last = z_diff(mse[-1], se[-1], mse[k], se[k])
    text = (f"{where}: min at K={K[k]} ({_num(mse[k])}); K={K[0]} {_num(mse[0])} (z {z_first:+.1f}), "
            f"K={K[-1]} {_num(mse[-1])} (z {z_last:+.1f})")
    if k in (0, len(K) - 1):
        return Check("contradict", text)
    ok = z_first > Z_TIE and z_last > Z_TIE
    return Check("agree" if ok else "tie", text)


# ------------------------------------------------------------------ C4
def claim_c4(summary: pd.DataFrame, model: str, studies: list[str]) -> dict:
    """C4: at fixed N, FedAvg's MSE rises sharply with m, the other three stay flat.

    Parameters
    ----------
    summary : DataFrame
        Study summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`; reads ``model``,
        ``study``, ``method``, ``sizes``, ``m``, ``mse``, ``se``).
    model : str
        The model whose rows are tested.
    studies : list of str
        The studies read (default ``fixed_N``).
    """
    rows = _rows_of(summary, model, studies)
    if rows.empty:
        return _not_run("C4", model, f"no summary rows for {model} in studies {', '.join(studies)}")
    sharp, steepest, flat, extra = [], [], [], []
    slopes_text = []
    for sizes, g in rows.groupby("sizes", sort=False):
        t = {m: trend(h["m"], h["mse"], h["se"]) for m, h in g.groupby("method", sort=False)}
        if "fedavg" not in t:
            continue
        avg = t["fedavg"]
        sharp.append(Check(_sharp_outcome(avg), f"{sizes}: FedAvg {avg.text()}"))
        for other in (m for m in PAPER_METHODS if m != "fedavg" and m in t):
            o = t[other]
            z = z_diff(avg.slope, avg.se, o.slope, o.se)
            steepest.append(Check(_outcome(z, +1), f"{sizes}: FedAvg - {_label(other)} z {z:+.1f}"))
            flat.append(Check(_flat_outcome(o), f"{sizes}: {_label(other)} {o.text()}"))
        for m in EXTRA_METHODS:
            if m in t:
                extra.append(f"{sizes}: {_label(m)} slope {t[m].text()}")
        slopes_text.append(f"{sizes}: " + ", ".join(f"{_label(m)} {t[m].text()}"
                                                   for m in PAPER_METHODS if m in t))
    verdicts, evidence = [], []
    for name, checks, show in (("FedAvg rises sharply", sharp, "all"),
                               ("FedAvg steeper than each other method", steepest, "all"),
                               ("others flat", flat, "all")):
        v, line = _subclaim_line(name, checks, show=show)
        verdicts.append(v)
        evidence.append(line)
    if extra:
        evidence.append("extra, not part of the claim: " + "; ".join(extra))
    return _row("C4", model, combine(verdicts), evidence)


def _sharp_outcome(t: Trend) -> str:
    if np.isnan(t.lo):
        return "tie"
    return "agree" if t.lo > FLAT_SLOPE else ("contradict" if t.hi < FLAT_SLOPE else "tie")


def _flat_outcome(t: Trend) -> str:
    if np.isnan(t.lo):
        return "tie"
    if -FLAT_SLOPE < t.lo and t.hi < FLAT_SLOPE:
        return "agree"
    if t.lo > FLAT_SLOPE or t.hi < -FLAT_SLOPE:
        return "contradict"
    return "tie"


# ------------------------------------------------------------------ C5
def _run_name(run: tuple, lab) -> str:
    """A (method, mu) column of the real-data table as text: label, and mu when private."""
    return lab(run[0]) + (f" mu={run[1]:g}" if np.isfinite(run[1]) else "")


def _median_checks(wide: pd.DataFrame, base: tuple, others: list[tuple], sign: int, lab,
                   rng: np.random.Generator) -> list[Check]:
    """Checks of "the median of ``base`` is above (sign +1) / below (-1) each of ``others``".

    ``wide`` has one row per (split, client) and one column per (method, mu); an other's
    mu is named when it differs from the base's."""
    out = []
    for other in others:
        d, z = median_diff_z(wide[base].to_numpy(), wide[other].to_numpy(), rng)
        name = lab(other[0]) if other[1] == base[1] else _run_name(other, lab)
        out.append(Check(_outcome(z, sign), f"vs {name} {d:+.4f} (z {z:+.1f})"))
    return out


def claim_c5(real: pd.DataFrame) -> list[dict]:
    """C5: one row per (dataset, task) of the real-data rows (Figs 7, 8).

    Parameters
    ----------
    real : DataFrame
        Real-data rows (`fedgdp.realdata.COLUMNS`; reads ``dataset``, ``task``,
        ``metric``, ``method``, ``mu``, ``split``, ``client``, ``value`` and, when present,
        ``label``).
    """
    groups = real.groupby(["dataset", "task"], sort=False)
    return [_c5_row(dataset, task, df) for (dataset, task), df in groups]


def _c5_row(dataset: str, task: str, df: pd.DataFrame) -> dict:
    metric = {"auc": "AUC"}.get(df["metric"].iloc[0], df["metric"].iloc[0])
    names = dict(zip(df["method"], df["label"])) if "label" in df else {}
    def lab(m):
        return names.get(m) or m
    wide = df.pivot_table(index=["split", "client"], columns=["method", "mu"], values="value")
    runs = list(wide.columns)
    rng = np.random.default_rng(BOOT_SEED)
    verdicts, evidence = [], []
    for mu in sorted({mu for _, mu in runs if np.isfinite(mu)}, reverse=True):
        if ("fednewton", mu) not in wide:
            continue
        others = [(o, mu) for o in PRIVATE_REAL if o != "fednewton" and (o, mu) in wide]
        checks = _median_checks(wide, ("fednewton", mu), others, +1, lab, rng)
        v, line = _subclaim_line(f"nominal mu={mu:g}: FedNewton highest median {metric} among private methods",
                                 checks, show="all")
        verdicts.append(v)
        evidence.append(line)
    local = [r for r in runs if r[0] == "np_localfit"]
    if local:
        checks = _median_checks(wide, local[0], [r for r in runs if r[0] != "np_localfit"], -1, lab, rng)
        v, line = _subclaim_line(f"NP-LocalFit lowest median {metric}", checks, show="not_agree")
        verdicts.append(v)
        evidence.append(line)
    med = df.groupby(["method", "mu"], sort=False)["value"].median()
    evidence.append(f"context: median {metric} over {wide.shape[0]} clients x splits: "
                    + ", ".join(f"{_run_name(run, lab)} {v:.4f}" for run, v in med.items()))
    return _row("C5", f"{task} ({dataset})", combine(verdicts), evidence,
                f"5.1; {REALDATA_FIGURES.get(task, task)}")


# ------------------------------------------------------------------ C6
def readings_evidence(readings: pd.DataFrame, on_grid: frozenset = frozenset()) -> list[str]:
    """C6's lines from the CNN readings map (`fedgdp.nn.readings`, ``readings.csv``): at
    each point, the ceiling without noise or clipping, the cost of clipping alone, the
    best private reading (median over runs and methods' best) with the mu it certifies and
    the best reading that spends a finite mu without a guarantee (``paper_sum``: its
    ``privacy`` text is not record-level), with the mu it really spends; then
    `reading_trends` of the readings not judged on their whole grid, and a line naming those that are.

    Parameters
    ----------
    readings : DataFrame
        The readings table (`fedgdp.nn.readings.TABLE_COLUMNS`).
    on_grid : frozenset of str
        Readings judged on their whole grid (`reading_c6`: their own C6 rows): no two-point lines.
    """
    def runs(n: int) -> str:
        return f"{n} run{'s' if n != 1 else ''}"

    lines = []
    for (figure, x), g in readings.groupby(["figure", "x"], sort=False):
        by = g.groupby(["reading", "release", "certified_mu"])
        med = by["accuracy"].median().reset_index().assign(runs=by["run"].nunique().to_numpy())
        point = f"readings at {'Fig 9, n' if figure == 'fig09' else 'Fig 10, m'} = {x}"
        parts = []
        for release, what in (("plain", "ceiling without clipping or noise"), ("clip_only", "clipped, no noise")):
            sub = med[med["release"] == release]
            if len(sub):
                best = sub.loc[sub["accuracy"].idxmax()]
                parts.append(f"{what} {best['accuracy']:.3f} ({best['reading']}, {runs(best['runs'])})")
        spends = np.isfinite(med["certified_mu"])
        certified = med["reading"].isin(g.loc[g["privacy"].str.startswith("record-level"), "reading"]) \
            if "privacy" in g else spends
        for rows, what, mu in ((med[spends & certified], "best private", "certified mu"),
                               (med[spends & ~certified], "best uncertified", "mu really spent")):
            if len(rows):
                best = rows.loc[rows["accuracy"].idxmax()]
                parts.append(f"{what} {best['accuracy']:.3f} ({best['reading']}, {runs(best['runs'])}, "
                             f"{mu} = {best['certified_mu']:g})")
        lines.append(f"{point} (median over runs and methods): " + "; ".join(parts))
    judged = [r for r in readings["reading"].unique() if r in on_grid]
    if judged:
        lines.append(f"C6 of reading(s) {', '.join(judged)}: on their whole grid (their own rows), not on two points")
    return lines + reading_trends(readings[~readings["reading"].isin(on_grid)])


#: the two points of each figure the readings map runs: (figure, smaller x, larger x, direction, what)
READING_TRENDS = (("fig09", 100, 600, +1, "rises from n = 100 to 600"),
                  ("fig10", 100, 1000, -1, "falls from m = 100 to 1000"))


def _step_check(label: str, lo: pd.Series, hi: pd.Series, direction: int) -> Check:
    """One method's two-point trend: agree when its median moves the claimed way by more
    than `ACC_TOL`, contradict when it moves the other way by more, tie otherwise."""
    step = float(hi.median() - lo.median())
    outcome = "agree" if direction * step > ACC_TOL else "contradict" if -direction * step > ACC_TOL else "tie"
    return Check(outcome, f"{label} {lo.median():.3f} -> {hi.median():.3f}")


def _reading_subclaims(readings: pd.DataFrame):
    """(reading, figure, verdict, evidence line) of every C6 sub-claim the map can judge a
    reading on (`reading_trends`)."""
    from ..nn.readings import privacy_label
    from ..nn.settings import LABELS

    for reading, g in readings.groupby("reading", sort=False):
        for fig, lo, hi, direction, what in READING_TRENDS:
            f = g[g["figure"] == fig]
            if not {lo, hi} <= set(f["x"]):
                continue
            checks = [_step_check(LABELS[method].removeprefix("DP-"), m[m["x"] == lo]["accuracy"],
                                  m[m["x"] == hi]["accuracy"], direction)
                      for method, m in f.groupby("method", sort=False)]
            v, line = _subclaim_line(f"reading {reading} ({privacy_label(f)}), {fig}, two points: accuracy {what}",
                                     checks, show="all")
            runs = f.groupby("x")["run"].nunique()
            yield reading, fig, v, f"{line} [runs: {runs[lo]} and {runs[hi]}]"
        f = g[(g["figure"] == "fig10") & (g["x"] == 1000) & g["method"].isin(["fednewton_iter", "fedavg"])]
        if f["method"].nunique() == 2:
            acc = {m: f[f["method"] == m]["accuracy"] for m in ("fednewton_iter", "fedavg")}
            row = {m: pd.Series({"median_accuracy": a.median(), "min_accuracy": a.min(), "max_accuracy": a.max()})
                   for m, a in acc.items()}
            v, line = _subclaim_line(f"reading {reading}, fig10, one point: FedNewton-Iter competitive with FedAvg "
                                     f"at m = 1000",
                                     [_competitive(row["fednewton_iter"], row["fedavg"], 1000)], show="all")
            yield reading, "fig10", v, line


def reading_trends(readings: pd.DataFrame) -> list[str]:
    """C6's trends judged per reading, where the map ran a reading at both points of a
    figure (`READING_TRENDS`): per method the median over runs at each point, two points
    only, so a direction rather than the paper's slope; FedNewton-Iter against FedAvg at
    m = 1000 as `_competitive` (median, best and worst run).

    Parameters
    ----------
    readings : DataFrame
        The readings table (`fedgdp.nn.readings.TABLE_COLUMNS`).
    """
    return [line for *_, line in _reading_subclaims(readings)]


def reading_c6(readings: pd.DataFrame | None = None, summaries: pd.DataFrame | None = None) -> dict[str, tuple]:
    """C6's one verdict per reading and the test it comes from, ``{reading: (verdict, basis)}``: on the
    reading's whole grid (`claim_c6_readings`' test, the printed grid's: basis ``"whole grid"``) wherever its
    summaries are given, else on the map's two points per figure (`reading_trends`, `combine` of its sub-claims,
    with the figure it rests on when the map ran the other at one point only: basis ``"two points"``); "not run"
    for a reading of the map that neither can judge. The README's CNN table, the readings' ``summary.md`` and
    ``claims.md`` all take C6 per reading from here.

    Parameters
    ----------
    readings : DataFrame, optional
        The readings table (`fedgdp.nn.readings.TABLE_COLUMNS`).
    summaries : DataFrame, optional
        Whole-grid summaries of readings (`claim_c6_readings`).
    """
    out: dict[str, tuple] = {}
    if readings is not None:
        subs: dict[str, list[tuple[str, str]]] = {r: [] for r in readings["reading"].unique()}
        for reading, fig, v, _ in _reading_subclaims(readings):
            subs[reading].append((fig, v))
        out = {r: (combine([v for _, v in got]) + _only({fig for fig, _ in got}), "two points")
               for r, got in subs.items()}
    if summaries is not None:
        for (_, reading), df in summaries.groupby(["dataset", "reading"], sort=False):
            out[reading] = (_grid_c6(df)[0], "whole grid")
    return out


def _only(figures: set) -> str:
    """" (Fig. 10 only)" where a C6 verdict rests on one figure, "" otherwise."""
    return f" (Fig. {int(next(iter(figures))[3:])} only)" if len(figures) == 1 else ""


def claim_c6(nn: pd.DataFrame, readings: pd.DataFrame | None = None, on_grid: frozenset = frozenset()) -> list[dict]:
    """C6: one row per dataset of the CNN summaries (`fedgdp.nn.plots`).

    Parameters
    ----------
    nn : DataFrame
        CNN summaries (`fedgdp.nn.plots.SUMMARY_COLUMNS`; reads ``dataset``, ``figure``,
        ``method``, ``label``, ``x``, ``median_accuracy``, ``min_accuracy``, ``max_accuracy``).
    readings : DataFrame, optional
        The CNN readings map (`readings_evidence`), added to the rows of its data set.
    on_grid : frozenset of str
        Readings judged on their whole grid (`readings_evidence`).
    """
    out = []
    for dataset, df in nn.groupby("dataset", sort=False):
        verdicts, evidence = _c6_judged(df)
        name = f"CNN ({dataset})"
        if dataset == "digits":
            from ..nn.plots import SMOKE_NOTE

            name = "CNN (digits, smoke test)"
            evidence.insert(0, "not the paper's evidence: " + SMOKE_NOTE)
        if readings is not None and "dataset" in readings and (readings["dataset"] == dataset).any():
            evidence += readings_evidence(readings[readings["dataset"] == dataset], on_grid)
        out.append(_row("C6", name, combine(verdicts), evidence))
    return out


def claim_c6_readings(summaries: pd.DataFrame) -> list[dict]:
    """C6 on the whole grid under each reading (`fedgdp.nn.readings.reading_summaries`): the printed grid's
    test (`claim_c6`: slopes over every point, FedNewton-Iter against FedAvg at the upper half of m), one row
    per (dataset, reading), its model naming the reading and the mu it really spends; "(Fig. 10 only)" where
    only that figure's summary is given. Its verdict is `reading_c6`'s.

    Parameters
    ----------
    summaries : DataFrame
        A reading's summaries: ``reading``, `fedgdp.nn.plots.SUMMARY_COLUMNS`, ``certified_mu`` and
        ``privacy``, one figure or both.
    """
    return [_row("C6", f"CNN ({dataset}), reading {reading}", *_grid_c6(df))
            for (dataset, reading), df in summaries.groupby(["dataset", "reading"], sort=False)]


def _grid_c6(df: pd.DataFrame) -> tuple[str, list[str]]:
    """(verdict, evidence lines) of C6 on one reading's whole-grid summaries (`claim_c6_readings`)."""
    from ..nn.readings import privacy_label

    verdicts, evidence = _c6_judged(df)
    by = df.groupby("figure")
    runs = ", ".join(f"{fig}: {g['x'].nunique()} points, {'-'.join(map(str, sorted(set(g['runs']))))} runs each"
                     for fig, g in by)
    reading = df["reading"].iloc[0]
    evidence.insert(0, f"the whole grid under reading {reading} ({privacy_label(df)}); {runs}")
    return combine(verdicts) + _only(set(by.groups)), evidence


def _c6_judged(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(verdicts, evidence lines) of `_c6_checks`' sub-claims on one dataset's CNN summary."""
    verdicts, evidence = [], []
    for name, checks in _c6_checks(df):
        v, line = _subclaim_line(name, checks, show="all")
        verdicts.append(v)
        evidence.append(line)
    return verdicts, evidence


def _c6_checks(df: pd.DataFrame) -> list[tuple[str, list[Check]]]:
    """(sub-claim, checks) of one dataset's CNN summary: the two trends, then FedNewton-Iter
    against FedAvg at the upper half of m (Fig 10)."""
    out = []
    for fig, direction, what in (("fig09", +1, "rises with samples per client"),
                                 ("fig10", -1, "falls with m (N fixed)")):
        f = df[df["figure"] == fig]
        if not f.empty:
            out.append((f"{fig}: accuracy {what}", [
                Check(_trend_outcome(t, direction), f"{g['label'].iloc[0]} {t.text()}")
                for _, g in f.groupby("method", sort=False)
                for t in [trend(g["x"], g["median_accuracy"], log_y=False)]]))
    f = df[(df["figure"] == "fig10") & df["method"].isin(["fednewton_iter", "fedavg"])]
    if f["method"].nunique() == 2:
        xs = sorted(f["x"].unique())
        checks = [_competitive(f[(f["x"] == x) & (f["method"] == "fednewton_iter")].iloc[0],
                               f[(f["x"] == x) & (f["method"] == "fedavg")].iloc[0], x)
                  for x in xs[len(xs) // 2:]]
        out.append(("fig10: FedNewton-Iter competitive with FedAvg at larger m", checks))
    return out


def _competitive(a: pd.Series, b: pd.Series, x) -> Check:
    """Method ``a`` competitive with ``b`` (CNN summary rows at one m)."""
    if a["median_accuracy"] >= b["median_accuracy"] - ACC_TOL:
        outcome = "agree"
    elif a["max_accuracy"] < b["min_accuracy"]:
        outcome = "contradict"
    else:
        outcome = "tie"
    return Check(outcome, f"m={x:g}: {a['median_accuracy']:.3f} vs {b['median_accuracy']:.3f}")


# ------------------------------------------------------------------ the report
def assess(summary: pd.DataFrame | None, real: pd.DataFrame | None = None, nn: pd.DataFrame | None = None,
           spec: dict | None = None, readings: pd.DataFrame | None = None,
           reading_summaries: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every claim's rows, columns `CLAIM_COLUMNS` (``evidence`` a list of lines): C1-C4 per model, in that
    order, then C5 per (dataset, task) and C6 per dataset (one "not run" row each when absent), then C6 per
    reading whose whole-grid summaries are given.

    Parameters
    ----------
    summary : DataFrame or None
        Study summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`), every model and study.
    real : DataFrame or None
        Real-data rows (`fedgdp.realdata.COLUMNS`); None: C5 "not run".
    nn : DataFrame or None
        CNN summaries (`fedgdp.nn.plots.SUMMARY_COLUMNS`); None: C6 "not run".
    spec : dict, optional
        ``models`` (default: those of the summaries, else logistic and Poisson) and
        ``studies`` (claim -> list of studies; default `DEFAULT_STUDIES`).
    readings : DataFrame, optional
        The CNN readings map (``readings.csv``), shown in C6's evidence (`readings_evidence`).
    reading_summaries : DataFrame, optional
        Whole-grid summaries under other readings: C6 rows per reading (`claim_c6_readings`).
    """
    spec = spec or {}
    studies = {**DEFAULT_STUDIES, **spec.get("studies", {})}
    if summary is None:
        summary = pd.DataFrame(columns=["model", "study", "method"])
    models = spec.get("models") or (list(dict.fromkeys(summary["model"])) or ["logistic", "poisson"])
    rows = []
    for claim, fn in (("C1", claim_c1), ("C2", claim_c2), ("C3", claim_c3), ("C4", claim_c4)):
        for model in models:
            rows.append(fn(summary, model, list(studies[claim])))
    if real is None or real.empty:
        rows.append(_not_run("C5", "real data", "no real-data result files given"))
    else:
        rows += claim_c5(real)
    if nn is None or nn.empty:
        rows.append(_not_run("C6", "CNN", "no CNN summaries given (build them with "
                                          "`snakemake --cores 2 fig09 fig10`, needs the nn extra)"))
    else:
        on_grid = frozenset() if reading_summaries is None else frozenset(reading_summaries["reading"])
        rows += claim_c6(nn, readings, on_grid)
    if reading_summaries is not None and not reading_summaries.empty:
        rows += claim_c6_readings(reading_summaries)
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(evidence=[" | ".join(e) for e in df["evidence"]])


def write_csv(df: pd.DataFrame, path) -> None:
    """The report as CSV (evidence lines joined by ' | ').

    Parameters
    ----------
    df : DataFrame
        The report (`assess`; columns `CLAIM_COLUMNS`).
    path : str or path-like
        The CSV file (written atomically).
    """
    from .tables import write_csv as _write

    _write(_flat(df), path)


def _provenance() -> str:
    from .. import __version__
    from ..common.io import git_commit

    commit = git_commit()
    return f"fedgdp {__version__}" + (f", git commit {commit[:12]}" if commit else "")


def render_markdown(df: pd.DataFrame, *, title: str = TITLE,
                    sources: str = "") -> str:
    """The report as Markdown: thresholds, a verdict table, then each claim's test and evidence.

    Parameters
    ----------
    df : DataFrame
        The report (`assess`; columns `CLAIM_COLUMNS`, ``evidence`` lists of str).
    title : str, default=TITLE
        The level-1 heading.
    sources : str, default=""
        What the report was made from, named in its first line (empty: not named).
    """
    def esc(s):
        return str(s).replace("|", "\\|")
    lines = [f"# {title}", "",
             f"Generated by `fedgdp claims` ({_provenance()})"
             + (f" from {sources}" if sources else "") + ".",
             "Each claim of the paper is tested on the results; every check ends in agree / tie / "
             "contradict, and the verdict follows from the counts by the rules below. Thresholds "
             "(constants of `fedgdp.reports.claims`, chosen before the default run was read):", "",
             "| Threshold | Value | Meaning |", "|---|---|---|"]
    lines += [f"| {k} | {v:g} | {esc(text)} |" for k, (v, text) in THRESHOLDS.items()]
    lines += ["", "Verdicts: a sub-claim *holds* when at least HOLDS_SHARE of its checks agree and "
              "none contradicts; it *fails* when fewer than PARTLY_SHARE agree or more contradict "
              "than agree; otherwise it holds *partly*. A claim holds when every sub-claim holds, "
              "fails when every sub-claim fails, and holds partly otherwise; *not run* when its "
              "results are absent.", "", "## Verdicts", "",
              "| Claim | Model | Source | Statement | Verdict |", "|---|---|---|---|---|"]
    for _, r in df.iterrows():
        lines.append(f"| {r['claim']} | {esc(r['model'])} | {esc(r['source'])} | {esc(r['statement'])} "
                     f"| **{r['verdict']}** |")
    for claim, g in df.groupby("claim", sort=False):
        lines += ["", f"## {claim}: {CLAIMS[claim]['statement']}", "",
                  f"Source: paper section {CLAIMS[claim]['source']}.", "", f"Test: {g['test'].iloc[0]}"]
        for _, r in g.iterrows():
            lines += ["", f"### {claim}, {r['model']}: {r['verdict']}", ""]
            lines += [f"- {e}" for e in r["evidence"]]
    return "\n".join(lines) + "\n"


def write_markdown(df: pd.DataFrame, path, **kwargs) -> None:
    """Write `render_markdown` atomically.

    Parameters
    ----------
    df : DataFrame
        The report (`assess`; columns `CLAIM_COLUMNS`).
    path : str or path-like
        The Markdown file.
    **kwargs
        ``title`` and ``sources`` of `render_markdown`.
    """
    from ..common.io import write_text

    write_text(path, render_markdown(df, **kwargs))
