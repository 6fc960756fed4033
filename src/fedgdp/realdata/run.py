"""One client split of the real-data study: every method on every fold, its rows and their file."""
from __future__ import annotations

import math
import os
import time

import numpy as np

from ..common.datasets import Dataset, layout_key, split_layout
from ..core import privacy
from ..core.glm import NonzeroColumns, matrix_model, product_design
from ..core.seeds import CLIP_STREAM, derived_rng
from .clipping import clip_bound_real
from .folds import FoldData
from .metrics import client_metric
from .parameters import METRICS, RealdataSettings, get_method

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
#   in one pass, `fedgdp.methods.Method.fit_many`, shares its time equally), mu_certified (as
#   mu_composed when every release is certified and the clipping bound is public or
#   private, inf otherwise: mu and mu_composed are nominal), privacy_mode.
COLUMNS = ["task", "dataset", "method", "label", "private", "mu", "split", "client", "n_client",
           "metric", "value", "value_folds", "m", "n_min", "folds", "base_seed", "B", "tau1",
           "mu_composed", "rounds", "floats_up", "floats_down", "elapsed_s", "mu_certified", "privacy_mode"]


def noise_rng(p: RealdataSettings, key: dict, split: int, fold: int, method: str) -> np.random.Generator:
    """The noise generator of one method in one split and fold (docs/methods.md §5, Seeds).

    Parameters
    ----------
    p : RealdataSettings
        Resolved real-data parameters (``base_seed``, ``task``).
    key : dict
        The split layout's key (`fedgdp.common.datasets.layout_key`).
    split : int
        The split.
    fold : int
        The fold.
    method : str
        A method's ``noise_stream``, or `CLIP_STREAM` for the clipping bound.
    """
    return derived_rng(p.base_seed, {**key, "task": p.task}, split, fold, stream=method)


def run_split(p: RealdataSettings, data: Dataset, split: int, *, progress=None, workers: int = 1) -> list[dict]:
    """Every configured method (private ones at every mu) on every fold of one split: one row
    per (method, mu, client), keys `COLUMNS`. With ``workers > 1`` the (fold, method) fits are
    shared among forked processes, the rows the same bit for bit (each fit has its own noise stream).

    Parameters
    ----------
    p : RealdataSettings
        Resolved real-data parameters (`fedgdp.realdata.resolve`).
    data : fedgdp.common.datasets.Dataset
        The images.
    split : int
        The client split.
    progress : callable or None
        Called with one line per (fold, method, mu).
    workers : int
        Processes sharing the fits (1: this process).
    """
    split_ = _Split(p, data, split)
    tasks = [(f, name) for f in range(p.folds) for name in p.methods]
    results = _map_tasks(split_, tasks, workers)
    runs = split_.runs
    values = {run: np.full((split_.layout.m, p.folds), np.nan) for run in runs}
    mu_comp = {run: np.zeros(split_.layout.m) for run in runs}
    mu_cert = {run: np.zeros(split_.layout.m) for run in runs}
    bounds: dict = {}
    elapsed, comm = {run: 0.0 for run in runs}, {}
    for (f, name), (fold_bounds, out) in zip(tasks, results):
        if name == p.methods[0]:
            for mu, b in fold_bounds.items():
                bounds.setdefault(mu, []).append(b)
        for mu, (vals, comp, cert, rounds_comm, seconds) in out.items():
            run = (name, mu)
            values[run][:, f] = vals
            mu_comp[run] = np.maximum(mu_comp[run], comp)
            mu_cert[run] = np.maximum(mu_cert[run], cert)
            comm[run] = rounds_comm
            elapsed[run] += seconds
            if progress:
                progress(f"split {split} fold {f} {name} mu={mu:g}: median {np.nanmedian(vals):.3f}")
    rows = []
    for name, mu in runs:
        meth = get_method(name)
        v = values[(name, mu)]
        rounds, up, down = comm[(name, mu)]
        for i in range(split_.layout.m):
            folds_i = v[i]
            rows.append({
                "task": p.task, "dataset": p.dataset, "method": name, "label": meth.label,
                "private": bool(meth.tags.private), "mu": float(mu), "split": int(split), "client": i,
                "n_client": int(split_.layout.sizes[i]), "metric": METRICS[p.task],
                "value": float(np.nanmean(folds_i)) if np.any(np.isfinite(folds_i)) else float("nan"),
                "value_folds": [float(x) for x in folds_i], "m": int(p.m), "n_min": int(p.n_min),
                "folds": int(p.folds), "base_seed": int(p.base_seed),
                "B": float(np.mean(bounds[mu])) if privacy.clips(mu) else float("inf"),
                "tau1": float(p.tau1), "mu_composed": float(mu_comp[(name, mu)][i]),
                "rounds": int(rounds), "floats_up": int(up), "floats_down": int(down),
                "elapsed_s": float(elapsed[(name, mu)]),
                "mu_certified": float(mu_cert[(name, mu)][i]), "privacy_mode": p.privacy["mode"],
            })
    return rows


class _Split:
    """One split's layout and runs, and the fits of one method on one fold (`fit`);
    the training data of the last fold asked for is kept (one fold at a time), or of
    every fold after `prepare` (before forking workers, which then share it)."""

    def __init__(self, p: RealdataSettings, data: Dataset, split: int):
        self.p, self.data, self.split = p, data, split
        self.key = layout_key(p.dataset, data.N, p.m, p.n_min, p.alpha, p.folds)
        self.layout = split_layout(p.base_seed, self.key, split)
        self.model = matrix_model(p.task)
        self.labels = data.targets(p.task)
        self.Yall = self.model.targets(self.labels)
        self.runs = [(name, mu) for name in p.methods
                     for mu in (p.mu if get_method(name).tags.private else [math.inf])]
        self._folds: dict = {}      # fold -> its set-up; one fold at a time unless keep_all
        self.keep_all = False

    def prepare(self, threads: int = 1) -> None:
        """Set every fold up now, ``threads`` at a time (each draws from its own generator).

        Parameters
        ----------
        threads : int
            Threads setting folds up at once.
        """
        from concurrent.futures import ThreadPoolExecutor

        self.keep_all = True
        folds = [f for f in range(self.p.folds) if f not in self._folds]
        with ThreadPoolExecutor(max(1, threads)) as pool:
            self._folds.update(zip(folds, pool.map(self._fold, folds)))

    def _setup(self, f: int) -> tuple:
        """Fold f's set-up (`_fold`), kept until another fold is asked for (or for
        good after `prepare`)."""
        if f not in self._folds:
            if not self.keep_all:
                self._folds.clear()                             # free the last fold first
            self._folds[f] = self._fold(f)
        return self._folds[f]

    def _fold(self, f: int) -> tuple:
        """Fold f's client parts, training data (shared by all its FoldData) and clipping bounds."""
        p, data = self.p, self.data
        parts = [self.layout.train_test(i, f) for i in range(self.layout.m)]
        Xtr = [data.X[tr] for tr, _ in parts]
        Ytr = [self.Yall[tr] for tr, _ in parts]
        shared = {"products": [product_design(x) for x in Xtr], "xnorm": [privacy.row_norms(x) for x in Xtr]}
        fold_bounds = {}     # per mu: the private rule's bound depends on mu
        for mu in dict.fromkeys(mu for _, mu in self.runs):
            fold_bounds[mu] = clip_bound_real(self.model, Xtr, Ytr, p.clip, mu=mu,
                                              rng=noise_rng(p, self.key, self.split, f, CLIP_STREAM))
        # a client multiplied through its nonzero columns keeps only those (not a dense copy besides)
        Xtr = [pr if isinstance(pr, NonzeroColumns) else x for pr, x in zip(shared["products"], Xtr)]
        return (f, parts, Xtr, Ytr, shared, fold_bounds)

    def fit(self, f: int, name: str) -> tuple[dict, dict]:
        """Method ``name`` at all its mu on fold f (one `fedgdp.methods.Method.fit_many` call): the clipping
        bound per mu, and per mu the clients' metrics (m,), composed and certified mu (m,),
        ``(rounds, floats_up, floats_down)`` and the fit's seconds.

        Parameters
        ----------
        f : int
            The fold.
        name : str
            The method.
        """
        p = self.p
        _, parts, Xtr, Ytr, shared, fold_bounds = self._setup(f)
        meth = get_method(name)
        mus = [mu for n, mu in self.runs if n == name]
        fds = [FoldData(self.model, Xtr, Ytr, mu=mu, B=fold_bounds[mu], tau1=p.tau1, newton=p.newton,
                        privacy=p.privacy, clip=p.clip, **shared) for mu in mus]
        rngs = [noise_rng(p, self.key, self.split, f, meth.noise_stream) if fd.private else None for fd in fds]
        t0 = time.perf_counter()
        with np.errstate(over="ignore", under="ignore"):
            fits = meth.fit_many(fds, meth.settings(p.method_settings[name]), rngs)
        seconds = (time.perf_counter() - t0) / len(mus)
        out = {}
        for mu, fit in zip(mus, fits):
            if fit.ledger.releases:
                comp, cert = fit.ledger.composed_mu()[0], fit.ledger.certified_mu()[0]
            else:
                comp = cert = np.full(self.layout.m, math.inf)
            vals = np.array([client_metric(p.task, self.model, fit.client_theta(i), self.data.X[te],
                                           self.labels[te]) for i, (_, te) in enumerate(parts)])
            out[mu] = (vals, comp, cert, (fit.rounds, fit.floats_up, fit.floats_down), seconds)
        return fold_bounds, out


_WORKER: list = []      # the split a forked worker fits (set before the fork)


def _fit_task(task: tuple[int, str]) -> tuple[tuple, float]:
    from threadpoolctl import threadpool_limits

    t0 = time.process_time()
    with threadpool_limits(limits=1):
        out = _WORKER[0].fit(*task)
    return out, time.process_time() - t0


def _map_tasks(split_: _Split, tasks: list, workers: int) -> list:
    """``split_.fit`` on every (fold, method) task, in the order of ``tasks``: here, or in
    ``workers`` forked processes sharing the folds, longest tasks first; which worker fits
    which task changes no number.
    """
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1 or "fork" not in mp.get_all_start_methods():
        return [split_.fit(*t) for t in tasks]
    split_.prepare(threads=workers)
    _WORKER[:] = [split_]
    results: list = [None] * len(tasks)
    cost: dict = {}                                  # method -> CPU seconds of one of its folds
    todo = list(range(len(tasks)))
    try:
        with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=mp.get_context("fork")) as pool:
            running: dict = {}
            while todo or running:
                while todo and len(running) < workers:
                    nxt = max(todo, key=lambda t: (cost.get(tasks[t][1], math.inf), -t))
                    todo.remove(nxt)
                    running[pool.submit(_fit_task, tasks[nxt])] = nxt
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    t = running.pop(fut)
                    results[t], seconds = fut.result()
                    cost.setdefault(tasks[t][1], seconds)
    finally:
        _WORKER.clear()
    return results


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
    """Write rows (`COLUMNS`) with `fedgdp.common.io.write_parquet`.

    Parameters
    ----------
    rows, out
        The rows of `run_split` and the Parquet file.
    p : dict
        The resolved parameters' plain form (``RealdataSettings.as_dict()``, plus the split), written
        into the metadata.
    """
    import pyarrow as pa

    from ..common.io import write_parquet

    write_parquet(pa.Table.from_pylist(rows, schema=_schema()), out, p)


def read_rows(paths):
    """Real-data Parquet files as one DataFrame (at least `COLUMNS`); ValueError naming a bad file.

    Parameters
    ----------
    paths : str, path or sequence of them
        Files written by `write_rows`.
    """
    from ..common.io import read_parquet_files

    return read_parquet_files(paths, COLUMNS, "real-data")
