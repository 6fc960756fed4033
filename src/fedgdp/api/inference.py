"""Inference under privacy: standard errors, confidence intervals and ``FederatedGLM.summary()``.

A coefficient's standard error has two parts that add in variance (the noise is drawn
independently of the data):

- ``se_noise``: the privacy noise's sd (a Poisson intercept's: its root-mean-square
  error, the noise's bias included), from the public sds through the method's iteration
  at the released estimate (`fedgdp.api.forecast.noise_se`, ``fit_info_["noise_se"]``;
  post-processing, no privacy cost);
- ``se_sampling``: the sampling sd of the estimator, from the sandwich
  ``H^-1 S H^-1`` (``cov_type="robust"``) or the inverse information ``H^-1``
  (``cov_type="model"``, statsmodels' default), with ``H`` the sum of per-sample
  Hessians and ``S`` the sum of per-sample gradient outer products at the released
  estimate.

Private, each client releases its clipped ``S_i`` and ``H_i`` at the released estimate
(`fedgdp.realdata.moments`) at ``mu_inf = mu sqrt(share)``, the estimation runs at ``mu
sqrt(1 - share)``, and the rest is post-processing; without a release ``se_sampling`` is
the public curvature model's. Sensitivities, composition and estimators: docs/methods.md
§10, "Inference under privacy".
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from ..core import privacy
from ..core.families import get_family
from ..core.normals import standard_normal
from ..core.segments import client_groups, stacked
from ..core.settings import number
from ..realdata import moments as _moments
from ..realdata.moments import STAGES, clients_moments, release_plan

__all__ = ["DEFAULT_SHARE", "MAX_DIM", "STAGES", "COV_TYPES", "Moments", "check_share", "split_mu",
           "release_plan", "release", "public_moments", "covariance", "floored_directions", "summary", "conf_int",
           "summary_class", "summary_records", "merge_ledgers"]

#: The share of mu^2 spent on inference by default (the estimation gets the rest)
DEFAULT_SHARE = 0.1
#: The most coefficients (d k) whose moments are released: above it no release is made (a public rule)
MAX_DIM = 400
#: ``withheld``: z, p and intervals the fit cannot back are NaN (``hide``) or printed anyway (``show``)
WITHHELD = ("hide", "show")
#: ``cov_type``: inverse information (statsmodels' default) or the HC0 sandwich
COV_TYPES = ("model", "robust")
#: Said by every private summary (the estimate's clipping bias is not in the intervals)
CLIP_NOTE = ("clipping bias not accounted: the intervals are centred on the clipped estimator, whose target "
             "moves when per-sample gradients are clipped; clipping bound B")
PUBLIC_NOTE = ("se_sampling from the public curvature model at the estimate (standardised features), NOT from "
               "the data: it ignores the data's own curvature and variance (inference_share=0 or more than "
               f"{MAX_DIM} coefficients)")

_check_share = number(0, 1, closed="low")


def check_share(value) -> float:
    """``inference_share`` checked: a number in [0, 1).

    Parameters
    ----------
    value : float
    """
    return float(_check_share("inference_share", value))


def split_mu(mu: float, share: float, d: int, k: int) -> tuple[float, float]:
    """(estimation mu, inference mu), which compose to mu: ``mu sqrt(1 - share)`` and ``mu sqrt(share)``
    (`fedgdp.core.privacy.apportion`), or ``(mu, 0)`` when nothing is released (non-private, share 0, more
    than `MAX_DIM` coefficients).

    Parameters
    ----------
    mu : float
    share : float
        The share of mu^2 for inference.
    d, k : int
        Design columns and outputs.
    """
    if not privacy.adds_noise(mu) or share == 0 or d * k > MAX_DIM:
        return mu, 0.0
    return privacy.apportion(mu, share)


@dataclass
class Moments:
    """What inference reads: ``S`` and ``H`` (D, D), D = d k, sums over every row.

    Attributes
    ----------
    S, H : ndarray of shape (D, D)
        Score outer products and curvature (noisy when private; symmetric).
    sizes : ndarray of shape (m,)
    d, k : int
    source : str
        ``exact``, ``private release`` or ``public curvature model``.
    noise_sd_S, noise_sd_H : float
        The sd of each entry's noise in the sums (0 when exact).
    mu : float
        The inference mu per client (0: nothing released).
    """

    S: np.ndarray
    H: np.ndarray
    sizes: np.ndarray
    d: int
    k: int
    source: str
    noise_sd_S: float = 0.0
    noise_sd_H: float = 0.0
    mu: float = 0.0


def release(model, Xc: list, Yc: list, theta: np.ndarray, B: float, mu: float, rng) -> tuple[Moments, object]:
    """The clients' `Moments` at the released estimate, noisy under ``mu`` (module docstring), and the releases'
    ledger (None when nothing private was released).

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
    Xc, Yc : list of ndarray
        Each client's design (intercept column included) and targets.
    theta : ndarray of shape (d, k)
        The released estimate.
    B : float
        The clipping bound in force (inf: non-private, exact moments).
    mu : float
        The inference mu per client (0 or inf: exact, nothing recorded).
    rng : numpy.random.Generator or None
        The noise's generator (when private).
    """
    from ..methods.fedirls import symmetric

    d, k = theta.shape
    D = d * k
    sizes = np.array([len(x) for x in Xc], dtype=np.int64)
    private = 0 < mu < math.inf and math.isfinite(B)
    ledger, sds = None, [np.zeros(len(Xc)), np.zeros(len(Xc))]
    if private:
        cal = privacy.calibrate(_moments.release_plan(np.full((1, len(Xc)), B), k), mu=mu)
        ledger, sds = cal.ledger, [np.asarray(s, float).reshape(-1) for s in cal.sigmas]
    S, H, i = np.zeros((D, D)), np.zeros((D, D)), 0
    X, Y = stacked([np.asarray(x, float) for x in Xc]), stacked([np.asarray(y, float) for y in Yc])
    for lo, hi, ends in client_groups(sizes):          # clients in runs of consecutive rows
        Si, Hi = clients_moments(model, theta, X[lo:hi], Y[lo:hi], B, ends)
        j = i + len(ends)
        if private:          # each client's two noises in turn, client by client
            Z = symmetric(standard_normal(rng, (len(ends), 2, D, D)))
            Si = Si + sds[0][i:j, None, None] * Z[:, 0]
            Hi = Hi + sds[1][i:j, None, None] * Z[:, 1]
        S, H, i = sum(Si, start=S), sum(Hi, start=H), j
    if not (np.all(np.isfinite(S)) and np.all(np.isfinite(H))):
        raise ValueError("the inference moments at the estimate are not finite (an overflowing linear predictor): "
                         "set inference_share=0 or rescale the features")
    return Moments(S, H, sizes, d, k, "private release" if private else "exact",
                   float(np.sqrt(np.sum(sds[0] ** 2))), float(np.sqrt(np.sum(sds[1] ** 2))),
                   mu if private else 0.0), ledger


def public_moments(family: str, theta: np.ndarray, sizes, B: float) -> Moments:
    """The public curvature model's moments ``S = H = N (I_d (x) W)`` (`fedgdp.api.forecast.curvature`); no data.

    Parameters
    ----------
    family : str
    theta : ndarray of shape (d, k)
    sizes : ndarray of shape (m,)
    B : float
        The clipping bound (``curvature``'s Poisson clipping).
    """
    from .forecast import curvature

    d, k = theta.shape
    values, vectors = curvature(family, k, theta, b=B / math.sqrt(d))
    W = (vectors * values) @ vectors.T
    H = float(np.sum(sizes)) * np.kron(np.eye(d), W)
    return Moments(H.copy(), H, np.asarray(sizes), d, k, "public curvature model")


def _basis(d: int, k: int) -> np.ndarray:
    """An orthonormal basis (D, D') of the identified coefficients: all of them (k = 1), or
    those centred across the classes (softmax: D' = d (k - 1))."""
    if k == 1:
        return np.eye(d)
    values, vectors = np.linalg.eigh(np.eye(k) - np.ones((k, k)) / k)
    return np.kron(np.eye(d), vectors[:, values > 0.5])


def _psd(A: np.ndarray, floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh((A + A.T) / 2)
    return np.maximum(values, floor), vectors


def _floored_curvature(mom: Moments, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The eigenvalues and vectors of ``H`` on the identified coefficients, and their floor:
    twice the spectral scale of its noise, ``2 sd sqrt(D)`` (1e-12 of the largest when exact)."""
    hv, hV = _psd(Q.T @ mom.H @ Q)
    floor = max(2.0 * mom.noise_sd_H * math.sqrt(Q.shape[1]), 1e-12 * float(np.max(np.abs(hv), initial=0.0)))
    if not floor > 0:
        raise ValueError("the curvature at the estimate is zero: no standard error can be computed")
    return hv, hV, floor


def settings_view(settings):
    """A fit's resolved settings read by attribute: the frozen settings as they are, their dict form (an
    estimator pickled before they were typed) as a namespace of its keys, None as None.

    Parameters
    ----------
    settings : fedgdp.realdata.RealdataSettings, Mapping or None
    """
    return SimpleNamespace(**settings) if isinstance(settings, Mapping) else settings


def floored_directions(mom: Moments) -> tuple[int, int, float]:
    """``(floored, D', floor)``: how many eigenvalues of the released ``H`` lie at or below `covariance`'s floor
    (there ``se_sampling`` uses it), of the D' identified coefficients.

    Parameters
    ----------
    mom : Moments
    """
    Q = _basis(mom.d, mom.k)
    hv, _, floor = _floored_curvature(mom, Q)
    return int(np.sum(hv <= floor)), int(Q.shape[1]), float(floor)


def covariance(mom: Moments, *, cov_type: str = "model", method: str = "np_pooled", settings=None
               ) -> np.ndarray:
    """The sampling covariance (D, D) of the estimate (row-major in theta's (d, k); softmax:
    of the coefficients centred across the classes). Post-processing of ``mom``.

    ``S`` is projected onto the PSD cone, ``H``'s eigenvalues floored at ``2 sd sqrt(D)``;
    all methods but FedNewton take ``(H + R)^-1 M (H + R)^-1`` (``M = H`` or ``S``),
    FedNewton ``V = A V1 A + F^-1 M_m F^-1 / N2`` (docs/methods.md §10, "Which estimator").

    Parameters
    ----------
    mom : Moments
    cov_type : {"model", "robust"}
    method : str
        The method that made the estimate.
    settings : fedgdp.realdata.RealdataSettings, its dict form or None
        The fit's resolved settings (``settings_``: ``tau1``, ``privacy``, ``method_settings``).
    """
    if cov_type not in COV_TYPES:
        raise ValueError(f"cov_type must be one of {', '.join(COV_TYPES)}, got cov_type={cov_type!r}")
    settings = settings_view(settings)
    Q = _basis(mom.d, mom.k)
    N = float(np.sum(mom.sizes))
    hv, hV, floor = _floored_curvature(mom, Q)
    hv = np.maximum(hv, floor)
    Hr = (hV * hv) @ hV.T
    if cov_type == "robust":
        sv, sV = _psd(Q.T @ mom.S @ Q)
        Mr = (sV * sv) @ sV.T
    else:
        Mr = Hr
    ms = dict(getattr(settings, "method_settings", {}).get(method, {}))
    if method in ("fednewton", "fednewton_certified"):
        h = mom.sizes // 2
        N1, N2 = float(np.sum(h)), float(np.sum(mom.sizes - h))
        tau = float(getattr(settings, "tau1", 0.5))
        certified = method == "fednewton_certified" or getattr(settings, "privacy", {}).get("mode") == "certified"
        c = hv / N                                   # Hm's eigenvalues, in hV's basis
        f = c + tau if certified else np.maximum(c, tau)
        a = 1.0 - c / f
        Mm = hV.T @ Mr @ hV / N                      # in Hm's eigenbasis
        V1 = Mm / np.outer(c, c) / N1
        Vr = np.outer(a, a) * V1 + Mm / np.outer(f, f) / N2
        Vr = hV @ Vr @ hV.T
    else:
        ridge = float(ms.get("ridge", 0.0))
        mask = np.kron(np.r_[0.0, np.ones(mom.d - 1)], np.ones(mom.k))
        bread = np.linalg.inv(Hr + N * ridge * (Q.T * mask) @ Q)
        Vr = bread @ Mr @ bread
    return Q @ ((Vr + Vr.T) / 2) @ Q.T


_SUMMARY: list = []


def summary_class():
    """The class of a summary: a pandas DataFrame whose ``header`` (a str) is printed above
    the table (made on first use, so that importing this module does not import pandas).
    """
    if _SUMMARY:
        return _SUMMARY[0]
    import pandas as pd

    class Summary(pd.DataFrame):
        """A summary table (one row per coefficient) with its ``header``; printed, both."""

        _metadata = ["header"]

        @property
        def _constructor(self):
            return Summary

        def __repr__(self) -> str:
            with _pd_options():
                return str(getattr(self, "header", "")) + "\n" + self.to_string()

        __str__ = __repr__

    _SUMMARY.append(Summary)
    return Summary


def _pd_options():
    import pandas as pd

    return pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format",
                             lambda v: f"{v:.4g}")


def _terms(est) -> list[str]:
    names = getattr(est, "feature_names_in_", None)
    names = [str(n) for n in names] if names is not None else [f"x{j}" for j in range(est.n_features_in_)]
    return (["(intercept)"] if est.fit_intercept else []) + names


def _se(est, cov_type: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(coef (d, k), se_sampling (d, k), se_noise (d, k)); softmax centred across the classes."""
    from .forecast import NOISE_SE_METHODS

    mom = est.inference_
    V = covariance(mom, cov_type=cov_type, method=est.method_, settings=est.settings_)
    theta = np.asarray(est.theta_, float)
    if theta.shape[1] > 1:
        theta = theta - theta.mean(axis=1, keepdims=True)
    se_s = np.sqrt(np.maximum(np.diag(V), 0.0)).reshape(theta.shape)
    if privacy.adds_noise(est.privacy_.mu) and est.method_ in NOISE_SE_METHODS:
        se_n = np.asarray(est.fit_info_["noise_se"], float).reshape(theta.shape)
    else:
        se_n = np.zeros_like(theta)
    return theta, se_s, se_n


def withheld_notes(est, theta: np.ndarray, se_s: np.ndarray, se_n: np.ndarray) -> np.ndarray:
    """Why each coefficient's z, p and interval are withheld ("" where they are not), shape of ``theta``:
    the fit has not converged (``fit_info_["status"]``), the features failed the scale check (the
    data holder's own check, `fedgdp.api.diagnostics.check_scale`), or the noise swamps the
    coefficient (`fedgdp.api.diagnostics.swamped`).

    Parameters
    ----------
    est : FederatedGLM
        A fitted estimator.
    theta, se_s, se_n : ndarray of shape (d, k)
        The coefficients, their sampling sds and their noise sds.
    """
    from .diagnostics import swamped

    status = getattr(est, "fit_info_", {}).get("status", "converged")
    every = ([f"fit {status}"] if status != "converged" else []) + \
        (["features not standardised"] if getattr(est, "scale_warned_", False) and privacy.adds_noise(est.privacy_.mu)
         else [])           # the private defaults (clip, steps, noise) assume standardised features; mu = inf not
    swamp = swamped(theta, se_n, se_s)
    notes = np.empty(theta.shape, dtype=object)
    for idx in np.ndindex(theta.shape):
        notes[idx] = "; ".join(every + (["noise swamps it"] if swamp[idx] else []))
    return notes


def _frame(est, alpha: float, cov_type: str, withheld: str = "hide"):
    import pandas as pd
    from scipy.stats import norm

    alpha = float(number(0, 1)("alpha", alpha))
    if withheld not in WITHHELD:
        raise ValueError(f"withheld must be one of {', '.join(WITHHELD)}, got withheld={withheld!r}")
    theta, se_s, se_n = _se(est, cov_type)
    se = np.sqrt(se_s ** 2 + se_n ** 2)
    q = float(norm.ppf(1.0 - alpha / 2.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = theta / se
    notes = withheld_notes(est, theta, se_s, se_n)
    hide = (notes != "") if withheld == "hide" else np.zeros(theta.shape, bool)
    nan = np.where(hide, np.nan, 1.0)
    cols = {"coef": theta, "se": se, "z": z * nan, "p": 2.0 * norm.sf(np.abs(z)) * nan,
            "ci_low": (theta - q * se) * nan, "ci_high": (theta + q * se) * nan, "se_sampling": se_s,
            "se_noise": se_n, "note": notes}
    terms = _terms(est)
    if get_family(est.family).classes:
        classes = [c.item() if hasattr(c, "item") else c for c in est.classes_]
        index = pd.MultiIndex.from_product([classes, terms], names=["class", "term"])
        data = {k: v.T.ravel() for k, v in cols.items()}        # one block per class
    else:
        index = pd.Index(terms, name="term")
        data = {k: v[:, 0] for k, v in cols.items()}
    return pd.DataFrame(data, index=index)


def _spent(ledger, stages=None) -> float:
    """The largest client's composed mu over the ledger's releases of ``stages`` (None: all)."""
    mu = ledger.composed_mu(stages)
    return float(np.max(mu)) if np.ndim(mu) else 0.0


def _header(est, alpha: float, cov_type: str) -> str:
    rep = est.privacy_
    mom = est.inference_
    N = int(np.sum(est.client_sizes_))
    lines = [f"FederatedGLM summary: family {est.family}, method {est.method_}, m = {est.n_clients_} clients, "
             f"N = {N} rows"]
    if rep.ledger.releases and math.isfinite(rep.mu):
        total, inf = _spent(rep.ledger), _spent(rep.ledger, STAGES)
        share = privacy.share_of(inf, total)
        lines.append(f"mu spent {total:.4g} per client (target {rep.mu:g}); inference {inf:.4g} "
                     f"({share:.0%} of mu^2), estimation mu {getattr(est, 'estimation_mu_', rep.mu):.4g}")
    else:
        lines.append("mu = inf: non-private (no clipping, no noise)")
    lines.append(f"guarantee: {rep.guarantee}")
    lines.append(f"noise secret: {rep.noise_secret}")
    lines.append(f"se = sqrt(se_sampling^2 + se_noise^2); se_sampling: {cov_type} "
                 f"({'H^-1 S H^-1, HC0 sandwich' if cov_type == 'robust' else 'inverse information H^-1'}) "
                 f"from the {mom.source} moments; {int(round(100 * (1 - alpha)))}% normal intervals")
    if mom.source == "public curvature model":
        lines.append(PUBLIC_NOTE)
    elif mom.source == "private release":
        low, D, floor = floored_directions(mom)
        if low:
            lines.append(f"curvature noise-dominated in {low} of {D} directions: there the released H's eigenvalues "
                         f"are at or below its noise's scale ({floor:.4g}) and se_sampling uses that floor, so it "
                         "understates the sampling sd where the data's own curvature is smaller (more rows, a "
                         "larger mu or inference_share, or fewer features)")
    small = _small_clients_line(est)
    if small:
        lines.append(small)
    if get_family(est.family).classes:
        lines.append("coefficients centred across the classes (the identified ones: probabilities see only these)")
    if est.method_ in ("fednewton", "fednewton_certified"):
        lines.append("FedNewton: its stage 1 taken as converged on half 1 (linearised; docs/methods.md §10)")
    if math.isfinite(rep.clip_bound):
        lines.append(f"{CLIP_NOTE} = {rep.clip_bound:.4g}")
    return "\n".join(lines)


#: A client with fewer rows than this share of the mean client's gets `_small_clients_line`'s note
SMALL_CLIENT = 0.1


def _small_clients_line(est) -> str:
    """What the clients much smaller than the mean contribute, for a private fit whose releases are weighted by
    size ("" where none is): each release's noise sd is ``c / n_i`` and its weight ``n_i / N``, so every client
    adds the same noise variance to the estimate whatever its rows (sizes are public: the client column)."""
    sizes = np.asarray(est.client_sizes_, float)
    if not (est.privacy_.ledger.releases and math.isfinite(est.privacy_.mu)) or len(sizes) < 2 \
            or getattr(settings_view(getattr(est, "settings_", None)), "weights", "size") != "size":
        return ""
    small = sizes < SMALL_CLIENT * sizes.mean()
    if not small.any():
        return ""
    return (f"small clients: {int(small.sum())} of {len(sizes)} hold under {SMALL_CLIENT:g} of the mean client's rows "
            f"(smallest {int(sizes.min())}, mean {sizes.mean():.4g}); each adds as much privacy noise as any client "
            f"(its release's noise sd scales as 1/n_i, its weight as n_i) for a small share of the rows: "
            f"{small.mean():.0%} of the clients carry {sizes[small].sum() / sizes.sum():.1%} of the rows and "
            f"{small.mean():.0%} of the noise variance")


def summary(est, alpha: float = 0.05, cov_type: str = "model", withheld: str = "hide"):
    """`FederatedGLM.summary` (module docstring).

    Parameters
    ----------
    est : FederatedGLM
        A fitted estimator.
    alpha : float, default=0.05
        The intervals' level is ``1 - alpha``.
    cov_type : {"model", "robust"}, default="model"
    """
    frame = _frame(est, alpha, cov_type, withheld)
    out = summary_class()(frame)
    out.header = _header(est, alpha, cov_type) + _withheld_line(frame["note"], withheld)
    return out


def _withheld_line(notes, withheld: str) -> str:
    """The header's line naming the withheld coefficients and why ("" when none)."""
    reasons = sorted({part for n in notes if n for part in str(n).split("; ")})
    if not reasons:
        return ""
    count = int(sum(1 for n in notes if n))
    verb = "withheld (NaN)" if withheld == "hide" else "printed anyway (withheld='show')"
    return (f"\nWITHHELD: z, p and interval of {count} of {len(notes)} coefficient(s) {verb}: {'; '.join(reasons)} "
            "(the note column; summary(withheld='show') prints them)")


def conf_int(est, alpha: float = 0.05, cov_type: str = "model", withheld: str = "hide"):
    """`FederatedGLM.conf_int`: the ``ci_low`` and ``ci_high`` columns of the summary.

    Parameters
    ----------
    est : FederatedGLM
    alpha : float, default=0.05
    cov_type : {"model", "robust"}, default="model"
    """
    return _frame(est, alpha, cov_type, withheld)[["ci_low", "ci_high"]]


def summary_records(s) -> dict:
    """A summary as JSON-ready data: ``header`` (lines) and ``rows`` (one dict per coefficient).

    Parameters
    ----------
    s : pandas.DataFrame
        A `summary`.
    """
    rows = []
    for key, row in s.iterrows():
        rec = {"class": key[0], "term": key[1]} if isinstance(key, tuple) else {"term": key}
        rec.update({c: (v if c == "note" else float(v)) for c, v in row.items()})
        rows.append(rec)
    return {"header": s.header.split("\n"), "rows": rows}


def merge_ledgers(ledger, extra):
    """``ledger`` with the releases of ``extra`` (None: unchanged) appended.

    Parameters
    ----------
    ledger, extra : fedgdp.core.privacy.Ledger
    """
    if extra is None:
        return ledger
    return replace(ledger, releases=[*ledger.releases, *extra.releases])
