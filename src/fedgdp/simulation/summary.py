"""Cell files to study summaries: one row per (cell, method), columns `SUMMARY_COLUMNS`.

- ``mse``: mean of ``||beta_hat - beta_true||^2`` over the ``n_ok`` replicates whose
  estimate is finite, ``se = sd / sqrt(n_ok)``, ``median`` over the same. ``diverged``
  counts the rows the run flagged (`fedgdp.simulation.run.run_cell`); flagged but finite
  estimates stay in the mean, so a method that often fails does not look better.
- ``rounds``, ``floats_up``, ``floats_down``: communication per replicate.
- ``N_mean``, ``n_min``, ``n_max``, ``B_mean``; ``mu_composed_max`` (equals the nominal
  mu), ``mu_certified`` (inf unless every release is certified) and ``privacy_mode``.

Only the needed columns are read (never ``theta_hat``).
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

__all__ = ["CELL_KEYS", "SUMMARY_COLUMNS", "read_cells", "summarise", "write_summary",
           "read_summaries", "normalise", "theory_bounds"]

CELL_KEYS = ["model", "study", "method", "sizes", "m", "mu", "K"]
_READ = CELL_KEYS + ["replicate", "N", "n_min", "n_max", "B", "sq_error", "rounds", "floats_up",
                     "floats_down", "mu_composed", "diverged"]
#: Columns added with the privacy modes; files written before them were paper-mode,
#: uncertified runs, so a missing column reads as these values.
_OPTIONAL = {"mu_certified": float("inf"), "privacy_mode": "paper"}
SUMMARY_COLUMNS = CELL_KEYS + ["replicates", "diverged", "n_ok", "mse", "se", "median", "rounds",
                               "floats_up", "floats_down", "N_mean", "n_min", "n_max", "B_mean",
                               "mu_composed_max", "mu_certified", "privacy_mode"]


def normalise(key: str, value):
    """A grid value as stored in cell and summary rows (``sizes`` canonical, ``mu`` a float,
    ``m`` and ``K`` ints; other keys unchanged).

    Parameters
    ----------
    key : str
        The grid key.
    value : object
        Its value.
    """
    if key == "sizes":
        from .data import parse_sizes

        return parse_sizes(value).text
    if key == "mu":
        return float(value)
    if key in ("m", "K"):
        return int(value)
    return value


def read_cells(paths) -> pd.DataFrame:
    """Rows of the given cell files (the summary's columns; ``mu_certified``, ``privacy_mode`` filled when
    absent); ValueError naming a missing, corrupt or incomplete file, or the cell when two files hold the same
    replicate of a method.

    Parameters
    ----------
    paths : iterable of str or path-like
        The cell files (at least one).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = [str(p) for p in paths]
    if not paths:
        raise ValueError("no cell files given")
    tables = []
    for path in paths:
        try:
            schema = pq.read_schema(path)
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise ValueError(f"cannot read cell file {path}: {exc}") from None
        missing = [c for c in _READ if c not in schema.names]
        if missing:
            raise ValueError(f"cell file {path} lacks columns {missing}")
        try:
            table = pq.read_table(path, columns=_READ + [c for c in _OPTIONAL if c in schema.names])
            for col, value in _OPTIONAL.items():
                if col not in table.column_names:
                    table = table.append_column(col, pa.array([value] * table.num_rows))
            tables.append(table)
        except Exception as exc:
            raise ValueError(f"cannot read cell file {path}: {exc}") from None
    df = pa.concat_tables(tables, promote_options="permissive").to_pandas()
    dup = df.duplicated(CELL_KEYS + ["replicate"], keep=False)
    if dup.any():
        row = df[dup].iloc[0]
        cell = ", ".join(f"{k}={row[k]}" for k in CELL_KEYS)
        raise ValueError(f"replicate {row['replicate']} appears twice for {cell}; "
                         "two cell files overlap in their seeds")
    return df


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, method), columns `SUMMARY_COLUMNS`, in order of first appearance.

    Parameters
    ----------
    rows : pandas.DataFrame
        Cell rows (`read_cells`).
    """
    df = rows.copy()
    for col, value in _OPTIONAL.items():
        if col not in df:
            df[col] = value
    ok = np.isfinite(df["sq_error"])
    df["sq_ok"] = df["sq_error"].where(ok)
    g = df.groupby(CELL_KEYS, sort=False, dropna=False)
    out = g.agg(
        replicates=("replicate", "size"),
        diverged=("diverged", "sum"),
        n_ok=("sq_ok", "count"),
        mse=("sq_ok", "mean"),
        sd=("sq_ok", "std"),
        median=("sq_ok", "median"),
        rounds=("rounds", "mean"),
        floats_up=("floats_up", "mean"),
        floats_down=("floats_down", "mean"),
        N_mean=("N", "mean"),
        n_min=("n_min", "min"),
        n_max=("n_max", "max"),
        B_mean=("B", "mean"),
        mu_composed_max=("mu_composed", "max"),
        mu_certified=("mu_certified", "max"),
        privacy_mode=("privacy_mode", "first"),
    ).reset_index()
    out["se"] = out.pop("sd") / np.sqrt(out["n_ok"].clip(lower=1))
    out.loc[out["n_ok"] < 2, "se"] = np.nan
    out["diverged"] = out["diverged"].astype("int64")
    return out[SUMMARY_COLUMNS]


def write_summary(summary: pd.DataFrame, out: str | os.PathLike, sources=()) -> None:
    """Write a summary with `fedgdp.common.io.write_parquet` (``params``: the cell files read).

    Parameters
    ----------
    summary : pandas.DataFrame
        A summary (`summarise`).
    out : str or path-like
        The file.
    sources : iterable
        The cell files it was read from.
    """
    import pyarrow as pa

    from ..common.io import write_parquet

    write_parquet(pa.Table.from_pandas(summary, preserve_index=False), out,
                  {"summary_of": [str(p) for p in sources]})


def read_summaries(paths) -> pd.DataFrame:
    """Concatenated summary files (missing optional columns filled); ValueError naming a file
    that is unreadable or not a summary.

    Parameters
    ----------
    paths : iterable of str or path-like
        The summary files (at least one).
    """
    import pyarrow.parquet as pq

    frames = []
    for path in paths:
        try:
            table = pq.read_table(path)
        except Exception as exc:
            raise ValueError(f"cannot read summary file {path}: {exc}") from None
        missing = [c for c in SUMMARY_COLUMNS if c not in table.column_names and c not in _OPTIONAL]
        if missing:
            raise ValueError(f"summary file {path} lacks columns {missing}")
        frame = table.to_pandas()
        for col, value in _OPTIONAL.items():
            if col not in frame:
                frame[col] = value
        frames.append(frame)
    if not frames:
        raise ValueError("no summary files given")
    return pd.concat(frames, ignore_index=True)


def theory_bounds(rows: pd.DataFrame, method: str, *, d: int, schedule: str = "paper",
                  method_settings: dict | None = None, form: str = "table1") -> np.ndarray:
    """`fedgdp.core.theory.upper_bound` of ``method`` at every summary row (len(rows),), with
    ``N_mean / m`` samples per client and FedAvg's R, K (FedHybrid's K2) from the method's
    settings at the row's ``K`` and ``schedule``, as the simulation ran it.

    Parameters
    ----------
    rows : pandas.DataFrame
        Summary rows (``m``, ``N_mean``, ``mu``, ``K``).
    method : str
        The simulation method.
    d : int
        Parameter dimension.
    schedule, method_settings, form
        The simulation's schedule (``paper``, ``budget``), the study's ``method_settings``, and
        the bound's form (``table1`` or ``k_explicit``).
    """
    from ..core.theory import upper_bound
    from .backend import get_method
    from .params import method_settings as settings_of

    meth = get_method(method)
    bound_of = meth.tags.theory_bound or method     # the row of Table 1 (unknown: upper_bound's error)
    out = np.empty(len(rows))
    given = (method_settings or {}).get(meth.name)
    for j, (m, N, mu, K) in enumerate(zip(rows["m"], rows["N_mean"], rows["mu"], rows["K"])):
        s = settings_of(meth, int(K), schedule, given)
        K2 = getattr(meth.settings(s), "K2", None)        # FedHybrid's stage-2 steps
        out[j] = upper_bound(bound_of, np.full(int(m), float(N) / int(m)), d=d, mu=float(mu),
                             K=int(s.get("K", K)), R=int(s.get("R", 1)),
                             K2=None if K2 is None else int(K2), form=form)
    return out
