"""Compare the outputs of two pipeline runs: are their numbers identical?

A refactor that should not change any number is checked by running the pipeline before
and after it and comparing the two output trees file by file:

- Parquet data (``results/<run>/**.parquet``): the Arrow tables must be equal, schema and
  values, exactly (``pyarrow.Table.equals``) once the columns that measure time
  (:data:`VOLATILE`) are dropped. File metadata (package version, git commit) is not data
  and is not compared.
- Tables (``tables/<run>/*.csv``): byte for byte.

Usage::

    python -m fedgdp.rundiff BEFORE AFTER [--run paper]

where BEFORE and AFTER are the roots of two checkouts (each holding ``results/`` and
``tables/``). Exit status 0 when every file of BEFORE has an identical twin in AFTER,
1 otherwise; one line per file that differs or is missing.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

#: Columns that record run time, different on every run by nature.
VOLATILE = frozenset({"elapsed_s"})


@dataclass
class Difference:
    """One file of the first tree without an identical twin in the second."""

    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def _parquet_difference(a: Path, b: Path) -> str | None:
    """Why two Parquet files hold different data (None when they hold the same)."""
    import numpy as np
    import pyarrow.parquet as pq

    ta, tb = pq.read_table(a), pq.read_table(b)
    ta = ta.drop_columns([c for c in ta.column_names if c in VOLATILE])
    tb = tb.drop_columns([c for c in tb.column_names if c in VOLATILE])
    if ta.column_names != tb.column_names:
        return f"columns differ: {ta.column_names} vs {tb.column_names}"
    if ta.num_rows != tb.num_rows:
        return f"{ta.num_rows} rows vs {tb.num_rows}"
    for name in ta.column_names:
        ca, cb = ta.column(name), tb.column(name)
        if not ca.equals(cb):
            try:
                diff = np.nanmax(np.abs(np.asarray(ca.to_pylist(), float) - np.asarray(cb.to_pylist(), float)))
                return f"column {name} differs (max abs difference {diff:.3g})"
            except (TypeError, ValueError):
                return f"column {name} differs"
    if not ta.schema.remove_metadata().equals(tb.schema.remove_metadata()):
        return "column types differ"
    return None


def compare_trees(before: str | Path, after: str | Path, run: str = "paper") -> tuple[int, list[Difference]]:
    """Compare the Parquet data and CSV tables of run ``run`` in two checkouts.

    Returns
    -------
    (files compared, differences) : every file of ``before`` is looked for in ``after``.
    """
    before, after = Path(before), Path(after)
    files = sorted((before / "results" / run).rglob("*.parquet")) + sorted((before / "tables" / run).glob("*.csv"))
    diffs = []
    for a in files:
        rel = a.relative_to(before)
        b = after / rel
        if not b.exists():
            diffs.append(Difference(str(rel), "missing in the second tree"))
            continue
        why = _parquet_difference(a, b) if a.suffix == ".parquet" else (
            None if a.read_bytes() == b.read_bytes() else "bytes differ")
        if why:
            diffs.append(Difference(str(rel), why))
    return len(files), diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedgdp.rundiff", description=__doc__.split("\n\n")[0])
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
    print(f"{n - len(diffs)} of {n} files identical (Parquet data without {', '.join(sorted(VOLATILE))}; CSV bytes)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
