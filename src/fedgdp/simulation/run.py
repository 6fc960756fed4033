"""Run one cell (all its methods, a block of replicates) and write its Parquet file.

One row per (replicate, method), columns `COLUMNS`: ``mu`` is the nominal level,
``mu_composed`` the ledger's composition of it, ``mu_certified`` that mu when every
release's sensitivity holds for all inputs and the clip is public or privately
released (inf otherwise). The metadata holds the version, the git commit and the
resolved parameters (`fedgdp.common.io.write_parquet`: written to a temporary name, renamed).
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..common.io import read_parquet_files, write_parquet
from ..core.glm import get_model
from ..core.privacy import adds_noise, clip_bound, clips
from ..core.seeds import CLIP_STREAM
from ..methods.settings import MethodSettings
from .backend import FitData, get_method
from .data import noise_rng, parse_sizes, replicate_rng, simulate_replicate
from .params import CellSettings, data_key

__all__ = ["run_cell", "simulate_block", "write_cell", "read_cell", "COLUMNS", "BLOCK_ROWS"]

#: Rows of a block of replicates fitted together (about 56 MB of data; at least one replicate).
#: Larger blocks share the Python work of a fit among more replicates; the numbers of a
#: replicate do not depend on its block (`fedgdp.simulation.kernels`).
BLOCK_ROWS = 250_000

COLUMNS = ["study", "model", "method", "m", "sizes", "mu", "K", "replicate", "N", "n_min", "n_max",
           "B", "sq_error", "theta_hat", "rounds", "floats_up", "floats_down", "mu_composed",
           "diverged", "elapsed_s", "mu_certified", "privacy_mode"]


def simulate_block(p: CellSettings, replicates: list[int]):
    """Data of the given replicates (one `Replicate` per index), each from its own generator.

    Parameters
    ----------
    p, replicates
        Resolved cell parameters (``sizes``, ``n_floor``, ``model``, ``m``, ``beta_true``,
        ``sigma_c``, ``base_seed``) and the replicates' indices.
    """
    scheme = parse_sizes(p.sizes, p.n_floor)
    key = data_key(p)
    beta = np.asarray(p.beta_true)
    return [simulate_replicate(replicate_rng(p.base_seed, key, r), model=p.model, scheme=scheme,
                               m=p.m, beta_true=beta, sigma_c=p.sigma_c) for r in replicates]


def draw_noises(p: CellSettings, method: str, replicates: list[int], d: int) -> list[dict]:
    """Per replicate, name -> standard normals of `fedgdp.methods.Method.noise_shapes` for one
    method (None values if mu = inf or the release is not ``private``).

    Parameters
    ----------
    p : CellSettings
        Resolved cell parameters (``mu``, ``release``, ``m``, ``base_seed``, ``method_settings``).
    method, replicates, d
        The method's name, the replicates' indices, the parameter dimension.
    """
    meth = get_method(method)
    s = meth.settings(p.method_settings[method])
    key = data_key(p)
    noisy = adds_noise(p.mu, p.release)
    return [meth.draw_noise(noise_rng(p.base_seed, key, r, meth.noise_stream), s, p.m, d,
                            noisy) for r in replicates]


def clip_bounds(p: CellSettings, glm, reps: list, replicates: list[int], bound=clip_bound) -> np.ndarray:
    """The clipping bound of each replicate (R,), inf when mu = inf or the release is ``plain``
    (``clip_only`` gets ``private``'s); ``private_quantile``'s histogram noise comes from
    `fedgdp.simulation.data.noise_rng` with the name `CLIP_STREAM`.

    Parameters
    ----------
    p, glm
        Resolved cell parameters (``mu``, ``release``, ``clip``, ``base_seed``) and the model.
    reps : list of Replicate
        The block's replicates.
    replicates : list of int
        Their indices (the noise generators' ``r``).
    bound : callable
        ``bound(glm, rep, clip, mu=, rng=)`` (`fedgdp.core.privacy.clip_bound`, or the oracle's).
    """
    if not clips(p.mu, p.release):
        return np.full(len(reps), np.inf)
    key = data_key(p)
    return np.array([bound(glm, rep, p.clip, mu=p.mu, rng=noise_rng(p.base_seed, key, r, CLIP_STREAM))
                     for rep, r in zip(reps, replicates)])


def _stack(noises: list[dict]) -> dict:
    return {k: (None if noises[0][k] is None else np.stack([z[k] for z in noises])) for k in noises[0]}


def block_size(p: CellSettings, rows_per_block: int) -> int:
    """Replicates per block (at least 1) so that a block holds about ``rows_per_block`` rows.

    Parameters
    ----------
    p, rows_per_block
        Resolved cell parameters (``sizes``, ``n_floor``, ``m``) and the target rows of a block.
    """
    mean_n = parse_sizes(p.sizes, p.n_floor).mean_size(p.m)
    return max(1, int(rows_per_block // max(1.0, p.m * mean_n)))


def memory_estimate(p: CellSettings, n_replicates: int, rows_per_block: int = BLOCK_ROWS) -> float:
    """Bytes the largest block of a cell needs, an upper-side estimate used to refuse a cell
    that cannot fit: about ``8 (4 d + 8)`` bytes a row plus each method's pre-drawn noise.

    Parameters
    ----------
    p : CellSettings
        Resolved cell parameters (``sizes``, ``n_floor``, ``m``, ``beta_true``, ``method_settings``).
    n_replicates, rows_per_block
        Replicates of the cell; rows per block, as in `run_cell`.
    """
    scheme = parse_sizes(p.sizes, p.n_floor)
    per_block = min(max(1, n_replicates), block_size(p, rows_per_block))
    d = len(p.beta_true)
    rows = per_block * p.m * scheme.mean_size(p.m)
    meths = [get_method(name) for name in p.method_settings]
    noise = sum(int(np.prod(shape)) for meth, s in zip(meths, p.method_settings.values())
                for shape in meth.noise_shapes(meth.settings(s), p.m, d).values())
    return rows * 8 * (4 * d + 8) + per_block * noise * 8


def fast_fit(name: str, fd: FitData, s: MethodSettings, noises: list[dict]):
    """The method's own vectorised fit of a block: ``(theta (R, d), ledger)``.

    Parameters
    ----------
    name : str
        The method's name.
    fd : FitData
        The block.
    s : MethodSettings
        The method's frozen settings (`fedgdp.methods.Method.settings`).
    noises : list of dict
        One noise dict per replicate (stacked here).
    """
    fit = get_method(name).fit(fd, s, _stack(noises))
    return fit.theta, fit.ledger


def run_cell(p: CellSettings, replicates: list[int], *, fit=fast_fit, bound=clip_bound,
             rows_per_block: int = BLOCK_ROWS, return_ledgers: bool = False):
    """Fit every method of the cell on every replicate: one row per (replicate, method), keys `COLUMNS`; with
    ``return_ledgers`` also method -> list of (replicate, Ledger of its block, index in block).

    Parameters
    ----------
    p : CellSettings
        Resolved parameters (`fedgdp.simulation.params.resolve`).
    replicates : list of int
        The replicates' indices.
    fit : callable
        ``fit(name, fd, settings, noises) -> (theta (R, d), ledger or None)`` for a block;
        default `fast_fit` (the tests pass the loop oracle of ``tests/oracle.py``; no ledger
        leaves the composed mu columns NaN).
    bound : callable
        The clipping-bound rule of one replicate (see `clip_bounds`).
    rows_per_block : int
        Replicates are fitted in blocks of about this many rows (at least one replicate).
    return_ledgers : bool
        Also return every method's ledgers.
    """
    glm = get_model(p.model)
    beta = np.asarray(p.beta_true)
    per_block = block_size(p, rows_per_block)
    rows: list = []
    ledgers: dict[str, list] = {m: [] for m in p.methods}
    for start in range(0, len(replicates), per_block):
        block = replicates[start:start + per_block]
        reps = simulate_block(p, block)
        d = reps[0].X.shape[1]
        B = clip_bounds(p, glm, reps, block, bound)
        fd = FitData(reps, glm, B, p.mu, p.tau1, p.weights, privacy=p.privacy, clip=p.clip, release=p.release)
        for name in p.methods:
            meth = get_method(name)
            s = meth.settings(p.method_settings[name])
            noises = draw_noises(p, name, block, d)
            t0 = time.perf_counter()
            with np.errstate(all="ignore"):
                theta, ledger = fit(name, fd, s, noises)
            if ledger is not None:
                mu_comp = ledger.composed_mu().max(axis=1)
                mu_cert = ledger.certified_mu().max(axis=1)
                ledgers[name].extend((r, ledger, j) for j, r in enumerate(block))
            else:
                mu_comp = mu_cert = np.full(len(block), np.nan)
            elapsed = (time.perf_counter() - t0) / len(block)
            comm = meth.comm(s, p.m, d)
            for j, r in enumerate(block):
                row = _row(p, name, r, reps[j], B[j], theta[j], beta, comm, mu_comp[j], elapsed,
                           _diverged(theta[j], beta, p.diverge_factor))
                row.update(mu_certified=float(mu_cert[j]), privacy_mode=p.privacy["mode"])
                rows.append(row)
    order = {name: i for i, name in enumerate(p.methods)}
    rows.sort(key=lambda row: (row["replicate"], order[row["method"]]))
    return (rows, ledgers) if return_ledgers else rows


def _diverged(theta: np.ndarray, beta: np.ndarray, factor: float) -> bool:
    """Not finite, or farther than ``factor * max(1, ||beta_true||)`` from the truth."""
    if not np.all(np.isfinite(theta)):
        return True
    return float(np.linalg.norm(theta - beta)) > factor * max(1.0, float(np.linalg.norm(beta)))


def _row(p, method, r, rep, B, theta, beta, comm, mu_comp, elapsed, diverged) -> dict:
    finite = bool(np.all(np.isfinite(theta)))
    sq = float(np.sum((theta - beta) ** 2)) if finite else float("inf")
    return {
        "study": p.study, "model": p.model, "method": method, "m": p.m, "sizes": p.sizes,
        "mu": p.mu, "K": p.K, "replicate": r, "N": int(rep.sizes.sum()),
        "n_min": int(rep.sizes.min()), "n_max": int(rep.sizes.max()), "B": float(B),
        "sq_error": sq, "theta_hat": [float(t) for t in theta], "rounds": comm["rounds"],
        "floats_up": comm["floats_up"], "floats_down": comm["floats_down"],
        "mu_composed": float(mu_comp), "diverged": bool(diverged), "elapsed_s": float(elapsed),
    }


# --------------------------------------------------------------------------- I/O
def _schema():
    import pyarrow as pa

    return pa.schema([
        ("study", pa.string()), ("model", pa.string()), ("method", pa.string()), ("m", pa.int64()),
        ("sizes", pa.string()), ("mu", pa.float64()), ("K", pa.int64()), ("replicate", pa.int64()),
        ("N", pa.int64()), ("n_min", pa.int64()), ("n_max", pa.int64()), ("B", pa.float64()),
        ("sq_error", pa.float64()), ("theta_hat", pa.list_(pa.float64())), ("rounds", pa.int64()),
        ("floats_up", pa.int64()), ("floats_down", pa.int64()), ("mu_composed", pa.float64()),
        ("diverged", pa.bool_()), ("elapsed_s", pa.float64()), ("mu_certified", pa.float64()),
        ("privacy_mode", pa.string()),
    ])


def write_cell(rows: list[dict], p: CellSettings | list[CellSettings], out: str | os.PathLike) -> None:
    """Write a cell's rows with `fedgdp.common.io.write_parquet` (several cells: rows in turn, ``p`` a list).

    Parameters
    ----------
    rows, out
        The rows (keys `COLUMNS`) and the file.
    p : CellSettings or list of CellSettings
        Resolved parameters (stored in the metadata as JSON, their ``as_dict()``).
    """
    params = [c.as_dict() for c in p] if isinstance(p, list) else p.as_dict()
    write_parquet(rows_to_table(rows, _schema()), out, params)


def rows_to_table(rows: list[dict], schema):
    """A pyarrow Table of ``rows`` built from buffers, without pandas (pyarrow's converters
    import it, a third of a simulate job's start-up); other types go through ``pa.array``.

    Parameters
    ----------
    rows : list of dict
        The rows.
    schema : pyarrow.Schema
        The columns and their types.
    """
    import pyarrow as pa

    return pa.Table.from_arrays([_column([row[f.name] for row in rows], f.type) for f in schema],
                                schema=schema)


def _column(values: list, typ):
    import pyarrow as pa

    n = len(values)
    if any(v is None for v in values):
        return pa.array(values, type=typ)
    numeric = {pa.float64(): np.float64, pa.int64(): np.int64}
    if typ in numeric:
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.asarray(values, dtype=numeric[typ]))])
    if typ == pa.bool_():
        bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(bits)])
    if typ == pa.string():
        data = [v.encode() for v in values]
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(_offsets(map(len, data))),
                                                  pa.py_buffer(b"".join(data))])
    if typ == pa.list_(pa.float64()):
        child = np.asarray([x for v in values for x in v], dtype=np.float64)
        child = pa.Array.from_buffers(pa.float64(), child.shape[0], [None, pa.py_buffer(child)])
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(_offsets(map(len, values)))], children=[child])
    return pa.array(values, type=typ)


def _offsets(lengths) -> np.ndarray:
    """Arrow offsets (int32) of consecutive items of the given lengths."""
    return np.concatenate([[0], np.cumsum(np.fromiter(lengths, dtype=np.int64))]).astype(np.int32)


def read_cell(path: str | os.PathLike):
    """A cell file as a DataFrame (columns `COLUMNS`); ValueError naming a corrupt file.

    Parameters
    ----------
    path : str or path-like
        The cell file.
    """
    return read_parquet_files(path, COLUMNS, "cell")
