"""Compare the outputs of two pipeline runs: are their numbers identical?

A refactor that should not change any number is checked by running the pipeline before
and after it and comparing the two output trees file by file:

- Parquet data: equal Arrow tables once the timing columns (`volatile`) are dropped; file
  metadata is not compared, and cell files are one table sorted by cell, replicate, method;
- tables (``tables/<run>/*.csv``): byte for byte, or cell for cell without a timing column.

Usage::

    python -m fedgdp.commands.rundiff BEFORE AFTER [--run paper]

where BEFORE and AFTER are the roots of two checkouts (each holding ``results/`` and
``tables/``). Exit status 0 when every file of BEFORE has an identical twin in AFTER,
1 otherwise; one line per file that differs or is missing.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

#: Columns that record run time, different on every run by nature (and, in summaries,
#: any column whose name ends in ``_elapsed_s``, see `volatile`).
VOLATILE = frozenset({"elapsed_s"})


def volatile(column: str) -> bool:
    """Whether a column records run time rather than a number of the method.

    Parameters
    ----------
    column : str
        A column name.
    """
    return column in VOLATILE or column.endswith("_elapsed_s")


@dataclass
class Difference:
    """One file of the first tree without an identical twin in the second."""

    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def _same_values(xs: list, ys: list) -> bool:
    """Equal value for value, a NaN equal to a NaN (Arrow's ``equals`` says NaN != NaN
    inside list columns such as a diverged run's ``theta_hat``)."""
    def same(x, y):
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(same(u, v) for u, v in zip(x, y))
        if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
            return True
        return x == y and type(x) is type(y)

    return len(xs) == len(ys) and all(same(x, y) for x, y in zip(xs, ys))


def _parquet_difference(a: Path, b: Path) -> str | None:
    """Why two Parquet files hold different data (None when they hold the same)."""
    import pyarrow.parquet as pq

    return _table_difference(pq.read_table(a), pq.read_table(b))


def _table_difference(ta, tb) -> str | None:
    """Why two Arrow tables hold different data, timing columns aside (None if they don't)."""
    import numpy as np

    ta = ta.drop_columns([c for c in ta.column_names if volatile(c)])
    tb = tb.drop_columns([c for c in tb.column_names if volatile(c)])
    if ta.column_names != tb.column_names:
        return f"columns differ: {ta.column_names} vs {tb.column_names}"
    if ta.num_rows != tb.num_rows:
        return f"{ta.num_rows} rows vs {tb.num_rows}"
    for name in ta.column_names:
        ca, cb = ta.column(name), tb.column(name)
        if ca.equals(cb):
            continue
        xs, ys = ca.to_pylist(), cb.to_pylist()
        if not _same_values(xs, ys):
            try:
                diff = np.nanmax(np.abs(np.asarray(xs, float) - np.asarray(ys, float)))
                return f"column {name} differs (max abs difference {diff:.3g})"
            except (TypeError, ValueError):
                return f"column {name} differs"
    if not ta.schema.remove_metadata().equals(tb.schema.remove_metadata()):
        return "column types differ"
    return None


def _csv_difference(a: Path, b: Path) -> str | None:
    """Why two CSV tables differ (None when their bytes are equal, or when they differ
    only in timing columns: then every other cell is compared as text)."""
    import csv

    if a.read_bytes() == b.read_bytes():
        return None
    ra, rb = (list(csv.reader(f.read_text().splitlines())) for f in (a, b))
    if not ra or not rb or ra[0] != rb[0] or not any(volatile(c) for c in ra[0]):
        return "bytes differ"
    keep = [i for i, c in enumerate(ra[0]) if not volatile(c)]
    if [[r[i] for i in keep] for r in ra] != [[r[i] for i in keep] for r in rb]:
        return "bytes differ (beyond its timing columns)"
    return None


#: The columns that name a row of a cell file (cells are compared as one sorted table).
CELL_KEYS = ["model", "study", "sizes", "m", "mu", "K", "replicate", "method"]


def _cell_rows(root: Path):
    """Every cell file's rows under ``root`` as one table sorted by `CELL_KEYS`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(root.rglob("*.parquet"))
    if not files:
        return None
    table = pa.concat_tables([pq.read_table(f).replace_schema_metadata(None) for f in files])
    return table.sort_by([(k, "ascending") for k in CELL_KEYS])


def _cells_difference(before: Path, after: Path) -> str | None:
    a, b = _cell_rows(before), _cell_rows(after)
    if b is None:
        return "no cell files in the second tree"
    why = _table_difference(a, b)
    return None if why is None else f"{a.num_rows} rows: {why}"


def compare_trees(before: str | Path, after: str | Path, run: str = "paper") -> tuple[int, list[Difference]]:
    """Compare the Parquet data and CSV tables of run ``run`` in two checkouts:
    ``(files compared, differences)``, every file of ``before`` looked for in ``after``, the cell files counting
    as one (all their rows, `_cell_rows`).

    Parameters
    ----------
    before, after : str or path-like
        Roots of the two checkouts (each holding ``results/<run>/`` and ``tables/<run>/``).
    run : str, default="paper"
        The run name.
    """
    before, after = Path(before), Path(after)
    cells = before / "results" / run / "cells"
    files = sorted(f for f in (before / "results" / run).rglob("*.parquet") if cells not in f.parents)
    files += sorted((before / "tables" / run).glob("*.csv"))
    diffs = []
    if cells.is_dir():
        why = _cells_difference(cells, after / "results" / run / "cells")
        if why:
            diffs.append(Difference(str(cells.relative_to(before)), why))
    for a in files:
        rel = a.relative_to(before)
        b = after / rel
        if not b.exists():
            diffs.append(Difference(str(rel), "missing in the second tree"))
            continue
        why = _parquet_difference(a, b) if a.suffix == ".parquet" else _csv_difference(a, b)
        if why:
            diffs.append(Difference(str(rel), why))
    return len(files) + cells.is_dir(), diffs


def main(argv: list[str] | None = None) -> int:
    """``python -m fedgdp.commands.rundiff BEFORE AFTER [--run RUN]``: print the files that differ and a count;
    exit status 0 when every file is identical, 1 when some differ or are missing, 2 without outputs of the run
    under BEFORE.

    Parameters
    ----------
    argv : list of str or None, default=None
        The arguments (None: ``sys.argv[1:]``).
    """
    ap = argparse.ArgumentParser(prog="python -m fedgdp.commands.rundiff", description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="root of the first checkout (holds results/ and tables/)")
    ap.add_argument("after", help="root of the second checkout")
    ap.add_argument("--run", default="paper", help="run name (default: paper)")
    args = ap.parse_args(argv)
    n, diffs = compare_trees(args.before, args.after, args.run)
    if n == 0:
        print(f"no outputs of run {args.run} under {args.before}", file=sys.stderr)
        return 2
    for d in diffs:
        print(d)
    print(f"{n - len(diffs)} of {n} files identical (Parquet data without its timing columns; CSV bytes, "
          f"or CSV cells without timing columns)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
