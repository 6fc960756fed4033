"""Real-data parameters (Figures 7-8, docs/methods.md §3, §5): `RealdataSettings` and
`resolve` (then each method's settings: the study's presets, `PRESETS`, `PARENTS` and
`DERIVE`, resolved by `method_settings`). The defaults
are the digits layout (the offline run); config/mnist.yaml holds the paper's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..common.datasets import DATASETS
from ..core.privacy import DEFAULT_CLIP, DEFAULT_PRIVACY, check_clip, check_privacy, clip_rule, parse_mu
from ..core.settings import Settings, choice, integer, name_list, number, setting
from ..core.solvers import NEWTON_DEFAULTS
from ..methods import REALDATA, FedHybrid, Method, registry
from ..methods import get_method as _get_method

__all__ = ["RealdataSettings", "TASKS", "METRICS", "PRIVATE", "EXTRA_PRIVATE", "NONPRIVATE", "DEFAULTS",
           "REGISTRY", "get_method", "resolve", "PRESETS", "PARENTS", "DERIVE", "method_settings"]

TASKS = ("binary", "multiclass")
PRIVATE = ["fedsgd", "fedavg", "fedhybrid", "fednewton", "dp_scaffold"]
NONPRIVATE = ["np_scaffold", "np_fedavg", "np_localfit", "np_pooled"]


def _mu_list(key, value) -> list[float]:
    """``6,2``, ``[6, 2]`` or ``2`` -> [6.0, 2.0] or [2.0]; each mu > 0 or inf."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    elif not isinstance(value, (list, tuple)):
        value = [value]
    if not value:
        raise ValueError("mu must list at least one value")
    return [parse_mu(v) for v in value]


def _weights(key, value):
    if value != "size":
        raise ValueError(f"weights must be 'size' for the real-data study, got {value!r}")
    return value


def _newton(key, value) -> dict:
    """The Newton solver's settings; a mapping given updates the defaults key by key."""
    if not isinstance(value, dict):
        raise ValueError(f"newton must be a mapping (solver, cg_tol, cg_maxiter), got newton={value!r}")
    nw = {**NEWTON_DEFAULTS, **value}
    if nw.get("solver") not in ("cg", "floor", "ridge"):
        raise ValueError(f"newton solver must be cg, floor or ridge, got {nw.get('solver')!r}")
    integer(1)("newton.cg_maxiter", nw["cg_maxiter"])
    number(0, keep=True)("newton.cg_tol", nw["cg_tol"])
    return nw


@dataclass(frozen=True)
class RealdataSettings(Settings):
    """Every real-data parameter; ``methods`` and ``method_settings`` are checked against
    the methods' registry by `resolve`."""

    WHAT: ClassVar[str] = "realdata parameter"

    dataset: str = setting("digits", " | ".join(DATASETS), parse=choice(*DATASETS), flag=str)
    path: str | None = setting(None, "folder holding the MNIST files (dataset mnist)", flag=str)
    task: str = setting("binary", " | ".join(TASKS), parse=choice(*TASKS), flag=str)
    m: int = setting(10, "clients (digits: 10 ...)", parse=integer(1))
    n_min: int = setting(150, "... of at least n_min images each (digits: 1,500 of 1,797), the rest "
                         "by Dirichlet(alpha) proportions", parse=integer(0))
    alpha: float = setting(1.0, "Dirichlet concentration of the client sizes beyond n_min", parse=number(0))
    folds: int = setting(5, "cross-validation folds within each client", parse=integer(2))
    mu: list = setting(help="comma-separated privacy levels, e.g. 6,2 (non-private methods run once)",
                       parse=_mu_list, flag=str, factory=lambda: [6.0, 2.0])
    base_seed: int = setting(2026, "root of every split's random draws", parse=integer(0), flag=int)
    clip: Any = setting(help="clipping rule (fedgdp.core.privacy.check_clip)",
                        parse=lambda k, v: clip_rule(check_clip(v)), factory=lambda: dict(DEFAULT_CLIP))
    privacy: dict = setting(help="privacy mode and FedNewton's Hessian bound (fedgdp.core.privacy.check_privacy)",
                            factory=lambda: dict(DEFAULT_PRIVACY))
    tau1: float = setting(0.5, "FedNewton's eigenvalue floor / ridge", parse=number(0), flag=float)
    weights: str = setting("size", "client weights: size (the only choice here)", parse=_weights)
    newton: dict = setting(help="Newton solver: cg | floor | ridge, cg_tol, cg_maxiter", parse=_newton,
                           factory=lambda: dict(NEWTON_DEFAULTS))
    methods: list = setting(help="comma-separated method names, or all", parse=name_list, flag=str,
                            factory=lambda: PRIVATE + NONPRIVATE)
    method_settings: dict = setting(help="per method, e.g. {fedavg: {R: 2}}", factory=dict)

    @classmethod
    def finish(cls, p: dict) -> dict:
        """Check ``privacy`` against ``clip`` (`fedgdp.core.privacy.check_privacy`); ``mnist`` needs ``path``."""
        p["privacy"] = check_privacy(p["privacy"], p["clip"])
        if p["dataset"] == "mnist" and not p["path"]:
            raise ValueError("dataset 'mnist' needs path: the folder holding the MNIST IDX files or mnist.npz")
        return p


METRICS = {"binary": "auc", "multiclass": "accuracy"}

#: also private, not in the default list: FedNewton with certified privacy in every mode
EXTRA_PRIVATE = ["fednewton_certified"]

#: the defaults (RealdataSettings): the digits layout (offline run); config/mnist.yaml holds the paper's
DEFAULTS: dict = RealdataSettings.defaults()

#: The methods of the real-data study (a view of `fedgdp.methods.REGISTRY`).
REGISTRY = registry(REALDATA)


def get_method(name: str):
    """A method that runs on real data (ValueError naming the bad value otherwise).

    Parameters
    ----------
    name : str
        The method's name.
    """
    return _get_method(name, REALDATA)


# ------------------------------------------------------------ method presets
_RIDGE = {"ridge": 1.0e-3, "maxiter": 200, "gtol": 1.0e-8}

#: The real-data defaults per method, in the resolved order, over its parent's resolved
#: settings (`PARENTS`); a method in neither: its settings' defaults.
PRESETS: dict[str, dict] = {
    "fedsgd": {"K": 50, "eta": 0.5},
    "fedavg": {"R": 2, "K": 50, "eta": 0.5},
    "fedhybrid": {"K1": 30, "eta1": 0.5, "K2": 20, "eta2": 0.5},
    "fednewton": {"K": 50, "eta": 0.5},
    "dp_scaffold": {"eta_g": 1.0},
    "fedirls": {"T": 5, "radius": 4.0},
    "np_localfit": _RIDGE,
    "np_pooled": _RIDGE,
}

#: The method whose resolved real-data settings a method starts from, the user's included
#: (a parent is registered before its children).
PARENTS: dict[str, str] = {
    "fednewton_certified": "fednewton",     # FedNewton's settings
    "dp_scaffold": "fedavg",                # FedAvg's schedule (so FedAvg's noise), plus eta_g
    "np_scaffold": "dp_scaffold",           # the non-private versions: their private method's
    "np_fedavg": "fedavg",
}


def _fedhybrid_derive(s: dict, given: dict) -> None:
    """When ``share1`` is given, split the preset's ``K1 + K2`` steps by it (K1, K2 not given are set)."""
    if "share1" in given:
        total = PRESETS["fedhybrid"]["K1"] + PRESETS["fedhybrid"]["K2"]
        if "K1" not in given:
            s["K1"] = FedHybrid.split(total, s["share1"])
        if "K2" not in given:
            s["K2"] = total - s["K1"]


#: The real-data derived settings per method, ``derive(s, given)`` filling ``s`` in place
#: from the user's ``given`` settings (none for a method not listed).
DERIVE = {"fedhybrid": _fedhybrid_derive}


def method_settings(meth: Method, resolved: dict, given: dict | None) -> dict:
    """A method's real-data settings: its parent's resolved settings (`PARENTS`), its preset
    (`PRESETS`), the user's ``given``; derived values (`DERIVE`); checked
    (`fedgdp.methods.Method.resolve_settings`).

    Parameters
    ----------
    meth : Method
        The method.
    resolved : dict
        Name -> resolved settings of the methods so far (the parent among them).
    given : dict or None
        The user's settings of this method.
    """
    parent = PARENTS.get(meth.name)
    if meth.name in PRESETS or parent is not None:
        defaults = {**(resolved[parent] if parent else {}), **PRESETS.get(meth.name, {})}
    else:
        assert meth.settings_class is not None
        defaults = meth.settings_class.defaults()
    derive = DERIVE.get(meth.name)
    return meth.resolve_settings(defaults, given, None if derive is None else lambda s: derive(s, given or {}))


# --------------------------------------------------------------- parameters
def resolve(overrides: dict | None = None) -> RealdataSettings:
    """Fully resolved real-data parameters (``method_settings`` holding each listed method's
    resolved settings, ``clip`` a rule of `fedgdp.core.privacy.clip_rule`); ValueError naming
    a bad value. ``as_dict()`` is the plain form the seeds and the Parquet metadata read.

    Parameters
    ----------
    overrides : dict or None
        Real-data parameters over the defaults (`RealdataSettings` fields).
    """
    p = RealdataSettings.build(overrides)      # every parameter but the methods'
    methods = list(p.methods)
    if methods in (["all"], "all"):       # every method that fits both tasks (FedIRLS: one output only)
        methods = [name for name, meth in REGISTRY.items() if not meth.tags.single_output]
    if not methods:
        raise ValueError("methods must name at least one method")
    for name in methods:
        get_method(name)
    user = p.method_settings or {}
    for name in user:
        get_method(name)
    settings: dict = {}
    for name, meth in REGISTRY.items():     # a parent is registered before its children
        settings[name] = method_settings(meth, settings, user.get(name))
    p = p.replace(methods=methods, method_settings={name: settings[name] for name in methods})
    _check_newton(p)
    return p


def _check_newton(p: RealdataSettings) -> None:
    """What certified FedNewton's proof needs of the settings (docs/methods.md §2): a
    solve whose error enters the recorded sensitivity (`fedgdp.core.solvers.check_certified_cg`).
    (Both halves non-empty depends on the data's layout: `FoldData.half_sizes` checks it.)"""
    from ..core.solvers import check_certified_cg

    newton = [name for name in p.methods if get_method(name).tags.solves_newton]
    if not newton:
        return
    certified = [name for name in newton
                 if get_method(name).tags.always_certified or p.privacy["mode"] == "certified"]
    solver = p.newton
    if certified and solver["solver"] == "cg":
        check_certified_cg(solver["cg_tol"], solver["cg_maxiter"], p.privacy["hessian_clip"])
