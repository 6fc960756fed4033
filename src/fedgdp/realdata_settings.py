"""The parameters of one real-data fit (Figures 7-8, docs/methods.md §5) as a
:mod:`fedgdp.settings` dataclass: defaults, checks, help.

:func:`fedgdp.realdata.resolve` builds :class:`RealdataSettings` and then checks the
methods and their settings against its registry. The defaults are the digits layout
(the offline run); config/mnist.yaml holds the paper's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .datasets import DATASETS
from .params import check_clip, check_privacy, parse_mu
from .settings import Settings, choice, integer, name_list, number, setting

__all__ = ["RealdataSettings", "TASKS", "PRIVATE", "NONPRIVATE"]

TASKS = ("binary", "multiclass")
PRIVATE = ["fedsgd", "fedavg", "fedhybrid", "fednewton", "dp_scaffold"]
NONPRIVATE = ["np_scaffold", "np_fedavg", "np_localfit", "np_pooled"]
_NEWTON = {"solver": "cg", "cg_tol": 1.0e-8, "cg_maxiter": 500}


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
    nw = {**_NEWTON, **value}
    if nw.get("solver") not in ("cg", "floor", "ridge"):
        raise ValueError(f"newton solver must be cg, floor or ridge, got {nw.get('solver')!r}")
    integer(1)("newton.cg_maxiter", nw["cg_maxiter"])
    number(0, keep=True)("newton.cg_tol", nw["cg_tol"])
    return nw


@dataclass(frozen=True)
class RealdataSettings(Settings):
    """Every real-data parameter; ``methods`` and ``method_settings`` are checked against
    the methods' registry by :func:`fedgdp.realdata.resolve`."""

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
    clip: dict = setting(help="clipping rule (fedgdp.params.check_clip)", parse=lambda k, v: check_clip(v),
                         factory=lambda: {"rule": "quantile", "q": 0.9})
    privacy: dict = setting(help="privacy mode and FedNewton's Hessian bound (fedgdp.params.check_privacy)",
                            factory=lambda: {"mode": "paper", "hessian_clip": 4.0})
    tau1: float = setting(0.5, "FedNewton's eigenvalue floor / ridge", parse=number(0), flag=float)
    weights: str = setting("size", "client weights: size (the only choice here)", parse=_weights)
    newton: dict = setting(help="Newton solver: cg | floor | ridge, cg_tol, cg_maxiter", parse=_newton,
                           factory=lambda: dict(_NEWTON))
    methods: list = setting(help="comma-separated method names, or all", parse=name_list, flag=str,
                            factory=lambda: PRIVATE + NONPRIVATE)
    method_settings: dict = setting(help="per method, e.g. {fedavg: {R: 2}}", factory=dict)

    @classmethod
    def finish(cls, p: dict) -> dict:
        p["privacy"] = check_privacy(p["privacy"], p["clip"])
        if p["dataset"] == "mnist" and not p["path"]:
            raise ValueError("dataset 'mnist' needs path: the folder holding the MNIST IDX files or mnist.npz")
        return p
