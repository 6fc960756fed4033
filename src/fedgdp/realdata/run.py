"""One client split of the real-data study: every method on every fold, its rows and their file."""
from __future__ import annotations

import math
import os
import time

import numpy as np

from .. import privacy
from ..datasets import Dataset, layout_key, split_layout
from ..glm import matrix_model
from ..seeds import CLIP_STREAM, derived_rng
from .clipping import clip_bound_real
from .folds import FoldData
from .metrics import client_metric
from .parameters import METRICS, get_method

__all__ = ["COLUMNS", "CLIP_STREAM", "noise_rng", "run_split", "write_rows", "read_rows"]


# One row per (method, mu, client) of one split:
#   task, dataset, method (registry name), label (figure name), private (bool),
#   mu (float; inf for the non-private baselines), split, client, n_client (the client's
#   images, all folds), metric ("auc" or "accuracy"), value (mean over the folds where it
#   is defined), value_folds (list, one per fold; NaN where a binary test fold has one
#   class), m, n_min, folds, base_seed, B (clipping bound, mean over folds; inf when
#   non-private), tau1, mu_composed (largest composed mu of the client's ledger over
#   folds; inf when non-private), rounds, floats_up, floats_down (communication of one
#   fit), elapsed_s (the method's fit time summed over the folds; a method fitting all mu
#   in one pass, :meth:`fedgdp.methods.Method.fit_many`, shares its time equally), mu_certified (as
#   mu_composed when every release is certified and the clipping bound is public or
#   private, inf otherwise: mu and mu_composed are nominal), privacy_mode.
COLUMNS = ["task", "dataset", "method", "label", "private", "mu", "split", "client", "n_client",
           "metric", "value", "value_folds", "m", "n_min", "folds", "base_seed", "B", "tau1",
           "mu_composed", "rounds", "floats_up", "floats_down", "elapsed_s", "mu_certified", "privacy_mode"]


def noise_rng(p: dict, key: dict, split: int, fold: int, method: str) -> np.random.Generator:
    """The noise generator of one method in one split and fold (module docstring).

    Parameters
    ----------
    p : dict
        Resolved real-data parameters (``base_seed``, ``task``).
    key : dict
        The split layout's key (:func:`fedgdp.datasets.layout_key`).
    split : int
        The split.
    fold : int
        The fold.
    method : str
        The stream: a method's ``noise_stream``, or :data:`CLIP_STREAM` for the clipping bound.

    Returns
    -------
    numpy.random.Generator
        The generator.
    """
    return derived_rng(p["base_seed"], {**key, "task": p["task"]}, split, fold, stream=method)


def run_split(p: dict, data: Dataset, split: int, *, progress=None) -> list[dict]:
    """Every configured method (private ones at every mu) on every fold of one split.

    Returns one row per (method, mu, client), keys :data:`COLUMNS`.

    Parameters
    ----------
    p : dict
        Resolved real-data parameters (:func:`fedgdp.realdata.parameters.resolve`).
    data : fedgdp.datasets.Dataset
        The data set (rows ``X`` (N, d) and the task's labels).
    split : int
        The client split (seeds its layout and noise).
    progress : callable, optional
        Called with a line of text after every method and fold.

    Returns
    -------
    list of dict
        The rows.
    """
    key = layout_key(p["dataset"], data.N, p["m"], p["n_min"], p["alpha"], p["folds"])
    layout = split_layout(p["base_seed"], key, split)
    model = matrix_model(p["task"])
    labels = data.targets(p["task"])
    Yall = model.targets(labels)
    runs = [(name, mu) for name in p["methods"]
            for mu in (p["mu"] if get_method(name).private else [math.inf])]
    values = {run: np.full((layout.m, p["folds"]), np.nan) for run in runs}
    mu_comp = {run: np.zeros(layout.m) for run in runs}
    mu_cert = {run: np.zeros(layout.m) for run in runs}
    bounds: dict = {}
    elapsed, comm = {run: 0.0 for run in runs}, {}
    for f in range(p["folds"]):
        parts = [layout.train_test(i, f) for i in range(layout.m)]
        Xtr = [data.X[tr] for tr, _ in parts]
        Ytr = [Yall[tr] for tr, _ in parts]
        fold_bounds = {}     # per mu: the private rule's bound depends on mu
        for mu in dict.fromkeys(mu for _, mu in runs):
            fold_bounds[mu] = clip_bound_real(model, Xtr, Ytr, p["clip"], mu=mu,
                                              rng=noise_rng(p, key, split, f, CLIP_STREAM))
            bounds.setdefault(mu, []).append(fold_bounds[mu])
        fits: dict = {}
        for name in p["methods"]:     # all mu of a method in one call (fit_many)
            meth = get_method(name)
            mus = [mu for n, mu in runs if n == name]
            fds = [FoldData(model, Xtr, Ytr, mu=mu, B=fold_bounds[mu], tau1=p["tau1"], newton=p["newton"],
                            privacy=p["privacy"], clip=p["clip"]) for mu in mus]
            rngs = [noise_rng(p, key, split, f, meth.noise_stream) if fd.private else None for fd in fds]
            t0 = time.perf_counter()
            with np.errstate(over="ignore", under="ignore"):
                fits.update(zip([(name, mu) for mu in mus], meth.fit_many(fds, p["method_settings"][name], rngs)))
            for mu in mus:
                elapsed[(name, mu)] += (time.perf_counter() - t0) / len(mus)
        for name, mu in runs:
            fit = fits[(name, mu)]
            comm[(name, mu)] = (fit.rounds, fit.floats_up, fit.floats_down)
            if fit.ledger.releases:
                mu_comp[(name, mu)] = np.maximum(mu_comp[(name, mu)], fit.ledger.composed_mu()[0])
                mu_cert[(name, mu)] = np.maximum(mu_cert[(name, mu)], fit.ledger.certified_mu()[0])
            else:
                mu_comp[(name, mu)][:] = math.inf
                mu_cert[(name, mu)][:] = math.inf
            for i, (_, te) in enumerate(parts):
                values[(name, mu)][i, f] = client_metric(p["task"], model, fit.client_theta(i),
                                                         data.X[te], labels[te])
            if progress:
                progress(f"split {split} fold {f} {name} mu={mu:g}: "
                         f"median {np.nanmedian(values[(name, mu)][:, f]):.3f}")
    rows = []
    for name, mu in runs:
        meth = get_method(name)
        v = values[(name, mu)]
        rounds, up, down = comm[(name, mu)]
        for i in range(layout.m):
            folds_i = v[i]
            rows.append({
                "task": p["task"], "dataset": p["dataset"], "method": name, "label": meth.label,
                "private": bool(meth.private), "mu": float(mu), "split": int(split), "client": i,
                "n_client": int(layout.sizes[i]), "metric": METRICS[p["task"]],
                "value": float(np.nanmean(folds_i)) if np.any(np.isfinite(folds_i)) else float("nan"),
                "value_folds": [float(x) for x in folds_i], "m": int(p["m"]), "n_min": int(p["n_min"]),
                "folds": int(p["folds"]), "base_seed": int(p["base_seed"]),
                "B": float(np.mean(bounds[mu])) if privacy.clips(mu) else float("inf"),
                "tau1": float(p["tau1"]), "mu_composed": float(mu_comp[(name, mu)][i]),
                "rounds": int(rounds), "floats_up": int(up), "floats_down": int(down),
                "elapsed_s": float(elapsed[(name, mu)]),
                "mu_certified": float(mu_cert[(name, mu)][i]), "privacy_mode": p["privacy"]["mode"],
            })
    return rows


def _schema():
    import pyarrow as pa

    return pa.schema([
        ("task", pa.string()), ("dataset", pa.string()), ("method", pa.string()), ("label", pa.string()),
        ("private", pa.bool_()), ("mu", pa.float64()), ("split", pa.int64()), ("client", pa.int64()),
        ("n_client", pa.int64()), ("metric", pa.string()), ("value", pa.float64()),
        ("value_folds", pa.list_(pa.float64())), ("m", pa.int64()), ("n_min", pa.int64()),
        ("folds", pa.int64()), ("base_seed", pa.int64()), ("B", pa.float64()), ("tau1", pa.float64()),
        ("mu_composed", pa.float64()), ("rounds", pa.int64()), ("floats_up", pa.int64()),
        ("floats_down", pa.int64()), ("elapsed_s", pa.float64()), ("mu_certified", pa.float64()),
        ("privacy_mode", pa.string()),
    ])


def write_rows(rows: list[dict], p: dict, out: str | os.PathLike) -> None:
    """Write rows (:data:`COLUMNS`) atomically with provenance metadata
    (:func:`fedgdp.io.write_parquet`).

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`run_split`.
    p : dict
        The resolved parameters (written into the metadata).
    out : str or path
        The Parquet file to write.
    """
    import pyarrow as pa

    from ..io import write_parquet

    write_parquet(pa.Table.from_pylist(rows, schema=_schema()), out, p)


def read_rows(paths):
    """Read and concatenate real-data Parquet files into a pandas DataFrame;
    ValueError naming a bad file.

    Parameters
    ----------
    paths : str, path or sequence of them
        Files written by :func:`write_rows`.

    Returns
    -------
    pandas.DataFrame
        Their rows (at least the columns :data:`COLUMNS`).
    """
    from ..io import read_parquet_files

    return read_parquet_files(paths, COLUMNS, "real-data")
