"""The linear solves of FedNewton's step, shared by the simulation and real-data backends.

- :func:`floored_solve`  ``H_floor s = g`` with H's eigenvalues floored at tau1 (Algorithm 4 as printed).
- :func:`ridge_solve`    ``(H + tau1 I) s = g`` densely (certified FedNewton).
- :func:`cg_solve`       conjugate gradients on a matrix-free operator (the real-data ridge solve).

All keep ``||s|| <= ||g|| / tau1``, the bound FedNewton's calibration assumes
(docs/methods.md §2). Batched solves take ``H`` (..., d, d) and ``g`` (..., d).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["floored_solve", "ridge_solve", "cg_solve"]


def _diverged(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Clients (leading axes) whose H or g is not finite (a diverged run), bool (...)."""
    return ~(np.isfinite(H).all(axis=(-1, -2)) & np.isfinite(g).all(axis=-1))


def floored_solve(H: np.ndarray, g: np.ndarray, tau1: float) -> np.ndarray:
    """Solve ``H_floor s = g`` with H's eigenvalues floored at tau1 (docs/methods.md §2).

    H: (..., d, d) symmetric, g: (..., d). Returns s: (..., d), ``||s|| <= ||g||/tau1``.
    """
    bad = _diverged(H, g)
    if bad.any():   # a diverged client: keep NaN instead of failing inside LAPACK
        H = np.where(bad[..., None, None], np.eye(H.shape[-1]), H)
    lam, V = np.linalg.eigh(H)
    lam = np.maximum(lam, tau1)
    coef = np.einsum("...ji,...j->...i", V, g) / lam
    s = np.einsum("...ij,...j->...i", V, coef)
    s[bad] = np.nan
    return s


def ridge_solve(H: np.ndarray, g: np.ndarray, tau1: float) -> np.ndarray:
    """Solve ``(H + tau1 I) s = g`` (certified FedNewton).

    H: (..., d, d) symmetric PSD, g: (..., d). Returns s: (..., d); NaN for a
    client whose H or g is not finite (a diverged run).
    """
    bad = _diverged(H, g)
    A = H + tau1 * np.eye(H.shape[-1])
    if bad.any():
        A = np.where(bad[..., None, None], np.eye(H.shape[-1]), A)
        g = np.where(bad[..., None], 0.0, g)
    s = np.linalg.solve(A, g[..., None])[..., 0]
    s[bad] = np.nan
    return s


def cg_solve(apply, b: np.ndarray, *, tol: float = 1e-8, maxiter: int = 500) -> tuple[np.ndarray, int]:
    """Conjugate gradients for ``A x = b`` with A symmetric positive definite.

    ``apply(v)`` returns ``A v`` for arrays shaped like ``b``. Stops when
    ``||b - A x|| <= tol ||b||``. Returns ``(x, iterations)``. Started at 0, the
    iterates grow in norm, so a truncated solve keeps ``||x|| <= ||b|| / lambda_min(A)``.
    """
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rs = float(np.vdot(r, r))
    target = tol * math.sqrt(rs)
    if rs == 0.0:
        return x, 0
    for it in range(1, maxiter + 1):
        Ap = apply(p)
        alpha = rs / float(np.vdot(p, Ap))
        x += alpha * p
        r -= alpha * Ap
        rs_new = float(np.vdot(r, r))
        if math.sqrt(rs_new) <= target:
            return x, it
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x, maxiter
