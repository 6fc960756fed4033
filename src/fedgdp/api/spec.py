"""The fit specification: `FederatedGLM`'s parameters and the public inputs, resolved once.

`check_parameters` checks the estimator's own parameters (before any data is read);
`resolve_settings` gives a fit's real-data settings (`fedgdp.realdata.resolve`: the method's
presets, the clipping rule, the privacy mode); `fit_spec` completes them for the design's
columns and the clipping bound (Poisson's public step sizes) into a frozen `FitSpec`: method,
steps, clip, settings and model, what ``fit``, the forecast's warning, ``fedgdp fit`` and a fit
across sites (`fedgdp.federation`) all run. `targets` and `design` are the estimator's
reading of the labels and its design matrix, which a site applies to its own rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import privacy
from ..core.families import get_family
from .checks import _check_missing, _clip_rule, _data_codes, _label_domain, _numeric, _public_codes

if TYPE_CHECKING:
    from ..realdata.parameters import RealdataSettings

__all__ = ["FitSpec", "check_parameters", "resolve_settings", "fit_spec", "targets", "design"]


def check_parameters(est) -> None:
    """ValueError naming the first bad parameter of a `FederatedGLM` that the settings' resolver
    does not check itself (``classes``, ``method``, ``privacy_mode``, ``method_settings``,
    ``fit_intercept``, ``shuffle``).

    Parameters
    ----------
    est : FederatedGLM
        The estimator (its parameters as given).
    """
    from ..realdata import REGISTRY

    fam = get_family(est.family)
    if est.classes is not None:
        if not fam.labelled:
            raise ValueError(f"classes is for the classifiers (family 'logistic' or 'multinomial'); family "
                             f"'poisson' takes counts, got classes={est.classes!r}")
        _label_domain(est.classes, est.family)
    auto = isinstance(est.method, str) and est.method == "auto"
    if not auto and (est.method not in REGISTRY or REGISTRY[est.method].tags.per_client):   # one global estimate
        names = ["auto", *(n for n in REGISTRY if not REGISTRY[n].tags.per_client)]
        raise ValueError(f"unknown method {est.method!r}; choose from {', '.join(names)}")
    if auto and est.method_settings:
        raise ValueError(f"method_settings are a method's own: name the method they are for (method='auto' "
                         f"chooses one by the noise forecast), got method_settings={est.method_settings!r}")
    if est.privacy_mode not in privacy.PRIVACY_MODES:
        raise ValueError(f"privacy_mode must be 'certified' or 'paper', got privacy_mode={est.privacy_mode!r}")
    if est.method_settings is not None and not isinstance(est.method_settings, dict):
        raise ValueError(f"method_settings must be a dict or None, got {est.method_settings!r}")
    if not isinstance(est.fit_intercept, (bool, np.bool_)) or not isinstance(est.shuffle, (bool, np.bool_)):
        raise ValueError("fit_intercept and shuffle must be True or False")


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
    from ..realdata import REGISTRY, resolve
    from .forecast import public_clip

    check_parameters(est)
    auto = est.method == "auto"
    method = method or (est.method if not auto else "fednewton")
    mu = privacy.parse_mu(est.mu)
    clip = _clip_rule(est.clip)
    if clip is None:
        clip = public_clip(est.family, d) if bound is None else float(bound)
    over = {"mu": [mu], "methods": [method], "clip": clip,
            "tau1": est.tau1, "privacy": {"mode": est.privacy_mode, "hessian_clip": est.hessian_clip},
            "method_settings": {method: dict(est.method_settings or {})}}
    if est.newton is not None:
        over["newton"] = est.newton
    p = resolve(over)
    if not REGISTRY[method].tags.private and math.isfinite(mu):
        raise ValueError(f"method {method!r} is non-private: set mu=inf (got mu={est.mu!r})")
    return p


def targets(family: str, classes, y: np.ndarray) -> tuple[np.ndarray, Any, np.ndarray | None]:
    """The responses Y (n, k), the model of ``family`` and the sorted class labels (None for counts).

    Parameters
    ----------
    family : str
    classes : array-like or None
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
        steps = dict(settings.method_settings[method])
        fam.default_steps(steps, est.method_settings or {}, d, step_B)
        settings = settings.replace(method_settings={**settings.method_settings, method: steps})
    return FitSpec(method, settings, model, d, float(B), float(mu))
