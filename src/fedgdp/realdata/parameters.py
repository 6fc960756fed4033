"""Real-data parameters: defaults, the methods' settings and :func:`resolve` (docs/methods.md §3, §5)."""
from __future__ import annotations

import copy

from ..datasets import DATASETS
from ..methods import REALDATA, registry
from ..methods import get_method as _get_method
from ..params import check_clip, check_privacy

__all__ = ["TASKS", "METRICS", "PRIVATE", "EXTRA_PRIVATE", "NONPRIVATE", "DEFAULTS", "METHOD_DEFAULTS",
           "REGISTRY", "get_method", "resolve"]

TASKS = ("binary", "multiclass")
METRICS = {"binary": "auc", "multiclass": "accuracy"}

PRIVATE = ["fedsgd", "fedavg", "fedhybrid", "fednewton", "dp_scaffold"]
#: also private, not in the default list: FedNewton with certified privacy in every mode
EXTRA_PRIVATE = ["fednewton_certified"]
NONPRIVATE = ["np_scaffold", "np_fedavg", "np_localfit", "np_pooled"]

# Defaults: the digits layout (offline run). config/mnist.yaml holds the paper's.
DEFAULTS: dict = {
    "dataset": "digits",
    "path": None,                 # folder with the MNIST files (dataset: mnist)
    "task": "binary",
    "m": 10,                      # digits: 10 clients ...
    "n_min": 150,                 # ... of at least 150 images (1,500 of 1,797), the rest Dirichlet(1)
    "alpha": 1.0,
    "folds": 5,
    "mu": [6.0, 2.0],
    "base_seed": 2026,
    "clip": {"rule": "quantile", "q": 0.9},
    "privacy": {"mode": "paper", "hessian_clip": 4.0},   # fedgdp.params.check_privacy
    "tau1": 0.5,
    "weights": "size",
    "newton": {"solver": "cg", "cg_tol": 1.0e-8, "cg_maxiter": 500},
    "methods": PRIVATE + NONPRIVATE,
    "method_settings": {},
}

# the settings of docs/methods.md §3. DP-SCAFFOLD runs FedAvg's schedule (so it has FedAvg's noise, docs/methods.md §5)
# plus a server step size eta_g; the NP- versions inherit their private counterpart's.
METHOD_DEFAULTS: dict = {
    "fedsgd": {"K": 50, "eta": 0.5},
    "fedavg": {"R": 2, "K": 50, "eta": 0.5},
    "fedhybrid": {"K1": 30, "eta1": 0.5, "K2": 20, "eta2": 0.5},
    "fednewton": {"K": 50, "eta": 0.5},
    "fednewton_certified": {},     # inherits fednewton's
    "dp_scaffold": {"eta_g": 1.0},  # inherits fedavg's R, K, eta
    "np_scaffold": {},             # inherits dp_scaffold's
    "np_fedavg": {},               # inherits fedavg's
    # ridge: the MLE need not exist on images; maxiter: Newton iterations; gtol: ||gradient||_F
    "np_localfit": {"ridge": 1.0e-3, "maxiter": 200, "gtol": 1.0e-8},
    "np_pooled": {"ridge": 1.0e-3, "maxiter": 200, "gtol": 1.0e-8},
}
_INHERIT = {"fednewton_certified": "fednewton", "dp_scaffold": "fedavg", "np_scaffold": "dp_scaffold", "np_fedavg": "fedavg"}



#: The methods of the real-data study (a view of :data:`fedgdp.methods.REGISTRY`).
REGISTRY = registry(REALDATA)


def get_method(name: str):
    """Look up a real-data method; ValueError naming the bad value otherwise."""
    return _get_method(name, REALDATA)


# --------------------------------------------------------------- parameters
def _check_int(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {name}={value!r}")


def _parse_mu_list(value) -> list[float]:
    from ..params import parse_mu

    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    elif not isinstance(value, (list, tuple)):
        value = [value]
    if not value:
        raise ValueError("mu must list at least one value")
    return [parse_mu(v) for v in value]


def resolve(overrides: dict | None = None) -> dict:
    """Fully resolved real-data parameters (a new dict); ValueError naming a bad value."""
    p = copy.deepcopy(DEFAULTS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise ValueError(f"unknown realdata parameter {key!r}; known: {', '.join(sorted(DEFAULTS))}")
        if key == "newton" and isinstance(value, dict):
            p[key].update(value)
        else:
            p[key] = copy.deepcopy(value)
    if p["dataset"] not in DATASETS:
        raise ValueError(f"unknown dataset {p['dataset']!r}; choose from {', '.join(DATASETS)}")
    if p["task"] not in TASKS:
        raise ValueError(f"unknown task {p['task']!r}; choose from {', '.join(TASKS)}")
    for key, low in (("m", 1), ("n_min", 0), ("folds", 2), ("base_seed", 0)):
        _check_int(key, p[key], low)
    if not float(p["alpha"]) > 0:
        raise ValueError(f"alpha must be > 0, got alpha={p['alpha']!r}")
    p["alpha"] = float(p["alpha"])
    p["mu"] = _parse_mu_list(p["mu"])
    if not float(p["tau1"]) > 0:
        raise ValueError(f"tau1 must be > 0, got tau1={p['tau1']!r}")
    p["tau1"] = float(p["tau1"])
    if p["weights"] != "size":
        raise ValueError(f"weights must be 'size' for the real-data study, got {p['weights']!r}")
    p["clip"] = check_clip(p["clip"])
    p["privacy"] = check_privacy(p["privacy"], p["clip"])
    nw = p["newton"]
    if nw.get("solver") not in ("cg", "floor", "ridge"):
        raise ValueError(f"newton solver must be cg, floor or ridge, got {nw.get('solver')!r}")
    _check_int("newton.cg_maxiter", nw["cg_maxiter"])
    if not float(nw["cg_tol"]) > 0:
        raise ValueError(f"newton.cg_tol must be > 0, got {nw['cg_tol']!r}")
    if isinstance(p["methods"], str):
        p["methods"] = [s.strip() for s in p["methods"].split(",") if s.strip()]
    if p["methods"] in (["all"], "all"):
        p["methods"] = list(REGISTRY)
    if not p["methods"]:
        raise ValueError("methods must name at least one method")
    for name in p["methods"]:
        get_method(name)
    user = p["method_settings"] or {}
    for name in user:
        get_method(name)
    settings = {}
    for name in REGISTRY:
        s = dict(METHOD_DEFAULTS.get(name, {}))
        if name in _INHERIT:
            s = {**settings[_INHERIT[name]], **s}
        s.update(user.get(name) or {})
        unknown = set(s) - set(settings.get(_INHERIT.get(name), {})) - set(METHOD_DEFAULTS.get(name, {}))
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)} for method {name}")
        for key, value in s.items():
            if key in ("K", "R", "K1", "K2", "maxiter"):
                _check_int(f"{name}.{key}", value, low=0 if key == "K2" else 1)
            elif not float(value) > 0:
                raise ValueError(f"{name}.{key} must be > 0, got {value!r}")
        settings[name] = s
    p["method_settings"] = {name: settings[name] for name in p["methods"]}
    if p["dataset"] == "mnist" and not p["path"]:
        raise ValueError("dataset 'mnist' needs path: the folder holding the MNIST IDX files or mnist.npz")
    return p
