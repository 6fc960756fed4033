"""Settings of one CNN run: defaults per dataset, validation (numpy only, no torch).

A *run* is one (figure, dataset, m, n, run index): the data are partitioned once
and every method trains on the same partition from the same initial weights
(common random numbers).

Paper settings (docs/methods.md §6, paper section 5.2.2) are the ``mnist`` and ``cifar10``
defaults. The offline ``digits`` defaults are scaled down so that the default
Figures 9 and 10 run in minutes on two CPU cores (see :data:`DEFAULT_GRID`):

- q = 0.5 instead of 0.1, so that a round still draws a few of the 5-40 clients;
- lr 0.3 instead of 0.01 (tiny network, 8x8 inputs; with lr 0.01 the 100 local
  steps barely move it); server lr 1.0, B = 1.0, mu = 2, R = 10, K = 10 as for MNIST;
- grid: Figure 9 with m = 10 clients and n in {30, 60, 100, 140} (1,437 training
  images in all), Figure 10 with m in {5, 10, 20, 40}; 3 runs each (paper: 5 and 4).
"""
from __future__ import annotations

import math

from .calibration import METHODS

__all__ = ["COMMON", "DATASET_DEFAULTS", "DEFAULT_GRID", "PAPER_GRID", "resolve", "data_key"]

#: settings shared by every dataset (docs/methods.md §6 unless noted)
COMMON = {
    "figure": "fig09",          # fig09 (n per client, m fixed) | fig10 (full split over m clients)
    "dataset": "digits",
    "m": 10,
    "n": None,                  # images per client (fig09); None = full training split (fig10)
    "run": 0,
    "base_seed": 2026,
    "methods": list(METHODS),
    "mu": 2.0,
    "q": 0.1,                   # fraction of clients drawn per round
    "rounds": 10,               # base global rounds R
    "local_epochs": 10,         # full-batch local steps per round K
    "lr": 0.01,
    "server_lr": 1.0,
    "clip": 1.0,                # per-sample clipping bound B
    "val_frac": 0.1,            # per client: validation share (held out, unused by training)
    "test_frac": 0.1,           # per client: local test share
    "hybrid_local_share": 0.6,  # not in the paper: share of FedHybrid's compute run as FedAvg rounds
    "newton_cycles": 2,         # FedNewton-Iter: cycles of (R / cycles FedAvg rounds + 1 Newton round)
    "ridge": 1.0,               # not in the paper: lambda of Algorithm 5
    "damping": 1.0,             # not in the paper: alpha of Algorithm 5
}

DATASET_DEFAULTS = {
    "mnist": {"lr": 0.01, "server_lr": 1.0, "clip": 1.0, "local_epochs": 10, "q": 0.1},
    "cifar10": {"lr": 0.005, "server_lr": 0.75, "clip": 0.75, "local_epochs": 30, "q": 0.1},
    "digits": {"lr": 0.3, "server_lr": 1.0, "clip": 1.0, "local_epochs": 10, "q": 0.5},
}

#: the default (offline) grid of Figures 9 and 10
DEFAULT_GRID = {
    "datasets": ["digits"],
    "fig09": {"m": 10, "n": [30, 60, 100, 140], "runs": 3},
    "fig10": {"m": [5, 10, 20, 40], "runs": 3},
}

#: the paper's grid (docs/methods.md §6)
PAPER_GRID = {
    "datasets": ["mnist", "cifar10"],
    "fig09": {"m": 100, "n": {"mnist": [50, 75, 100, 200, 300, 400, 600],
                              "cifar10": [50, 75, 100, 200, 300, 400, 500]}, "runs": 5},
    "fig10": {"m": [100, 200, 300, 500, 800, 1000], "runs": 4},
}

_INT_POS = ("m", "rounds", "local_epochs", "newton_cycles")
_FLOAT_POS = ("lr", "server_lr", "clip", "ridge")


def resolve(overrides: dict | None = None) -> dict:
    """Defaults, then the dataset's defaults, then ``overrides``; validated.

    Raises ValueError naming the bad key and value.
    """
    overrides = dict(overrides or {})
    dataset = overrides.get("dataset", COMMON["dataset"])
    if dataset not in DATASET_DEFAULTS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASET_DEFAULTS)}")
    unknown = set(overrides) - set(COMMON)
    if unknown:
        raise ValueError(f"unknown nn setting(s) {sorted(unknown)}")
    p = {**COMMON, **DATASET_DEFAULTS[dataset], **overrides}
    if isinstance(p["methods"], str):
        p["methods"] = [s.strip() for s in p["methods"].split(",") if s.strip()]
    p["methods"] = list(p["methods"])
    bad = [s for s in p["methods"] if s not in METHODS]
    if bad or not p["methods"]:
        raise ValueError(f"unknown method(s) {bad or p['methods']}; known: {', '.join(METHODS)}")
    if p["figure"] not in ("fig09", "fig10"):
        raise ValueError(f"figure must be fig09 or fig10, got figure={p['figure']!r}")
    for key in _INT_POS:
        p[key] = _as_int(key, p[key])
        if p[key] < 1:
            raise ValueError(f"{key} must be >= 1, got {key}={p[key]}")
    for key in ("run", "base_seed"):
        p[key] = _as_int(key, p[key])
        if p[key] < 0:
            raise ValueError(f"{key} must be >= 0, got {key}={p[key]}")
    if p["n"] in ("full", "None", "none"):
        p["n"] = None
    if p["figure"] == "fig09":
        if p["n"] is None:
            raise ValueError("fig09 needs n (images per client), got n=None")
        p["n"] = _as_int("n", p["n"])
        if p["n"] < 3:
            raise ValueError(f"n must be >= 3, got n={p['n']}")
    elif p["n"] is not None:
        raise ValueError(f"fig10 splits the full training set: n must be full/None, got n={p['n']!r}")
    for key in _FLOAT_POS:
        p[key] = float(p[key])
        if not (p[key] > 0 and math.isfinite(p[key])):
            raise ValueError(f"{key} must be a positive number, got {key}={p[key]}")
    p["mu"] = float(p["mu"])
    if not p["mu"] > 0:
        raise ValueError(f"mu must be positive (or inf), got mu={p['mu']}")
    p["q"] = float(p["q"])
    if not 0 < p["q"] <= 1:
        raise ValueError(f"q must lie in (0, 1], got q={p['q']}")
    p["damping"] = float(p["damping"])
    if not 0 < p["damping"] <= 10:
        raise ValueError(f"damping must lie in (0, 10], got damping={p['damping']}")
    p["hybrid_local_share"] = float(p["hybrid_local_share"])
    if not 0 <= p["hybrid_local_share"] <= 1:
        raise ValueError(f"hybrid_local_share must lie in [0, 1], got {p['hybrid_local_share']}")
    for key in ("val_frac", "test_frac"):
        p[key] = float(p[key])
        if not 0 <= p[key] < 0.5:
            raise ValueError(f"{key} must lie in [0, 0.5), got {key}={p[key]}")
    if "fednewton_iter" in p["methods"] and p["rounds"] % p["newton_cycles"]:
        raise ValueError(f"rounds must be a multiple of newton_cycles, got rounds={p['rounds']}, "
                         f"newton_cycles={p['newton_cycles']}")
    return p


def _as_int(key: str, value) -> int:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be an integer, got {key}={value!r}") from None
    if not f.is_integer():
        raise ValueError(f"{key} must be an integer, got {key}={value!r}")
    return int(f)


def data_key(p: dict) -> dict:
    """The settings that define a run's partition (and initial weights)."""
    return {"dataset": p["dataset"], "m": p["m"], "n": p["n"], "val_frac": p["val_frac"],
            "test_frac": p["test_frac"]}
