"""Real-data parameters: defaults, the methods' settings and :func:`resolve` (docs/methods.md §3, §5)."""
from __future__ import annotations

from ..methods import REALDATA, registry
from ..methods import get_method as _get_method
from ..realdata_settings import NONPRIVATE, PRIVATE, TASKS, RealdataSettings

__all__ = ["TASKS", "METRICS", "PRIVATE", "EXTRA_PRIVATE", "NONPRIVATE", "DEFAULTS", "METHOD_DEFAULTS",
           "REGISTRY", "get_method", "resolve"]

METRICS = {"binary": "auc", "multiclass": "accuracy"}

#: also private, not in the default list: FedNewton with certified privacy in every mode
EXTRA_PRIVATE = ["fednewton_certified"]

#: the defaults (fedgdp.realdata_settings): the digits layout (offline run); config/mnist.yaml holds the paper's
DEFAULTS: dict = RealdataSettings.defaults()

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


def resolve(overrides: dict | None = None) -> dict:
    """Fully resolved real-data parameters (a new dict); ValueError naming a bad value."""
    p = RealdataSettings.build(overrides).as_dict()      # every parameter but the methods'
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
    return p
