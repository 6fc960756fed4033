"""Files: the one atomic writer and the Parquet reader and writer every output goes through.

Every file is written under a temporary name and renamed when complete (`atomic_path`);
Parquet files carry provenance metadata (`write_parquet`) and are read back, with an
error naming a damaged file or a missing column, by `read_parquet_files`. Imports no
estimator, so writing a result costs only pyarrow.
"""
from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

from .. import __version__

__all__ = ["atomic_path", "write_text", "git_commit", "write_parquet", "read_parquet_files", "strict_json",
           "dumps_strict"]


def strict_json(value):
    """A new ``value`` that is valid JSON (RFC 8259): inf -> ``"inf"`` (``"-inf"``), NaN ->
    ``null``, numpy scalars and arrays -> Python numbers and lists.

    Parameters
    ----------
    value : object
        A JSON-like value: dicts, lists and tuples are walked.
    """
    import math

    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):   # numpy scalar or array
        return strict_json(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def dumps_strict(value, **kwargs) -> str:
    """``json.dumps`` of `strict_json` ``(value)``; never writes Infinity or NaN.

    Parameters
    ----------
    value : object
        A JSON-like value (`strict_json`).
    **kwargs
        Passed to ``json.dumps``.
    """
    return json.dumps(strict_json(value), allow_nan=False, **kwargs)


@contextmanager
def atomic_path(path):
    """Yield a temporary name beside ``path`` (``.<name>.<pid>.tmp``, its folder made), renamed to ``path`` when
    the block ends without error and removed when it raises.

    Parameters
    ----------
    path : str or path-like
        The file to make.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (`atomic_path`).

    Parameters
    ----------
    path, text
        The file to write and its contents.
    """
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def git_commit() -> str:
    """The commit of the package's checkout ("" outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def write_parquet(table, out: str | os.PathLike, params) -> None:
    """Write a pyarrow Table atomically with provenance metadata (package version, git commit,
    the parameters, the SLURM job id if any), keeping the table's own metadata.

    Parameters
    ----------
    table, out
        The rows and the Parquet file to write.
    params : object
        The resolved parameters, stored as strict JSON (`dumps_strict`) under ``params``.
    """
    import pyarrow.parquet as pq

    meta = {"fedgdp_version": __version__, "git_commit": git_commit(),
            "params": dumps_strict(params, sort_keys=True, default=str)}
    if os.environ.get("SLURM_JOB_ID"):
        meta["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)


def read_parquet_files(paths, columns, what: str, *, only: bool = False):
    """Read and concatenate Parquet files into a DataFrame (index reset); ValueError for a damaged file, a file
    without one of ``columns``, or no file given.

    Parameters
    ----------
    paths : str, path-like or iterable of them
        One file or several, read in order.
    columns : iterable of str
        Columns every file must have.
    what : str
        The kind of file, for messages (e.g. ``"cell"``).
    only : bool, default=False
        Read only ``columns``, in that order; False: every column.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    frames = []
    for path in ([paths] if isinstance(paths, (str, os.PathLike)) else paths):
        try:
            names = pq.read_schema(path).names
            missing = set(columns) - set(names)
            table = None if missing else pq.read_table(path, columns=list(columns) if only else None)
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise ValueError(f"cannot read {what} file {path}: {exc}") from None
        if missing:
            raise ValueError(f"{what} file {path} lacks columns {sorted(missing)}")
        frames.append(table.to_pandas())  # type: ignore[union-attr]
    if not frames:
        raise ValueError(f"no {what} files given")
    return pd.concat(frames, ignore_index=True)
