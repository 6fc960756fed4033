"""Error decomposition of each method's MSE into statistical, optimisation, clipping and privacy terms.

Three studies run the same cells and replicate data under ``release`` ``private``,
``clip_only`` and ``plain`` (docs/methods.md §9; beyond the paper). With ``e_r(K)`` a
replicate's squared error under release r at budget K and ``K_conv`` a converged budget:

==============  ==========================================
statistical     ``e_plain(K_conv)``
optimisation    ``e_plain(K) - e_plain(K_conv)``
clipping        ``e_clip_only(K) - e_plain(K)``
privacy         ``e_private(K) - e_clip_only(K)``
==============  ==========================================

The terms add up to ``e_private(K)`` replicate by replicate; each SE is that of the
paired differences.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["TERMS", "ROLES", "COLUMNS", "read_rows", "paired", "decompose", "ordered", "write_csv",
           "write_markdown"]

#: The releases the decomposition compares, each run by its own study.
ROLES = ("private", "clip_only", "plain")

#: Each term as a signed sum of per-replicate squared errors (the columns of `paired`).
TERMS = {
    "statistical": (("plain_conv", 1),),
    "optimisation": (("plain", 1), ("plain_conv", -1)),
    "clipping": (("clip_only", 1), ("plain", -1)),
    "privacy": (("private", 1), ("clip_only", -1)),
}

CELL = ["model", "method", "sizes", "m", "K"]
_READ = ["study", "model", "method", "m", "sizes", "mu", "K", "replicate", "N", "sq_error"]

#: Columns of the table: the cell, the replicates used, the private MSE and each term,
#: each followed by its Monte Carlo standard error.
COLUMNS = (CELL + ["replicates", "dropped", "mse_private", "se_private"]
           + [c for t in TERMS for c in (t, f"se_{t}")])

HEADERS = {"model": "Model", "method": "Method", "sizes": "Sizes", "m": "m", "K": "K",
           "replicates": "Replicates", "dropped": "Dropped", "mse_private": "MSE (private)",
           "se_private": "MC SE", "statistical": "Statistical", "se_statistical": "MC SE",
           "optimisation": "Optimisation", "se_optimisation": "MC SE", "clipping": "Clipping",
           "se_clipping": "MC SE", "privacy": "Privacy", "se_privacy": "MC SE"}


def read_rows(paths) -> pd.DataFrame:
    """The rows of the given cell files the decomposition reads (`_READ`).

    Parameters
    ----------
    paths : str, path-like or iterable of them
        Cell files.
    """
    from ..common.io import read_parquet_files

    return read_parquet_files(paths, _READ, "cell", only=True)


def paired(rows: pd.DataFrame, studies: dict, K_conv: int) -> pd.DataFrame:
    """Per-replicate squared errors of the three releases side by side: one row per (model, method, sizes, m, K,
    replicate) present under all three, ``private``, ``clip_only``, ``plain`` (at K) and ``plain_conv`` (at
    K_conv). ValueError for a study without rows, K_conv not a K of the plain study, or releases of unequal
    data.

    Parameters
    ----------
    rows : DataFrame
        Cell rows (`fedgdp.simulation.run.COLUMNS`, at least ``_READ``) of the three studies.
    studies : dict
        Role (`ROLES`) -> study name.
    K_conv : int
        The converged budget: a K of the plain study.
    """
    key = CELL + ["replicate"]
    parts = {}
    for role in ROLES:
        sub = rows[rows["study"] == studies[role]]
        if sub.empty:
            raise ValueError(f"no rows of study {studies[role]!r} (release {role})")
        parts[role] = sub.set_index(key)[["sq_error", "N"]]
        if parts[role].index.duplicated().any():
            raise ValueError(f"study {studies[role]!r} has several rows per replicate of a cell "
                             "(a cell file given twice, or several mu in one study: "
                             "the decomposition pairs on the data only)")
    plain = parts["plain"].reset_index()
    conv = plain[plain["K"] == int(K_conv)]
    if conv.empty:
        raise ValueError(f"K_conv = {K_conv} is not a K of study {studies['plain']!r}; "
                         f"it has K in {sorted(plain['K'].unique())}")
    wide = parts["private"].rename(columns={"sq_error": "private", "N": "N_private"})
    for role in ("clip_only", "plain"):
        wide = wide.join(parts[role].rename(columns={"sq_error": role, "N": f"N_{role}"}), how="inner")
    conv = conv.drop(columns="K").set_index(["model", "method", "sizes", "m", "replicate"])
    wide = wide.reset_index().join(conv.rename(columns={"sq_error": "plain_conv", "N": "N_plain_conv"}),
                                   on=["model", "method", "sizes", "m", "replicate"], how="inner")
    Ns = wide[["N_private", "N_clip_only", "N_plain", "N_plain_conv"]].to_numpy()
    bad = (Ns != Ns[:, :1]).any(axis=1)
    if bad.any():
        r = wide[bad].iloc[0]
        raise ValueError(f"the studies are not paired: replicate {r['replicate']} of {r['model']} "
                         f"{r['method']} sizes {r['sizes']} m {r['m']} has N = {list(Ns[bad][0])} "
                         "across the releases (they must share every data setting)")
    if wide.empty:
        raise ValueError("no replicate is present under all three releases")
    return wide[key + ["private", "clip_only", "plain", "plain_conv"]]


def decompose(wide: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, method, sizes, m, K): the private MSE and the four `TERMS` with SEs (`COLUMNS`).

    ``replicates`` counts the replicates with all four errors finite, ``dropped`` the others.

    Parameters
    ----------
    wide : pandas.DataFrame
        Paired squared errors (`paired`).
    """
    out = []
    for cell, g in wide.groupby(CELL, sort=False):
        e = g[["private", "clip_only", "plain", "plain_conv"]].to_numpy(float)
        ok = np.isfinite(e).all(axis=1)
        g = g[ok]
        row = dict(zip(CELL, cell), replicates=int(ok.sum()), dropped=int((~ok).sum()))
        row["mse_private"], row["se_private"] = _mean_se(g["private"].to_numpy(float))
        for term, parts in TERMS.items():
            values = sum(sign * g[col].to_numpy(float) for col, sign in parts)
            row[term], row[f"se_{term}"] = _mean_se(values)
        out.append(row)
    return pd.DataFrame(out, columns=COLUMNS)


def ordered(table: pd.DataFrame, methods=None) -> pd.DataFrame:
    """The rows sorted by model, K, method, sizes and m (a new index), whatever the files' order.

    Parameters
    ----------
    table : pandas.DataFrame
        A table of `decompose`.
    methods : sequence of str or None
        The methods' order (methods not in it last); None: alphabetical.
    """
    rank = {m: i for i, m in enumerate(methods or sorted(table["method"].unique()))}
    def key(c):
        return c.map(lambda v: rank.get(v, len(rank))) if c.name == "method" else c
    return table.sort_values(["model", "K", "method", "sizes", "m"], key=key, kind="stable").reset_index(drop=True)


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    """Mean and its Monte Carlo standard error ``sd / sqrt(n)`` (NaN SE for n < 2)."""
    n = x.shape[0]
    if n == 0:
        return float("nan"), float("nan")
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")


# ---------------------------------------------------------------------- writers
def _formatted(df: pd.DataFrame, digits: str) -> pd.DataFrame:
    """Text cells: every MSE, term and SE column in scientific notation (one format per
    column), method names as labels, integers as integers."""
    from ..simulation.plots import method_label
    from .tables import _fmt

    out = df.copy()
    out["method"] = [method_label(m) for m in df["method"]]
    for col in COLUMNS[COLUMNS.index("mse_private"):]:
        out[col] = [_fmt(v, "sci", digits) for v in df[col]]
    return out


def write_csv(df: pd.DataFrame, path) -> None:
    """The table as CSV: raw column names, method names as in the code, 7 significant digits.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (`COLUMNS`).
    path : str or path-like
        The file.
    """
    from ..common.io import write_text

    out = _formatted(df, "csv")
    out["method"] = df["method"]
    write_text(path, out.to_csv(index=False, lineterminator="\n"))


def write_markdown(df: pd.DataFrame, path, *, title: str = "", note: str = "") -> None:
    """The table as GitHub-flavoured Markdown, 3 significant digits, with a title and note.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (`COLUMNS`).
    path : str or path-like
        The file.
    title : str
        A heading above the table (empty: none).
    note : str
        A note below it (empty: none).
    """
    from . import tables

    tables.write_markdown(_formatted(df, "display")[COLUMNS], path, HEADERS, title=title, note=note)
