"""The claims map: which of the paper's claims hold under which of the settings it leaves open.

The sensitivity study (docs/methods.md §8) runs every *variant* of the settings on a
reduced *design* per claim, as studies ``sens_<variant>_<claim>``. This module tests the
claims on each variant with `fedgdp.reports.claims` (the same tests and thresholds) and
maps the verdicts: a row per claim and sub-claim, model, FedNewton version (C2 and C4
also with certified FedNewton) and variant, with a key statistic.

Outputs: `write_csv` (`MAP_COLUMNS`), `write_markdown` and
`draw` (a claims x variants grid, verdict colour and text in every cell).
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..common.figures import pyplot, save_figure
from . import claims

__all__ = ["MAP_COLUMNS", "VERDICT_COLOURS", "subclaims", "claims_map", "where_holds",
           "render_markdown", "write_markdown", "write_csv", "draw"]

MAP_COLUMNS = ["claim", "model", "newton", "subclaim", "variant", "changes", "verdict",
               "key_statistic", "evidence"]
#: Okabe-Ito colours (safe for the common colour-vision deficiencies), text colour beside.
VERDICT_COLOURS: dict[str | None, tuple[str, str]] = {"holds": ("#0072B2", "white"), "partly": ("#F0E442", "black"),
                   "fails": ("#D55E00", "white"), "not run": ("#DDDDDD", "black")}
_CLAIM_FN = {"C1": claims.claim_c1, "C2": claims.claim_c2, "C3": claims.claim_c3, "C4": claims.claim_c4}
_SUBCLAIM = re.compile(r"^(?P<name>.+?): (?P<verdict>holds|partly|fails|not run)\b")


# ------------------------------------------------------------------ reading claims' rows
def subclaims(evidence: list[str]) -> list[tuple[str, str]]:
    """(sub-claim, verdict) pairs of a claim row's evidence; context and extra lines skipped.

    Parameters
    ----------
    evidence : list of str
        The claim row's evidence lines (``"<sub-claim>: <verdict> (<tally>)..."``).
    """
    out = []
    for line in evidence:
        if line.startswith(("context:", "extra")):
            continue
        hit = _SUBCLAIM.match(line)
        if hit:
            out.append((hit["name"], hit["verdict"]))
    return out


def _changes(settings: dict) -> str:
    """A variant's settings as short text (``base`` when empty)."""
    return json.dumps(settings, sort_keys=True, separators=(", ", ": ")) if settings else "none (base)"


def _key_statistic(claim: str, rows: pd.DataFrame) -> str:
    """The number that best summarises a claim's rows (see the module docstring)."""
    lab = claims._label
    if rows.empty:
        return ""
    if claim == "C2":
        med = rows.groupby("method")["mse"].median()
        return "median MSE " + ", ".join(f"{lab(m)} {med[m]:.3g}" for m in claims.PAPER_METHODS if m in med)
    if claim in ("C1", "C4"):
        slopes: dict = {}
        for (method, _sizes), g in rows.groupby(["method", "sizes"], sort=False):
            if method in claims.PAPER_METHODS:
                slopes.setdefault(method, []).append(claims.trend(g["m"], g["mse"], g["se"]).slope)
        return "slope vs m " + ", ".join(f"{lab(m)} {max(slopes[m]):+.2f}" for m in claims.PAPER_METHODS
                                         if m in slopes)
    if claim == "C3":
        low = rows[rows["mu"] == 2.0]
        best = {m: int(g.loc[g["mse"].idxmin(), "K"]) for m, g in low.groupby("method") if not g.empty}
        return "K* at mu=2 " + ", ".join(f"{lab(m)} {best[m]}" for m in claims.PAPER_METHODS if m in best)
    return ""


def _c5_statistic(df: pd.DataFrame) -> str:
    med = df[np.isfinite(df["mu"])].groupby(["method", "mu"])["value"].median()
    if med.empty:
        return ""
    mu = min(med.index.get_level_values("mu"))
    at = med.xs(mu, level="mu")
    others = at.drop("fednewton", errors="ignore")
    text = f"median at mu={mu:g}: FedNewton {at.get('fednewton', np.nan):.3f}"
    if not others.empty:
        text += f", best other private {claims._label(others.idxmax())} {others.max():.3f}"
    local = df[df["method"] == "np_localfit"]["value"]
    return text + (f"; NP-LocalFit {local.median():.3f}" if not local.empty else "")


def _with_certified(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with certified FedNewton in FedNewton's place (empty when it did not run)."""
    if "fednewton_certified" not in set(rows["method"]):
        return rows.iloc[:0]
    out = rows[rows["method"] != "fednewton"].copy()
    out.loc[out["method"] == "fednewton_certified", "method"] = "fednewton"
    return out


def _rows_of(claim, model, newton, variant, changes, row, stat) -> list[dict]:
    """The map rows of one claim row: the claim itself, then each sub-claim."""
    base = {"claim": claim, "model": model, "newton": newton, "variant": variant, "changes": changes}
    out = [dict(base, subclaim="", verdict=row["verdict"], key_statistic=stat,
                evidence=" | ".join(row["evidence"]))]
    out += [dict(base, subclaim=name, verdict=v, key_statistic="", evidence="")
            for name, v in subclaims(row["evidence"])]
    return out


# ------------------------------------------------------------------ the map
def claims_map(summary: pd.DataFrame | None, real: dict | None, spec: dict) -> pd.DataFrame:
    """Every verdict of the sensitivity study (`MAP_COLUMNS`).

    Parameters
    ----------
    summary : DataFrame or None
        Summaries (`fedgdp.simulation.summary.SUMMARY_COLUMNS`) of the generated studies.
    real : dict or None
        ``(variant, dataset) -> real-data rows`` (`fedgdp.realdata.COLUMNS`).
    spec : dict
        ``designs``: generated study -> {variant, claim, models}; ``variants`` and
        ``realdata_variants``: name -> settings (what each changes); ``skipped``: notes
        on datasets not run. See `fedgdp.plan.Plan.sensitivity_map_spec`.
    """
    rows = []
    variants = spec.get("variants", {})
    rank = {v: i for i, v in enumerate(_order(spec))}
    claim_order = sorted(spec.get("designs", {}).items(),
                         key=lambda kv: (rank.get(kv[1]["variant"], len(rank)), kv[1]["claim"]))
    for study, d in claim_order:
        claim, variant = d["claim"], d["variant"]
        changes = _changes(variants.get(variant, {}))
        for model in d["models"]:
            sub = (summary[(summary["study"] == study) & (summary["model"] == model)]
                   if summary is not None else pd.DataFrame(columns=["model", "study", "method"]))
            row = _CLAIM_FN[claim](sub, model, [study])
            rows += _rows_of(claim, model, "paper", variant, changes, row, _key_statistic(claim, sub))
            cert = _with_certified(sub) if claim in ("C2", "C4") and not sub.empty else sub.iloc[:0]
            if not cert.empty:
                row = _CLAIM_FN[claim](cert, model, [study])
                rows += _rows_of(claim, model, "certified", variant, changes, row, _key_statistic(claim, cert))
    for (variant, _dataset), df in (real or {}).items():
        changes = _changes(spec.get("realdata_variants", {}).get(variant, {}))
        for row in claims.claim_c5(df):
            task_rows = df[df["task"] == row["model"].split(" (")[0]]
            rows += _rows_of("C5", row["model"], "paper", variant, changes, row, _c5_statistic(task_rows))
    return pd.DataFrame(rows, columns=MAP_COLUMNS)


def _order(spec: dict) -> list[str]:
    """Variant names in the config's order (``order``; else as given), base first."""
    names = spec.get("order") or [*spec.get("variants", {}), *spec.get("realdata_variants", {})]
    return list(dict.fromkeys(["base", *names]))


#: Claims whose sub-claims get their own rows in the grid (C1's eight per model stay in the CSV).
GRID_SUBCLAIMS = ("C2", "C4", "C5")


def where_holds(df: pd.DataFrame, claim: str) -> list[tuple[str, str, str]]:
    """``(variant, model, newton)`` of each claim-level row where ``claim`` holds.

    Parameters
    ----------
    df : pandas.DataFrame
        The map (`claims_map`).
    claim : str
        ``C1`` ... ``C5``.
    """
    top = df[(df["claim"] == claim) & (df["subclaim"] == "") & (df["verdict"] == "holds")]
    return list(zip(top["variant"], top["model"], top["newton"]))


def _row_label(claim, model, newton, subclaim) -> str:
    head = f"{claim} {model}" + (" (certified FedNewton)" if newton == "certified" else "")
    return f"    {subclaim}" if subclaim else head


def _grid(df: pd.DataFrame, spec: dict) -> tuple[list[tuple], list[str], dict]:
    """(row keys, variant columns, (row key, variant) -> verdict) in map order; sub-claim
    rows for `GRID_SUBCLAIMS` and the paper's FedNewton only."""
    keys = list(dict.fromkeys((r.claim, r.model, r.newton, r.subclaim) for r in df.itertuples()
                              if not (r.subclaim and (r.newton == "certified" or r.claim not in GRID_SUBCLAIMS))))
    keys.sort(key=lambda k: (k[0], k[1], k[2] != "paper"))   # stable: sub-claims stay under their claim
    have = set(df["variant"])
    variants = [v for v in _order(spec) if v in have] + [v for v in dict.fromkeys(df["variant"])
                                                          if v not in _order(spec)]
    cells = {((r.claim, r.model, r.newton, r.subclaim), r.variant): r.verdict for r in df.itertuples()}
    return keys, variants, cells


# ------------------------------------------------------------------ outputs
_SHORT: dict[str | None, str] = {"holds": "holds", "partly": "partly", "fails": "fails", "not run": "n/r"}


def render_markdown(df: pd.DataFrame, spec: dict) -> str:
    """The map as Markdown: what each variant changes, the verdict grid, where C2 and C4
    hold, and the key statistic of every claim row.

    Parameters
    ----------
    df : pandas.DataFrame
        The map (`claims_map`).
    spec : dict
        The map's spec (as in `claims_map`; also ``title``, ``provenance``, ``replicates``, ``order``).
    """
    def esc(s):
        return str(s).replace("|", "\\|")
    title = spec.get("title", "Claims map")
    lines = [f"# {title}", "",
             f"Generated by `fedgdp claims-map` ({claims._provenance()}); made by "
             f"{spec.get('provenance', 'an unnamed run')}. Each claim is tested by `fedgdp.reports.claims` "
             f"(thresholds and verdict rules: tables/<run>/claims.md) on every variant's results, "
             f"{spec.get('replicates', '?')} replicates per simulation cell.", ""]
    lines += ["## Variants", "", "| Variant | Simulation settings changed | Real-data settings changed |",
              "|---|---|---|"]
    sim, real = spec.get("variants", {}), spec.get("realdata_variants", {})
    for name in _order(spec):
        lines.append(f"| {name} | {esc(_changes(sim[name])) if name in sim else '-'} | "
                     f"{esc(_changes(real[name])) if name in real else '-'} |")
    for note in spec.get("skipped", []):
        lines += ["", f"Real data: {note}."]
    keys, variants, cells = _grid(df, spec)
    lines += ["", "## Verdicts", "", "| Claim / sub-claim | " + " | ".join(variants) + " |",
              "|---|" + "---|" * len(variants)]
    for k in keys:
        label = _row_label(*k).strip()
        label = f"&nbsp;&nbsp;{esc(label)}" if k[3] else f"**{esc(label)}**"
        lines.append(f"| {label} | " + " | ".join(_SHORT.get(cells.get((k, v)), "-") for v in variants) + " |")
    lines += ["", "## Where C2 and C4 hold", ""]
    for claim in ("C2", "C4"):
        hits = where_holds(df, claim)
        tested = ((df["claim"] == claim) & (df["subclaim"] == "") & (df["verdict"] != "not run")).any()
        if not tested:      # no results of its studies: say so, never "under no variant"
            lines.append(f"- {claim}: not tested (no results of its studies were given).")
            continue
        text = ("; ".join(f"{v} ({m}" + (", certified FedNewton" if n == "certified" else "") + ")"
                          for v, m, n in hits) if hits else "under no variant")
        lines.append(f"- {claim} holds: {text}.")
    lines += ["", "## Key statistics", "", "| Claim | Model | FedNewton | Variant | Verdict | Key statistic |",
              "|---|---|---|---|---|---|"]
    for r in df[df["subclaim"] == ""].itertuples():
        lines.append(f"| {r.claim} | {esc(r.model)} | {r.newton} | {r.variant} | {r.verdict} | "
                     f"{esc(r.key_statistic)} |")
    return "\n".join(lines) + "\n"


def write_markdown(df: pd.DataFrame, path, spec: dict) -> None:
    """Write `render_markdown` of the map to ``path`` (atomically).

    Parameters
    ----------
    df : pandas.DataFrame
        The map (`claims_map`).
    path : str or path-like
        The file.
    spec : dict
        The map's spec.
    """
    from ..common.io import write_text

    write_text(path, render_markdown(df, spec))


def write_csv(df: pd.DataFrame, path) -> None:
    """Write the map as CSV (`fedgdp.reports.tables.write_csv`).

    Parameters
    ----------
    df : pandas.DataFrame
        The map (`MAP_COLUMNS`).
    path : str or path-like
        The file.
    """
    from .tables import write_csv as _write

    _write(df, path)


def draw(df: pd.DataFrame, spec: dict, pdf=None, png=None) -> None:
    """The claims map as a grid: claims and sub-claims x variants, each cell coloured and labelled by its verdict.

    Parameters
    ----------
    df : pandas.DataFrame
        The map (`claims_map`).
    spec : dict
        The map's spec (``title``, ``caption``, ``order``, ``variants``, ``realdata_variants``).
    pdf, png : str, path-like or None
        Where to write the figure (None: not in that format).
    """
    plt = pyplot()
    from matplotlib.patches import Patch


    keys, variants, cells = _grid(df, spec)
    fig, ax = plt.subplots(figsize=(2.8 + 0.62 * len(variants), 1.6 + 0.24 * len(keys)))
    for i, k in enumerate(keys):
        for j, v in enumerate(variants):
            verdict = cells.get((k, v))
            face, text = VERDICT_COLOURS.get(verdict, ("white", "black"))
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=face, edgecolor="white", lw=1))
            ax.text(j + 0.5, i + 0.5, _SHORT.get(verdict, "-"), ha="center", va="center",
                    fontsize=6.5, color=text, fontweight="bold" if not k[3] else "normal")
    ax.set_xlim(0, len(variants))
    ax.set_ylim(len(keys), 0)
    ax.set_xticks(np.arange(len(variants)) + 0.5, variants, rotation=60, ha="right", fontsize=7.5)
    ax.set_yticks(np.arange(len(keys)) + 0.5, [_row_label(*k) for k in keys], fontsize=7.5)
    for tick, k in zip(ax.get_yticklabels(), keys):
        tick.set_fontweight("normal" if k[3] else "bold")
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(spec.get("title", "Claims map"), fontsize=10, loc="left")
    handles = [Patch(facecolor=c, label=v) for v, (c, _) in VERDICT_COLOURS.items()]
    handles.append(Patch(facecolor="white", edgecolor="lightgrey", label="-: not in this\nvariant's designs"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7.5, frameon=False,
              title="verdict", title_fontsize=8)
    caption = spec.get("caption", "")
    if caption:   # the caption under the grid, wrapped to the figure's width
        import textwrap

        width = int(fig.get_figwidth() * 15)
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(caption, width)), fontsize=6.5, color="dimgrey",
                 va="bottom", ha="left")
        lines = len(textwrap.wrap(caption, width))
        fig.set_figheight(fig.get_figheight() + 0.12 * lines)
        fig.tight_layout(rect=(0, (0.12 * lines + 0.1) / fig.get_figheight(), 1, 1))
    else:
        fig.tight_layout()
    title = spec.get("title", "Claims map")
    save_figure(fig, pdf, png, title=title, bbox_inches="tight", pad_inches=0.1)   # long row labels
