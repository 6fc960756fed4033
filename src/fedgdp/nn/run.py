"""One CNN run (every method on one partition) and its Parquet file.

Seeds (`fedgdp.core.seeds`, docs/methods.md §1): the run's
``SeedSequence([base_seed, stable_hash(data_key), run])`` draws the partition and initial
weights (shared by all methods); method ``M`` appends ``stable_hash(M)`` for its client
sampling and noise. On CPU a run is bit-for-bit reproducible. A derived noise seed is known,
so the rows say ``noise_secret = False`` (docs/privacy.md, the seed rule);
``fresh_noise=True`` draws the noise seed alone from fresh entropy.

Partition (paper section 5.2.1): ``fig09`` gives client i the images ``perm[i n : (i+1) n]``
of a permutation of the training split, ``fig10`` cuts it into m near-equal parts; each
client holds out ``val_frac`` and ``test_frac`` of its images. The metric is the accuracy
on the standard test set; validation is not used for any choice.
"""
from __future__ import annotations

import math
import os
import platform
import time
from typing import TYPE_CHECKING

import numpy as np

from ..core.seeds import seed_sequence
from .data import ImageData, load_images
from .settings import NNSettings, check_noise, data_key, label, releases_per_round

if TYPE_CHECKING:
    import pandas

__all__ = ["partition", "run_nn", "write_runs", "read_runs", "COLUMNS", "run_seeds", "piece_settings",
           "noise_seed"]

COLUMNS = [
    "figure", "dataset", "method", "label", "m", "n", "x", "n_client_mean", "n_train_min",
    "n_train_max", "N_train", "run", "base_seed", "mu", "q", "rounds", "base_rounds",
    "local_epochs", "lr", "server_lr", "clip", "ridge", "damping", "test_accuracy", "test_loss",
    "local_test_accuracy", "val_accuracy", "release", "accounting", "noise_secret", "mu_composed", "mu_spent_min",
    "mu_spent_max", "participation_mean",
    "grad_evals", "clipped_frac", "floats_up", "floats_down", "n_params", "device", "threads",
    "elapsed_s",
]


def run_seeds(p: NNSettings, method: str | None = None) -> np.random.SeedSequence:
    """The run's seed sequence, or one method's (see the module docstring).

    Parameters
    ----------
    p : NNSettings
        Resolved run settings (``base_seed``, ``run`` and `fedgdp.nn.settings.data_key`).
    method : str, optional
        A method's name: its own stream; None: the run's (partition and initial weights).
    """
    return seed_sequence(p.base_seed, data_key(p), p.run, stream=method)


def noise_seed(p: NNSettings, method: str, *, fresh: bool = False) -> int:
    """The 64-bit seed of one method's noise generator: derived from the settings, or fresh entropy.

    Parameters
    ----------
    p : NNSettings
        Resolved run settings.
    method : str
        The method's name.
    fresh : bool, default=False
        Draw it from ``numpy.random.SeedSequence()`` (fresh entropy, never recorded).
    """
    ss = np.random.SeedSequence() if fresh else run_seeds(p, method).spawn(2)[1]
    return int(ss.generate_state(1, np.uint64)[0])


def partition(N: int, p: NNSettings, rng: np.random.Generator) -> list[dict]:
    """Index sets ``{"train", "val", "test"}`` into the training split, one per client
    (disjoint; ValueError when the split is too small).

    Parameters
    ----------
    N : int
        Images in the training split.
    p : NNSettings
        Resolved run settings (``m``, ``n``, ``val_frac``, ``test_frac``).
    rng : numpy.random.Generator
        Draws the permutation.
    """
    m = p.m
    perm = rng.permutation(N)
    if p.n is None:
        if m > N:
            raise ValueError(f"m={m} clients exceed the {N} training images")
        parts = np.array_split(perm, m)
    else:
        if m * p.n > N:
            raise ValueError(f"m * n = {m} * {p.n} = {m * p.n} exceeds the {N} training images")
        parts = [perm[i * p.n:(i + 1) * p.n] for i in range(m)]
    out = []
    for idx in parts:
        s = idx.shape[0]
        n_val, n_test = int(round(p.val_frac * s)), int(round(p.test_frac * s))
        n_train = s - n_val - n_test
        if n_train < 1:
            raise ValueError(f"a client of {s} images keeps no training image (val_frac={p.val_frac}, "
                             f"test_frac={p.test_frac})")
        out.append({"train": idx[:n_train], "val": idx[n_train:n_train + n_val],
                    "test": idx[n_train + n_val:]})
    return out


def run_nn(p: NNSettings, *, device: str = "auto", threads: int | None = None, data: ImageData | None = None,
           data_dir: str = "data", return_ledgers: bool = False, progress: bool = False,
           fresh_noise: bool = False):
    """Train every method of ``p`` on one partition; one row per method of ``p.methods`` (keys `COLUMNS`),
    and with ``return_ledgers`` ``(rows, method -> ledger)``.

    Parameters
    ----------
    p : NNSettings
        Resolved settings (`fedgdp.nn.settings.resolve`).
    device : str
        ``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda``, ``cuda:N``.
    threads : int, optional
        torch CPU threads (``torch.set_num_threads``).
    data : ImageData, optional
        Already loaded data (else `fedgdp.nn.data.load_images`).
    data_dir : str
        Where `fedgdp.nn.data.load_images` looks when ``data`` is None.
    return_ledgers : bool
        Also return every method's ledger.
    progress : bool
        Print one line per round of every method on standard error (`fedgdp.nn.train.Progress`).
    fresh_noise : bool, default=False
        Seed every method's noise from fresh entropy (`noise_seed`; ``noise_secret = True``).
    """
    import torch

    from .models import build_model
    from .train import ClientData, evaluate, resolve_device, train

    if threads:
        torch.set_num_threads(int(threads))
    dev = resolve_device(device)
    data = data if data is not None else load_images(p.dataset, data_dir)
    root = run_seeds(p)
    part_ss, init_ss = root.spawn(2)
    parts = partition(data.y_train.shape[0], p, np.random.default_rng(part_ss))
    model = build_model(p.dataset, seed=int(init_ss.generate_state(1, np.uint64)[0]),
                        classes=data.classes, init=p.init).to(dev)
    params0 = {k: v.detach() for k, v in model.named_parameters()}
    # every method's noise against its releases' float grid, before any image is read
    check_noise(p, [c["train"].shape[0] for c in parts], next(iter(params0.values())).dtype)
    n_params = sum(v.numel() for v in params0.values())

    def tensors(idx):
        return (torch.as_tensor(data.x_train[idx], device=dev), torch.as_tensor(data.y_train[idx], device=dev))

    train_sets = [tensors(c["train"]) for c in parts]
    clients = ClientData([t[0] for t in train_sets], [t[1] for t in train_sets])
    pooled = {k: np.concatenate([c[k] for c in parts]) for k in ("val", "test")}
    x_val, y_val = tensors(pooled["val"])
    x_loc, y_loc = tensors(pooled["test"])
    x_test = torch.as_tensor(data.x_test, device=dev)
    y_test = torch.as_tensor(data.y_test, device=dev)
    sizes = np.array([c["train"].shape[0] + c["val"].shape[0] + c["test"].shape[0] for c in parts])

    from .clipping import clipped_grad_sums

    X, Y, M = clients.batch([0])
    clipped_grad_sums(params0, X, Y, M, float(p.clip), shared=True)     # warm-up: the first call's set-up costs
    rows, ledgers = [], {}
    for method in p.methods:
        ss_sample = run_seeds(p, method).spawn(2)[0]
        gen = torch.Generator(device=dev)
        gen.manual_seed(noise_seed(p, method, fresh=fresh_noise))
        t0 = time.perf_counter()
        fit = train(method, params0, clients, p, np.random.default_rng(ss_sample), gen, progress=progress)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        elapsed = time.perf_counter() - t0
        theta, info = fit.params, fit.info
        acc, loss = evaluate(model, theta, x_test, y_test)
        if not math.isfinite(loss) and y_test.shape[0]:
            _warn_diverged(method, p, loss)
        loc_acc, _ = evaluate(model, theta, x_loc, y_loc)
        val_acc, _ = evaluate(model, theta, x_val, y_val)
        ledgers[method] = fit.ledger
        rows.append({
            "figure": p.figure, "dataset": p.dataset, "method": method,
            "label": label(method, p.mu, p.release),
            "m": p.m, "n": p.n, "x": p.n if p.figure == "fig09" else p.m,
            "n_client_mean": float(sizes.mean()), "n_train_min": int(clients.n.min()),
            "n_train_max": int(clients.n.max()), "N_train": int(clients.n.sum()), "run": p.run,
            "base_seed": p.base_seed, "mu": p.mu, "q": p.q, "rounds": info.rounds,
            "base_rounds": p.rounds, "local_epochs": p.local_epochs, "lr": p.lr,
            "server_lr": p.server_lr, "clip": p.clip, "ridge": p.ridge, "damping": p.damping,
            "test_accuracy": acc, "test_loss": loss, "local_test_accuracy": loc_acc, "val_accuracy": val_acc,
            "release": p.release, "accounting": p.accounting, "noise_secret": bool(fresh_noise),
            "mu_composed": float(fit.ledger.composed_mu().max()),
            **_spent(fit.ledger, fit.counts, p),
            "participation_mean": float(np.mean(_rounds_drawn(fit.counts, p))),
            "grad_evals": int(info.grad_evals),
            "clipped_frac": float(info.clipped / info.grad_evals) if info.grad_evals else 0.0,
            "floats_up": int(info.floats_up), "floats_down": int(info.floats_down), "n_params": int(n_params),
            "device": str(dev), "threads": int(torch.get_num_threads()), "elapsed_s": float(elapsed),
        })
    return (rows, ledgers) if return_ledgers else rows


def _warn_diverged(method: str, p: NNSettings, loss: float) -> None:
    """One line on standard error: a network that is not private (a private one with a
    parameter that is not finite is an error, `fedgdp.methods.check_finite_release`) ended
    with a test loss that is not finite. Its row is written as measured (``test_loss``)."""
    import sys

    print(f"fedgdp nn-run: {method} diverged: its test loss is {loss} (release {p.release}, lr {p.lr:g}, "
          f"reduction {p.reduction}); its row records it, lower lr for a finite run",
          file=sys.stderr, flush=True)


def _spent(ledger, counts: dict, p: NNSettings) -> dict:
    """``mu_spent_min`` and ``mu_spent_max``: the smallest and largest mu spent by the
    clients drawn at least once (``Ledger.spent_mu`` of the releases they made; NaN when
    none was drawn). Under ``accounting: schedule`` both are mu; under ``printed`` the
    largest is at most mu."""
    spent = np.asarray(ledger.spent_mu(counts), float).reshape(-1)
    drawn = _rounds_drawn(counts, p).reshape(-1) > 0 if counts else np.zeros(spent.shape, bool)
    if not drawn.any():
        return {"mu_spent_min": float("nan"), "mu_spent_max": float("nan")}
    return {"mu_spent_min": float(spent[drawn].min()), "mu_spent_max": float(spent[drawn].max())}


def _rounds_drawn(counts: dict, p: NNSettings) -> np.ndarray:
    """Rounds in which each client was drawn, shape (m,): a FedAvg round makes
    ``local_epochs`` local-step releases (one under ``clip_unit: update``), a FedSGD or
    Newton round one (`fedgdp.nn.settings.releases_per_round`)."""
    return sum(c // releases_per_round(p, stage) for stage, c in counts.items())


# --------------------------------------------------------------------------- I/O
def _schema():
    import pyarrow as pa

    types = {"figure": pa.string(), "dataset": pa.string(), "method": pa.string(), "label": pa.string(),
             "device": pa.string(), "release": pa.string(), "accounting": pa.string(), "noise_secret": pa.bool_()}
    ints = {"m", "n", "x", "n_train_min", "n_train_max", "N_train", "run", "base_seed", "rounds",
            "base_rounds", "local_epochs", "grad_evals", "floats_up", "floats_down", "n_params", "threads"}
    return pa.schema([(c, types.get(c, pa.int64() if c in ints else pa.float64())) for c in COLUMNS])


def write_runs(rows: list[dict], p: NNSettings, out: str | os.PathLike, *, extra_meta: dict | None = None) -> None:
    """Write a run's rows atomically with provenance metadata (versions, commit, settings, ``extra_meta``).

    Parameters
    ----------
    rows : list of dict
        The rows of `run_nn` (keys `COLUMNS`).
    p : NNSettings
        The run's resolved settings.
    out : str or path
        The Parquet file to write.
    extra_meta : dict, optional
        More metadata (values written as strings).
    """
    import pyarrow as pa

    from ..common.io import write_parquet

    table = pa.Table.from_pylist(rows, schema=_schema())
    meta = {"python": platform.python_version(), "machine": platform.machine()}
    try:
        import torch

        meta["torch_version"] = torch.__version__
    except ImportError:  # pragma: no cover
        pass
    meta.update(extra_meta or {})
    table = table.replace_schema_metadata({k: str(v) for k, v in meta.items()})
    write_parquet(table, out, p.as_dict())


def read_runs(paths) -> pandas.DataFrame:
    """Concatenate run files; ValueError naming a file that is corrupt or lacks columns.

    Parameters
    ----------
    paths : str, path or sequence of them
        Run files written by `write_runs`.
    """
    from ..common.io import read_parquet_files

    df = read_parquet_files(paths, [c for c in COLUMNS if c not in _ADDED], "run")
    for col, value in _ADDED.items():
        df[col] = df[col].astype(object).where(df[col].notna(), value) if col in df else value
        df[col] = df[col].astype(type(value))
    return df


#: columns added to the run files since the first committed ones, with the value an older file means
_ADDED = {"noise_secret": False}


def piece_settings(path: str | os.PathLike) -> tuple[dict, str]:
    """The resolved settings (strict JSON: mu = inf reads as ``"inf"``) and git commit (or ``"unknown"``) a run
    file was written with (ValueError for a file that is not a run file).

    Parameters
    ----------
    path : str or path
        A run file of `write_runs`.
    """
    import json

    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable Parquet run file ({exc})") from None
    if b"params" not in meta:
        raise ValueError(f"{path}: no recorded settings (metadata key 'params'): not a run file of write_runs")
    return json.loads(meta[b"params"]), meta.get(b"git_commit", b"unknown").decode()
