"""The public settings of a fit across sites, checked, and what they resolve to.

Every site and the coordinator start from the same public settings (a JSON object):
``family``, ``classes`` (the public label set; required for a classifier), ``method``
(one of `CERTIFIED`), ``mu`` (finite: each site's budget), ``clip`` (a public bound, or
None for the public default rule), ``privacy_mode``, ``hessian_clip``, ``tau1``,
``method_settings`` (the method's rounds, steps and step sizes), ``newton``,
``fit_intercept``, ``target`` and ``features`` (the columns of every site's file). They
resolve, as `fedgdp.FederatedGLM` resolves them (with ``shuffle=False`` and
``inference_share=0``: the whole mu goes to the estimate), to the method, its settings,
the model and the clipping bound (`fedgdp.api.spec.FitSpec`); nothing here reads a record.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..core.families import get_family

__all__ = ["CERTIFIED", "DEFAULTS", "SiteSettings", "check_settings", "resolve", "same_settings"]

#: The methods run across sites: the certified ones of one global estimate.
CERTIFIED = ("fedsgd", "fedavg", "fedhybrid", "fednewton_certified")
#: The settings and their defaults (those of `fedgdp.FederatedGLM`, ``target`` and ``features`` of `fedgdp fit`).
DEFAULTS = {"family": "logistic", "classes": None, "method": "fednewton_certified", "mu": 2.0, "clip": None,
            "privacy_mode": "certified", "hessian_clip": 4.0, "tau1": 0.5, "method_settings": None,
            "newton": None, "fit_intercept": True, "target": "y", "features": None}
#: The estimator's parameters among them.
ESTIMATOR_KEYS = ("family", "classes", "method", "mu", "clip", "privacy_mode", "hessian_clip", "tau1",
                  "method_settings", "newton", "fit_intercept")


@dataclass(frozen=True)
class SiteSettings:
    """The checked public settings of a fit across sites (`check_settings`; fields: the keys of `DEFAULTS`).
    ``as_dict()`` is their JSON-normal form, what a greeting carries and a site's digest reads."""

    family: str
    classes: list | None
    method: str
    mu: float
    clip: Any
    privacy_mode: str
    hessian_clip: float
    tau1: float
    method_settings: dict | None
    newton: dict | None
    fit_intercept: bool
    target: str
    features: list

    def as_dict(self) -> dict:
        """The settings as a plain dict (a deep copy, keys in the order of `DEFAULTS`)."""
        return json.loads(json.dumps({f.name: getattr(self, f.name) for f in fields(self)}))


def check_settings(settings: Any) -> SiteSettings:
    """The settings with their defaults (every key of `DEFAULTS`), checked before any record is read,
    JSON-normal (the form compared across sites).

    Parameters
    ----------
    settings : dict or SiteSettings
        Public settings (keys of `DEFAULTS`); checked ones are returned as they are.
    """
    if isinstance(settings, SiteSettings):
        return settings
    if not isinstance(settings, dict):
        raise ValueError(f"the settings must be a JSON object, got {settings!r}")
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(map(repr, unknown))}; known: {', '.join(DEFAULTS)}")
    out = json.loads(json.dumps({**DEFAULTS, **settings}))
    if out["method"] not in CERTIFIED:
        raise ValueError(f"method must be one of {', '.join(CERTIFIED)} across sites, got method={out['method']!r}")
    if out["privacy_mode"] != "certified":
        raise ValueError(f"privacy_mode must be 'certified' across sites, got privacy_mode={out['privacy_mode']!r}")
    mu = out["mu"]
    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not math.isfinite(mu) or mu <= 0:
        raise ValueError(f"mu must be a finite positive number across sites (each site's budget), got mu={mu!r}")
    if get_family(out["family"]).labelled and out["classes"] is None:
        raise ValueError(f"classes must be given (the public label set) for family {out['family']!r} across sites, "
                         f"got classes=None")
    if not isinstance(out["target"], str):
        raise ValueError(f"target must be a column name, got target={out['target']!r}")
    feats = out["features"]
    if not isinstance(feats, list) or not feats or not all(isinstance(f, str) for f in feats):
        raise ValueError(f"features must list the feature columns (the same at every site), got features={feats!r}")
    return SiteSettings(**out)


def same_settings(a: SiteSettings, b: SiteSettings) -> bool:
    """Whether two checked settings are the same (canonical JSON).

    Parameters
    ----------
    a, b : SiteSettings
        Checked settings.
    """
    return json.dumps(a.as_dict(), sort_keys=True) == json.dumps(b.as_dict(), sort_keys=True)


def resolve(settings: SiteSettings, d: int):
    """The checked settings resolved for ``d`` design columns (the intercept included), as
    `fedgdp.FederatedGLM` resolves them: a `fedgdp.api.spec.FitSpec` at the public bound.

    Parameters
    ----------
    settings : SiteSettings
        Checked settings (`check_settings`).
    d : int
        Design columns.
    """
    from ..api.estimator import FederatedGLM
    from ..api.spec import fit_spec, resolve_settings, targets
    from ..realdata import clip_bound_real

    est = FederatedGLM(**{k: getattr(settings, k) for k in ESTIMATOR_KEYS}, shuffle=False, inference_share=0.0)
    p = resolve_settings(est, settings.method, d)
    if p.clip.rule != "fixed":
        raise ValueError(f"the clipping bound must be public across sites (a number, or None for the public "
                         f"default), got clip={settings.clip!r}")
    labels = np.asarray(settings.classes) if get_family(settings.family).labelled else np.zeros(1)
    model = targets(settings.family, settings.classes, labels)[1]   # the public label set's (no record)
    est.method_ = settings.method
    return fit_spec(est, p, model, d, clip_bound_real(model, [], [], p.clip, mu=p.mu[0]))   # Poisson's public steps
