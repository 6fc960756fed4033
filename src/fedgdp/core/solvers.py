"""The linear solves of FedNewton's step, shared by the simulation and real-data backends.

- `floored_solve`  ``H_floor s = g`` with H's eigenvalues floored at tau1 (Algorithm 4 as printed).
- `ridge_solve`    ``(H + tau1 I) s = g`` densely (certified FedNewton).
- `cg_solve`       conjugate gradients on a matrix-free operator (the real-data ridge solve).

All keep ``||s|| <= ||g|| / tau1``, the bound FedNewton's calibration assumes
(docs/methods.md §2). Batched solves take ``H`` (..., d, d) and ``g`` (..., d).

Certified FedNewton's CG solve (docs/methods.md §2, "The certified solve"): a truncated
CG solve is not ``(1/tau1)``-Lipschitz in g, so the certified mode records the exact
solve's sensitivity plus ``2 cg_tol B / tau1`` and checks the true residual
``||g - A s|| <= cg_tol ||g||`` of every solve (`certified_residual_ok`); a solve
that fails the check is replaced by the exact (dense) ridge solve, so no data set is
refused (`fedgdp.realdata.solvers.newton_step`); `check_certified_cg` refuses
settings the proof does not cover, before any data are read.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = ["floored_solve", "ridge_solve", "cg_solve", "certified_cg_iterations", "check_certified_cg",
           "cg_tol_floor", "certified_residual_ok", "CG_TOL", "CG_MAXITER", "NEWTON_DEFAULTS"]

#: FedNewton's conjugate-gradient defaults: the residual tolerance and the iterations at most.
CG_TOL = 1e-8
CG_MAXITER = 500

#: FedNewton's default Newton solver (real data, the estimator, the audit). Read-only: copy it.
NEWTON_DEFAULTS: Mapping[str, Any] = MappingProxyType({"solver": "cg", "cg_tol": CG_TOL, "cg_maxiter": CG_MAXITER})


def _diverged(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Clients (leading axes) whose H or g is not finite (a diverged run), bool (...)."""
    return ~(np.isfinite(H).all(axis=(-1, -2)) & np.isfinite(g).all(axis=-1))


def floored_solve(H: np.ndarray, g: np.ndarray, tau1: float) -> np.ndarray:
    """Solve ``H_floor s = g`` with H's eigenvalues floored at tau1 (docs/methods.md §2).

    H: (..., d, d) symmetric, g: (..., d). Returns s: (..., d), ``||s|| <= ||g||/tau1``.

    Parameters
    ----------
    H : ndarray of shape (..., d, d)
        Symmetric matrices.
    g : ndarray of shape (..., d)
        Right-hand sides.
    tau1 : float
        The eigenvalue floor.

    Returns
    -------
    ndarray of shape (..., d)
        The solutions ``s``; NaN for a client whose H or g is not finite.
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

    Parameters
    ----------
    H : ndarray of shape (..., d, d)
        Symmetric PSD matrices.
    g : ndarray of shape (..., d)
        Right-hand sides.
    tau1 : float
        The ridge.

    Returns
    -------
    ndarray of shape (..., d)
        The solutions ``s``.
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
    ``||b - A x|| <= tol ||b||``. Returns ``(x, iterations)``; x is NaN when a curvature
    ``p' A p`` is not positive and finite (overflowed data: never released). Started at 0, the
    iterates grow in norm, so a truncated solve keeps ``||x|| <= ||b|| / lambda_min(A)``.

    Parameters
    ----------
    apply : callable
        ``apply(v) -> A v``.
    b : ndarray
        The right-hand side, any shape (e.g. (d, k)).
    tol : float
        Relative residual at which to stop.
    maxiter : int
        The most iterations.

    Returns
    -------
    x : ndarray
        The solution, b's shape (NaN on a non-positive curvature).
    iterations : int
        Iterations used (0 when b is 0).
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
    """Iterations after which exact-arithmetic CG on ``A = H + tau1 I`` meets
    ``||b - A x|| <= tol ||b||`` for every H with ``0 <= H <= hessian_clip * tau1``.

    A's condition number is at most ``kappa = 1 + hessian_clip``, and CG started at 0
    satisfies ``||r_k|| <= 2 sqrt(kappa) rho^k ||b||`` with
    ``rho = (sqrt(kappa) - 1) / (sqrt(kappa) + 1)`` (the Chebyshev bound on the A-norm
    error, ``||r|| <= sqrt(lambda_max) ||e||_A`` and ``||e_0||_A <= ||b|| / sqrt(lambda_min)``).

    Parameters
    ----------
    tol : float
        The relative residual, in (0, 1).
    hessian_clip : float
        The bound of H as a multiple of tau1.

    Returns
    -------
    int
        The iterations, at least 1.
    """
    root = math.sqrt(1.0 + float(hessian_clip))
    rho = (root - 1.0) / (root + 1.0)
    return max(1, math.ceil(math.log(2.0 * root / tol) / math.log(1.0 / rho)))


def cg_tol_floor(hessian_clip: float) -> float:
    """The smallest ``cg_tol`` certified FedNewton accepts: ``2^-40 (1 + hessian_clip)``.

    The true residual ``g - A s`` is computed in float64 with an error of about
    ``2^-53 (||g|| + ||A|| ||s||) <= 2^-53 (1 + kappa) ||g||`` times a factor that grows
    with the dimension (``kappa = 1 + hessian_clip``), so a tolerance within a few thousand
    times ``2^-53 kappa`` of it cannot be met reliably: ``cg_tol = 2e-16`` passed the check
    on some data and not on a neighbour. The floor is ``2^13 2^-53 kappa`` (4.5e-12 at
    ``hessian_clip = 4``); a solve that still misses the tolerance falls back to the exact
    solve (docs/methods.md §2).

    Parameters
    ----------
    hessian_clip : float
        The per-sample Hessian clip as a multiple of tau1.

    Returns
    -------
    float
        The floor.
    """
    return 2.0 ** -40 * (1.0 + float(hessian_clip))


def check_certified_cg(cg_tol, cg_maxiter, hessian_clip) -> None:
    """Refuse CG settings that certified FedNewton's proof does not cover: ``cg_tol``
    must lie in ``[cg_tol_floor(hessian_clip), 1)`` (`cg_tol_floor`; the recorded
    sensitivity adds ``2 cg_tol B / tau1``) and ``cg_maxiter`` must allow
    `certified_cg_iterations` iterations (the exact-arithmetic bound; the true
    residual is still checked at every solve).

    Parameters
    ----------
    cg_tol : float
        CG's relative residual (``newton.cg_tol``).
    cg_maxiter : int
        CG's most iterations (``newton.cg_maxiter``).
    hessian_clip : float
        The per-sample Hessian clip as a multiple of tau1.

    Raises
    ------
    ValueError
        Naming the setting and its value.
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
    """Whether the true residual ``||b - A x|| <= tol ||b||`` (certified FedNewton: the
    bound its recorded sensitivity rests on). False also when x or the residual is not
    finite (a CG that overflowed).

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

    Returns
    -------
    bool
        True when the bound holds.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        res = float(np.linalg.norm(b - apply(x)))
    return bool(res <= tol * float(np.linalg.norm(b)))
