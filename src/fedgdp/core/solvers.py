"""The linear solves of FedNewton's step, shared by the simulation and real-data backends.

- `floored_solve`  ``H_floor s = g`` with H's eigenvalues floored at tau1 (Algorithm 4 as printed).
- `ridge_solve`    ``(H + tau1 I) s = g`` densely (certified FedNewton).
- `cg_solve`       conjugate gradients on a matrix-free operator (the real-data ridge solve).

All keep ``||s|| <= ||g|| / tau1``, the bound FedNewton's calibration assumes. Batched
solves take ``H`` (..., d, d) and ``g`` (..., d). The certified CG solve's checks
(`check_certified_cg`, `certified_residual_ok`): docs/methods.md §2, "The certified solve".
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = ["floored_solve", "ridge_solve", "cg_solve", "certified_cg_iterations", "check_certified_cg",
           "cg_tol_floor", "certified_residual_ok", "solve_tol", "CG_TOL", "CG_MAXITER", "NEWTON_DEFAULTS"]

#: FedNewton's conjugate-gradient defaults: the residual tolerance and the iterations at most.
CG_TOL = 1e-8
CG_MAXITER = 500

#: FedNewton's default Newton solver (real data, the estimator, the audit). Read-only: copy it.
NEWTON_DEFAULTS: Mapping[str, Any] = MappingProxyType({"solver": "cg", "cg_tol": CG_TOL, "cg_maxiter": CG_MAXITER})


def solve_tol(newton: Mapping[str, Any]) -> float:
    """The Newton solve's error tolerance a certified sensitivity carries: ``cg_tol`` for the CG
    solver, 0 for the exact (dense) solves.

    Parameters
    ----------
    newton : mapping
        The solver's settings (``solver``, ``cg_tol``, ``cg_maxiter``; `NEWTON_DEFAULTS`).
    """
    return float(newton["cg_tol"]) if newton["solver"] == "cg" else 0.0


def _diverged(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Clients (leading axes) whose H or g is not finite (a diverged run), bool (...)."""
    return ~(np.isfinite(H).all(axis=(-1, -2)) & np.isfinite(g).all(axis=-1))


def floored_solve(H: np.ndarray, g: np.ndarray, tau1: float) -> np.ndarray:
    """Solve ``H_floor s = g`` with H's eigenvalues floored at tau1: s (..., d), ``||s|| <= ||g||/tau1``,
    NaN for a client whose H or g is not finite.

    Parameters
    ----------
    H : ndarray of shape (..., d, d)
        Symmetric matrices.
    g : ndarray of shape (..., d)
        Right-hand sides.
    tau1 : float
        The eigenvalue floor.
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
    """Solve ``(H + tau1 I) s = g`` (certified FedNewton): s (..., d), NaN for a client whose H or g
    is not finite.

    Parameters
    ----------
    H : ndarray of shape (..., d, d)
        Symmetric PSD matrices.
    g : ndarray of shape (..., d)
        Right-hand sides.
    tau1 : float
        The ridge.
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
    """Conjugate gradients for ``A x = b``, A symmetric positive definite, from 0 until
    ``||b - A x|| <= tol ||b||``: ``(x, iterations)``, x of b's shape (NaN when a curvature ``p' A p`` is not
    positive and finite), 0 iterations when b is 0. A truncated solve keeps ``||x|| <= ||b|| / lambda_min(A)``.

    Parameters
    ----------
    apply : callable
        ``apply(v) -> A v`` for arrays shaped like ``b``.
    b : ndarray
        The right-hand side, any shape (e.g. (d, k)).
    tol : float
        Relative residual at which to stop.
    maxiter : int
        The most iterations.
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
        pAp = float(np.vdot(p, Ap))
        if not (0.0 < pAp < math.inf):      # not positive definite in floating point (overflowed data)
            return np.full_like(b, np.nan), it
        alpha = rs / pAp
        x += alpha * p
        r -= alpha * Ap
        rs_new = float(np.vdot(r, r))
        if math.sqrt(rs_new) <= target:
            return x, it
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x, maxiter


# ------------------------------------------------------------ certified CG
def certified_cg_iterations(tol: float, hessian_clip: float) -> int:
    """Iterations (at least 1) after which exact-arithmetic CG on ``A = H + tau1 I`` meets
    ``||b - A x|| <= tol ||b||`` for every ``0 <= H <= hessian_clip * tau1``: the Chebyshev
    bound ``||r_k|| <= 2 sqrt(kappa) rho^k ||b||``, ``kappa = 1 + hessian_clip``,
    ``rho = (sqrt(kappa) - 1) / (sqrt(kappa) + 1)``.

    Parameters
    ----------
    tol : float
        The relative residual, in (0, 1).
    hessian_clip : float
        The bound of H as a multiple of tau1.
    """
    root = math.sqrt(1.0 + float(hessian_clip))
    rho = (root - 1.0) / (root + 1.0)
    return max(1, math.ceil(math.log(2.0 * root / tol) / math.log(1.0 / rho)))


def cg_tol_floor(hessian_clip: float) -> float:
    """The smallest ``cg_tol`` certified FedNewton accepts, ``2^-40 (1 + hessian_clip)``: below
    it float64's true residual cannot be checked reliably (docs/methods.md §2).

    Parameters
    ----------
    hessian_clip : float
        The per-sample Hessian clip as a multiple of tau1.
    """
    return 2.0 ** -40 * (1.0 + float(hessian_clip))


def check_certified_cg(cg_tol, cg_maxiter, hessian_clip) -> None:
    """Refuse (ValueError, naming the setting and its value) CG settings that certified FedNewton's proof does
    not cover: ``cg_tol`` outside ``[cg_tol_floor(hessian_clip), 1)`` or ``cg_maxiter`` below
    `certified_cg_iterations`.

    Parameters
    ----------
    cg_tol : float
        CG's relative residual (``newton.cg_tol``).
    cg_maxiter : int
        CG's most iterations (``newton.cg_maxiter``).
    hessian_clip : float
        The per-sample Hessian clip as a multiple of tau1.
    """
    tol, floor = float(cg_tol), cg_tol_floor(hessian_clip)
    if not (floor <= tol < 1.0):
        raise ValueError(f"certified FedNewton needs newton.cg_tol in [{floor:.3g}, 1) (below, float64 CG cannot "
                         f"meet it reliably at hessian_clip={float(hessian_clip):g}; above, its error 2 cg_tol B / "
                         f"tau1 is not small): got newton.cg_tol={cg_tol!r}")
    need = certified_cg_iterations(tol, hessian_clip)
    if int(cg_maxiter) < need:
        raise ValueError(f"certified FedNewton needs newton.cg_maxiter >= {need} (CG's bound to reach cg_tol={tol:g} "
                         f"with hessian_clip={float(hessian_clip):g}); got newton.cg_maxiter={cg_maxiter!r}")


def certified_residual_ok(apply, b: np.ndarray, x: np.ndarray, tol: float) -> bool:
    """Whether the true residual ``||b - A x|| <= tol ||b||`` holds and is finite (the bound
    certified FedNewton's recorded sensitivity rests on).

    Parameters
    ----------
    apply : callable
        ``apply(v) -> A v``.
    b : ndarray
        The right-hand side.
    x : ndarray
        The solve's result, b's shape.
    tol : float
        The relative residual bound ``cg_tol``.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        res = float(np.linalg.norm(b - apply(x)))
    return bool(res <= tol * float(np.linalg.norm(b)))
