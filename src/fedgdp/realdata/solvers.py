"""Real-data solvers: FedNewton's step on the models of fedgdp.core.glm and the ridge MLE of the plain fits."""
from __future__ import annotations

import numpy as np

from ..core.glm import GLM
from ..core.solvers import CG_MAXITER, CG_TOL, certified_residual_ok, cg_solve, floored_solve

__all__ = ["cg_solve", "newton_step", "ridge_fit", "ridge_grad_norm", "clipped_hessian_rows"]


def newton_step(model: GLM, Theta: np.ndarray, X1: np.ndarray, g: np.ndarray, tau1: float, *,
                solver: str = "cg", cg_tol: float = CG_TOL, cg_maxiter: int = CG_MAXITER,
                hessian_bound: float | None = None) -> np.ndarray:
    """The step s (d, k) of FedNewton's local update ``Theta - s``, ``||s|| <= ||g|| / tau1``:
    ``cg`` solves ``(H + tau1 I) s = g`` on Hessian-vector products, ``ridge`` densely,
    ``floor`` floors H's eigenvalues at tau1 (dense). Certified (``hessian_bound``): the
    ridge system on clipped per-sample Hessians; a CG solve failing its true-residual check
    is replaced by the dense solve (docs/methods.md §2, "The certified solve").

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
        The model.
    Theta : ndarray of shape (d, k)
        Where the Hessian is taken.
    X1 : ndarray of shape (n1, d)
        The rows of the Hessian (the client's half 1).
    g : ndarray of shape (d, k)
        The right-hand side (the clipped half-2 gradient).
    tau1 : float
        The eigenvalue floor / ridge.
    solver : str
        ``cg``, ``ridge`` or ``floor`` (ValueError otherwise).
    cg_tol, cg_maxiter
        ``cg``'s residual tolerance and most iterations.
    hessian_bound : float or None
        ``H_c``: clips the per-sample Hessians (certified); None: not clipped.
    """
    certified = hessian_bound is not None
    if certified:
        X1, P = model.clipped_hessian_rows(Theta, X1, hessian_bound)  # type: ignore[arg-type]
        if solver == "floor":
            solver = "ridge"
    else:
        P = model.predict(Theta, X1)                 # fixed during the solve: one product, not one per step
    if solver == "cg":
        def apply(V):
            return model.hvp_at(P, X1, V) + tau1 * V

        if not certified:
            return cg_solve(apply, g, tol=cg_tol, maxiter=cg_maxiter)[0]
        # certified: CG's own (recursive) residual to half the tolerance, so that the true
        # residual, which the proof uses and which is checked, meets cg_tol despite rounding
        with np.errstate(over="ignore", invalid="ignore"):
            s, _ = cg_solve(apply, g, tol=0.5 * cg_tol, maxiter=cg_maxiter)
        if certified_residual_ok(apply, g, s, cg_tol):
            return s
        solver = "ridge"            # the exact solve: within 0 <= cg_tol ||g|| / tau1 of itself
    H = model.hessian(Theta, X1, P=P)
    if solver == "ridge":
        return np.linalg.solve(H + tau1 * np.eye(H.shape[0]), g.ravel()).reshape(g.shape)
    if solver == "floor":
        return floored_solve(H, g.ravel(), tau1).reshape(g.shape)
    raise ValueError(f"unknown newton solver {solver!r}; use cg, ridge or floor")


#: certified FedNewton's per-sample Hessian clip: the one reference, `fedgdp.core.glm.GLM.clipped_hessian_rows`
clipped_hessian_rows = GLM.clipped_hessian_rows


# ------------------------------------------------------------- ridge MLE
def ridge_fit(model: GLM, X: np.ndarray, Y: np.ndarray, *, ridge: float, maxiter: int,
              gtol: float = 1e-8, Theta0: np.ndarray | None = None) -> np.ndarray:
    """Minimise ``loss + ridge/2 ||Theta[1:]||^2`` (intercept row free) by trust-region Newton-CG
    (scipy's ``trust-ncg``) on exact Hessian-vector products, until ``||grad||_F <= gtol``;
    strong convexity puts the penalised rows within ``gtol / ridge`` of the minimiser.

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
        The model.
    X : ndarray of shape (n, d)
        The rows (column 0 the intercept).
    Y : ndarray of shape (n, k)
        The targets.
    ridge : float
        The penalty on rows 1.. of Theta.
    maxiter, gtol
        Newton iterations at most; stop when ``||grad f||`` is at most ``gtol``.
    Theta0 : ndarray of shape (d, k), optional
        The start (default 0).
    """
    from scipy.optimize import minimize

    fun, hessp = _ridge_objective(model, X, Y, ridge)
    d, k = X.shape[1], model.k
    start = np.zeros(d * k) if Theta0 is None else Theta0.ravel()
    res = minimize(fun, start, jac=True, hessp=hessp, method="trust-ncg",
                   options={"maxiter": int(maxiter), "gtol": float(gtol)})
    return _polish(fun, hessp, res.x, gtol, max(0, int(maxiter) - int(res.nit))).reshape(d, k)


def _ridge_objective(model: GLM, X, Y, ridge: float):
    """`ridge_fit`'s objective on the flattened Theta: ``fun(v)`` -> (value, gradient) and ``hessp(v, u)``."""
    d, k = X.shape[1], model.k
    mask = np.ones((d, k))
    mask[0] = 0.0
    last = {"v": None, "P": None}

    def fun(v):
        T = v.reshape(d, k)
        pen = mask * T
        value, grad, P = model.loss_gradient(T, X, Y)
        last["v"], last["P"] = v.copy(), P
        return value + 0.5 * ridge * float(np.sum(pen * T)), (grad + ridge * pen).ravel()

    def hessp(v, u):
        if last["v"] is None or not np.array_equal(v, last["v"]):
            fun(v)
        U = u.reshape(d, k)
        return (model.hvp_at(last["P"], X, U) + ridge * mask * U).ravel()

    return fun, hessp


def ridge_grad_norm(model: GLM, X, Y, Theta: np.ndarray, *, ridge: float) -> float:
    """``||grad||_F`` of `ridge_fit`'s objective at ``Theta``: its stopping rule, checked afterwards.

    Parameters
    ----------
    model, X, Y, ridge
        As `ridge_fit`: the model, the rows (n, d), the targets (n, k), the penalty.
    Theta : ndarray of shape (d, k)
        The estimate.
    """
    return float(np.linalg.norm(_ridge_objective(model, X, Y, ridge)[0](np.ravel(Theta))[1]))


#: Newton steps at most after the trust region stops short of gtol (within maxiter).
POLISH_STEPS = 5
#: The polish's damping: keeps CG positive definite on the softmax's flat direction (adding one vector to
#: every class's column), far below the curvature of the others.
POLISH_DAMPING = 1e-10


def _polish(fun, hessp, v: np.ndarray, gtol: float, steps: int) -> np.ndarray:
    """Newton steps (CG on the Hessian + `POLISH_DAMPING`) from ``v`` while ``||grad|| > gtol``, at most
    ``steps``, each kept only if it lowers ``||grad||``. The trust region judges a step by the loss's
    decrease, which floating point cannot resolve near the minimum (scipy: "A bad approximation caused
    failure to predict improvement", ``||grad||`` stuck near 1e-10 on a loss of order 1); the gradient can."""
    g = fun(v)[1]
    for _ in range(min(POLISH_STEPS, steps)):
        norm = float(np.linalg.norm(g))
        if not norm > gtol:
            break
        step, _ = cg_solve(lambda u, at=v: hessp(at, u) + POLISH_DAMPING * u, -g, tol=1e-12, maxiter=CG_MAXITER)
        if not np.all(np.isfinite(step)):
            break
        g_new = fun(v + step)[1]
        if not float(np.linalg.norm(g_new)) < norm:
            break
        v, g = v + step, g_new
    return v
