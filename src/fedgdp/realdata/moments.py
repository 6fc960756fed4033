"""The inference releases of a fit on matrix models (`fedgdp.api.inference`, docs/methods.md
§10), shared by the estimator and the audit (`fedgdp.audit.glm.audit_inference`).

Each client releases ``S_i = sum_j g_j g_j'`` (``g_j = x_j r_j'`` clipped to B, flattened
row-major) and ``H_i``, the sum of per-sample Hessians clipped to ``H_c = B^2``, each with
symmetric noise on its upper triangle. Sensitivities: ``sqrt(2) B^2`` for S_i,
``sqrt(2) sqrt(r) H_c`` for H_i (rank r = 1, or ``C - 1`` for softmax); the two share the
inference mu^2 equally.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..core import privacy
from .clipping import clip_residuals
from .solvers import clipped_hessian_rows

__all__ = ["STAGES", "release_plan", "client_moments", "clients_moments"]

#: The ledger's stage names of the inference releases
STAGES = ("inference: score outer products", "inference: curvature")


def _rank(k: int) -> int:
    return max(k - 1, 1)


def release_plan(B, k: int) -> tuple:
    """The inference releases as `fedgdp.core.privacy.ReleaseSpec` (one of each per client).

    Parameters
    ----------
    B : float or ndarray
        The clipping bound (``H_c = B^2``).
    k : int
        Outputs.
    """
    half = Fraction(1, 2)
    Hc = np.asarray(B, float) ** 2
    return (privacy.ReleaseSpec(STAGES[0], 1, math.sqrt(2.0) * Hc, 1.0, half),
            privacy.ReleaseSpec(STAGES[1], 1, math.sqrt(2.0) * math.sqrt(_rank(k)) * Hc, 1.0, half))


def client_moments(model, theta, X, Y, B: float) -> tuple[np.ndarray, np.ndarray]:
    """One client's ``S_i`` and ``H_i`` (d k, d k) before noise (unclipped when B = inf).

    Parameters
    ----------
    model, theta, X, Y
        The model, the public estimate (d, k), the client's design (n, d) and targets (n, k).
    B : float
        The clipping bound.
    """
    S, H = clients_moments(model, theta, X, Y, B, [len(X)])
    return S[0], H[0]


def clients_moments(model, theta, X, Y, B: float, ends) -> tuple[np.ndarray, np.ndarray]:
    """`client_moments` of clients whose rows are consecutive in X and Y (clients, d k, d k) each.

    Parameters
    ----------
    model, theta, X, Y, B
        As `client_moments`'s (X and Y all clients' rows).
    ends : sequence of int
        Each client's end row.
    """
    X = np.asarray(X, float)
    n, d = X.shape
    with np.errstate(over="ignore", invalid="ignore"):
        R = np.array(model.residuals(theta, X, Y), float).reshape(n, -1)
    k = R.shape[1]
    clip_residuals(R, privacy.row_norms(X), B, d)
    G = (X[:, :, None] * R[:, None, :]).reshape(n, d * k)
    if math.isfinite(B):
        aX, P = clipped_hessian_rows(model, theta, X, B * B)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            aX, P = X, np.array(model.mean(X @ np.asarray(theta).reshape(d, -1)), float).reshape(n, -1)
    if k == 1:                             # one output: b''(s_j) weights, one product per client
        with np.errstate(over="ignore", invalid="ignore"):
            c = model.curvature(P, np.ones_like(P))[:, 0]
    S, H, lo = np.empty((len(ends), d * k, d * k)), np.empty((len(ends), d * k, d * k)), 0
    for i, hi in enumerate(ends):
        S[i] = G[lo:hi].T @ G[lo:hi]
        if k == 1:
            H[i] = (aX[lo:hi] * c[lo:hi, None]).T @ aX[lo:hi]
        else:
            H[i] = model.hessian(theta, aX[lo:hi], P=P[lo:hi]) * (hi - lo)
        lo = hi
    return S, H
