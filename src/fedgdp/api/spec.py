"""The fit specification: `FederatedGLM`'s parameters and the public inputs, resolved once.

`check_parameters` checks the estimator's own parameters against their declared
`PARAMETER_CONSTRAINTS` (before any data is read);
`resolve_settings` gives a fit's real-data settings (`fedgdp.realdata.resolve`: the method's
presets, the clipping rule, the privacy mode); `fit_spec` completes them for the design's
columns and the clipping bound (Poisson's public step sizes) into a frozen `FitSpec`: method,
steps, clip, settings and model, what ``fit``, the forecast's warning, ``fedgdp fit`` and a fit
across sites (`fedgdp.federation`) all run. `targets` and `design` are the estimator's
reading of the labels and its design matrix, which a site applies to its own rows.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import privacy
from ..core.families import get_family
from .checks import _check_missing, _clip_rule, _data_codes, _label_domain, _numeric, _public_codes

if TYPE_CHECKING:
    from ..realdata.parameters import RealdataSettings

__all__ = ["FitSpec", "Constraint", "PARAMETER_CONSTRAINTS", "check_parameters", "resolve_method", "with_steps",
           "resolve_settings", "fit_spec", "targets", "design"]


@dataclass(frozen=True)
class Constraint:
    """One declared constraint of an estimator parameter (scikit-learn's ``_parameter_constraints``).

    Attributes
    ----------
    ok : callable
        ``ok(value, est)``: whether the value is accepted (a checker with its own message raises it).
    message : str
        The ValueError's message, formatted with ``value`` and ``choices``.
    choices : callable or None
        ``choices(est)``: the accepted values named by the message.
    """

    ok: Callable[[Any, Any], bool]
    message: str = ""
    choices: Callable[[Any], str] | None = None


def _family(value, est) -> bool:
    get_family(value)                       # ValueError naming the families
    return True


def _label_set(value, est) -> bool:
    if value is not None:
        _label_domain(value, est.family)    # ValueError naming the bad label domain
    return True


def _global_methods(est) -> list[str]:
    from ..realdata import REGISTRY

    return [n for n in REGISTRY if not REGISTRY[n].tags.per_client]       # one global estimate


def _is_bool(value, est) -> bool:
    return isinstance(value, (bool, np.bool_))


#: The parameters of `FederatedGLM` that no resolver checks, declared and checked in this order
#: (`check_parameters`); ``mu``, ``clip``, ``tau1``, ``hessian_clip``, ``newton`` and the method's
#: settings are `fedgdp.realdata.resolve`'s, ``inference_share`` `fedgdp.api.inference.check_share`'s.
PARAMETER_CONSTRAINTS: dict[str, tuple[Constraint, ...]] = {
    "family": (Constraint(_family),),
    "classes": (
        Constraint(lambda v, est: v is None or get_family(est.family).labelled,
                   "classes is for the classifiers (family 'logistic' or 'multinomial'); family 'poisson' takes "
                   "counts, got classes={value!r}"),
        Constraint(_label_set),
    ),
    "method": (Constraint(lambda v, est: (isinstance(v, str) and v == "auto") or v in _global_methods(est),
                          "unknown method {value!r}; choose from {choices}",
                          lambda est: ", ".join(["auto", *_global_methods(est)])),),
    "privacy_mode": (Constraint(lambda v, est: v in privacy.PRIVACY_MODES,
                                "privacy_mode must be 'certified' or 'paper', got privacy_mode={value!r}"),),
    "method_settings": (
        Constraint(lambda v, est: not (est.method == "auto" and v),
                   "method_settings are a method's own: name the method they are for (method='auto' chooses one "
                   "by the noise forecast), got method_settings={value!r}"),
        Constraint(lambda v, est: v is None or isinstance(v, dict), "method_settings must be a dict or None, got "
                   "{value!r}"),
    ),
    "fit_intercept": (Constraint(_is_bool, "fit_intercept and shuffle must be True or False"),),
    "shuffle": (Constraint(_is_bool, "fit_intercept and shuffle must be True or False"),),
}


def check_parameters(est) -> None:
    """ValueError naming the first parameter of a `FederatedGLM` that breaks its `PARAMETER_CONSTRAINTS`.

    Parameters
    ----------
    est : FederatedGLM
        The estimator (its parameters as given).
    """
    for key, constraints in PARAMETER_CONSTRAINTS.items():
        value = getattr(est, key)
        for c in constraints:
            if not c.ok(value, est):
                raise ValueError(c.message.format(value=value, choices=c.choices(est) if c.choices else ""))


def resolve_method(method: str, *, mu: float, clip, tau1, privacy_mode: str, hessian_clip, newton: dict | None,
                   method_settings: dict | None) -> RealdataSettings:
    """The real-data settings of one method at one mu (`fedgdp.realdata.resolve`), the estimator's
    parameters of the same names over the real-data defaults: the estimator's and the forecast's one reading.

    Parameters
    ----------
    method : str
    mu : float
    clip : float, dict or rule
        The clipping rule or a public bound.
    tau1, privacy_mode, hessian_clip, newton, method_settings
        As `FederatedGLM`'s (``newton`` None: the defaults; ``method_settings``: the method's own).
    """
    from ..realdata import resolve

    over = {"mu": [mu], "methods": [method], "clip": clip,
            "tau1": tau1, "privacy": {"mode": privacy_mode, "hessian_clip": hessian_clip},
            "method_settings": {method: dict(method_settings or {})}}
    if newton is not None:
        over["newton"] = newton
    return resolve(over)


def with_steps(settings: RealdataSettings, family: str, method: str, given: dict | None, d: int,
               B: float) -> RealdataSettings:
    """``settings`` with the family's default steps for ``method`` where the user gave none
    (`fedgdp.core.families.Family.default_steps`: Poisson's eta ``1 / (max(B, 1) sqrt(d) + d)`` and 4
    times the preset's steps; docs/real-data.md, "The defaults assume standardised features").

    Parameters
    ----------
    settings : RealdataSettings
    family, method : str
    given : dict or None
        The user's settings of the method (kept).
    d : int
        Design columns.
    B : float
        The bound the steps are scaled to (finite).
    """
    steps = dict(settings.method_settings[method])
    get_family(family).default_steps(steps, given or {}, d, B)
    return settings.replace(method_settings={**settings.method_settings, method: steps})


def resolve_settings(est, method: str | None = None, d: int = 1, bound: float | None = None) -> RealdataSettings:
    """The real-data settings of a `FederatedGLM` fit (`fedgdp.realdata.resolve`), its parameters checked.

    Parameters
    ----------
    est : FederatedGLM
        The estimator.
    method : str or None
        The method (None: the one given, FedNewton standing for ``"auto"`` until the client
        sizes choose it).
    d : int
        Design columns (the intercept included), for the public clipping rule.
    bound : float or None
        When ``clip`` is None, the public rule's bound (None: the rule for ``d`` columns
        without the sizes, `fedgdp.api.forecast.public_clip`).
    """
    from ..realdata import REGISTRY
    from .forecast import public_clip

    check_parameters(est)
    auto = est.method == "auto"
    method = method or (est.method if not auto else "fednewton")
    mu = privacy.parse_mu(est.mu)
    clip = _clip_rule(est.clip)
    if clip is None:
        clip = public_clip(est.family, d) if bound is None else float(bound)
    p = resolve_method(method, mu=mu, clip=clip, tau1=est.tau1, privacy_mode=est.privacy_mode,
                       hessian_clip=est.hessian_clip, newton=est.newton, method_settings=est.method_settings)
    if not REGISTRY[method].tags.private and math.isfinite(mu):
        raise ValueError(f"method {method!r} is non-private: set mu=inf (got mu={est.mu!r})")
    return p


def targets(family: str, classes, y: np.ndarray) -> tuple[np.ndarray, Any, np.ndarray | None]:
    """The responses Y (n, k), the model of ``family`` and the sorted class labels (None for counts).

    Parameters
    ----------
    family : str
    classes : array-like of shape (C,) or None
        The public label domain (None: the labels of ``y``, a release no ledger accounts for).
    y : ndarray of shape (n,)
        Labels or counts.
    """
    _check_missing(y)
    fam = get_family(family)
    if not fam.labelled:                   # counts
        y = _numeric(y, "y")
        if np.any(y < 0):
            raise ValueError(f"family {family!r} needs counts: y must be >= 0 (some values of y are negative)")
        model = fam.model()
        return model.targets(y), model, None
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
        if np.any(y != np.round(y)):
            raise ValueError("Unknown label type: continuous. FederatedGLM with family "
                             f"{family!r} is a classifier: y must hold class labels")
    if y.dtype.kind not in "biufUSO":
        raise ValueError(f"Unknown label type: y has dtype {y.dtype}")
    if classes is not None:
        labels, codes = _public_codes(y, _label_domain(classes, family))
    else:
        labels, codes = _data_codes(y)
    if fam.max_classes is not None and len(labels) > fam.max_classes:
        raise ValueError(f"Only binary classification is supported by family {family!r}: y has "
                         f"{len(labels)} classes; use family='multinomial'")
    model = fam.model(len(labels))
    return model.targets(codes), model, labels


def design(X: np.ndarray, fit_intercept: bool) -> np.ndarray:
    """The design matrix: X with an intercept column first when ``fit_intercept``.

    Parameters
    ----------
    X : ndarray of shape (n, p)
    fit_intercept : bool
    """
    return np.hstack([np.ones((X.shape[0], 1)), X]) if fit_intercept else X


@dataclass(frozen=True)
class FitSpec:
    """One fit, resolved: what runs, on which settings, at which bound.

    Attributes
    ----------
    method : str
        The method's name.
    settings : RealdataSettings
        The resolved settings (``method_settings[method]`` with its steps for ``d`` and ``B``).
    model : fedgdp.core.glm.GLM
        The model of the family (and the label domain).
    d : int
        Design columns (the intercept included).
    B : float
        The clipping bound.
    mu : float
        The mu of the estimate (the inference share taken out, `fedgdp.api.inference.split_mu`).
    """

    method: str
    settings: Any
    model: Any
    d: int
    B: float
    mu: float

    @property
    def meth(self):
        """The method (`fedgdp.realdata.get_method`)."""
        from ..realdata import get_method

        return get_method(self.method)

    @property
    def method_settings(self):
        """The method's frozen settings (`fedgdp.methods.Method.settings`)."""
        return self.meth.settings(self.settings.method_settings[self.method])

    def fold(self, X: list, Y: list, **kwargs):
        """The clients' `fedgdp.realdata.FoldData` under this specification.

        Parameters
        ----------
        X, Y : list of ndarray
            Each client's design rows and responses.
        **kwargs
            Further `FoldData` fields (``xnorm``, ``intercept``, ...).
        """
        from ..realdata import FoldData

        p = self.settings
        return FoldData(self.model, X, Y, mu=self.mu, B=self.B, tau1=p.tau1, newton=p.newton, privacy=p.privacy,
                        clip=p.clip, **kwargs)


def fit_spec(est, settings: RealdataSettings, model, d: int, B: float, *, mu: float | None = None,
             Xc: list | tuple = (), Yc: list | tuple = ()) -> FitSpec:
    """The frozen `FitSpec` of a fit of ``est.method_`` on resolved ``settings``: its default steps
    (Poisson: eta ``1 / (B sqrt(d) + d)`` and 4 times the preset's steps where the user set none;
    at mu = inf B is the largest per-sample gradient norm at 0 over the rows ``Xc``, ``Yc``;
    docs/real-data.md, "The defaults assume standardised features").

    Parameters
    ----------
    est : FederatedGLM
        The estimator (``family``, ``method_settings``, ``method_``).
    settings : RealdataSettings
        From `resolve_settings` for ``est.method_``.
    model : fedgdp.core.glm.GLM
    d : int
        Design columns.
    B : float
        The clipping bound.
    mu : float or None
        The estimate's mu (None: the settings').
    Xc, Yc : sequence of ndarray
        The clients' design rows and responses (only at mu = inf, for Poisson's steps).
    """
    from .forecast import IRLS

    method = est.method_
    mu = settings.mu[0] if mu is None else mu
    fam = get_family(est.family)
    if method != IRLS and fam.scaled_steps:
        step_B = B if privacy.clips(mu) else math.inf
        if not math.isfinite(step_B):
            zero = np.zeros((d, 1))
            step_B = max(float(np.max(privacy.row_norms(x) * privacy.row_norms(model.residuals(zero, x, y))))
                         for x, y in zip(Xc, Yc))
        settings = with_steps(settings, est.family, method, est.method_settings, d, step_B)
    return FitSpec(method, settings, model, d, float(B), float(mu))
