"""Per-sample clipping on matrix models, and the real-data clipping bound.

A per-sample gradient of a matrix model is the outer product ``x_j r_j'`` (d, k) of the
row and its residual (`fedgdp.core.glm`), with Frobenius norm ``||x_j|| ||r_j||``, so
clipping it to norm B scales the residual row ``r_j`` (`clip_residuals`).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import privacy
from ..core.glm import GLM

__all__ = ["clip_residuals", "clipped_gradient", "clipped_residuals", "stacked_gradients", "clip_bound_real"]


def clipped_gradient(model: GLM, Theta, X, Y, B: float, xnorm=None) -> np.ndarray:
    """Mean (d, k) over rows of the per-sample gradients ``x_j r_j'`` clipped to norm B (inf: plain).

    Parameters
    ----------
    model, Theta, X, Y
        The model, the parameter (d, k), the rows (n, d) and targets (n, k).
    B : float
        The clipping bound.
    xnorm : ndarray or None of shape (n,)
        The row norms of X, when computed already.
    """
    return X.T @ clipped_residuals(model, Theta, X, Y, B, xnorm) / X.shape[0]


def clipped_residuals(model: GLM, Theta, X, Y, B: float, xnorm=None) -> np.ndarray:
    """The residuals (n, k) of `clipped_gradient`, each row scaled so that ``||x_j|| ||r_j||`` is clipped
    (`clip_residuals`): the per-sample gradients are ``x_j r_j'``.

    Parameters
    ----------
    model, Theta, X, Y, B, xnorm
        As `clipped_gradient`'s.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        Res = model.residuals(Theta, X, Y)
    clip_residuals(Res, privacy.row_norms(X) if xnorm is None else xnorm, B, X.shape[1])
    return Res


def clip_residuals(Res: np.ndarray, xnorm: np.ndarray, B: float, d: int) -> None:
    """Scale the residual rows in place so that ``||x_j|| ||r_j|| <= (1 - kappa) B`` (the
    margin of `fedgdp.core.privacy.clip_factors`); a non-finite per-sample norm gives zero.

    Parameters
    ----------
    Res : ndarray of shape (n, k)
        Residuals, scaled in place.
    xnorm : ndarray of shape (n,)
        Row norms of X.
    B : float
        The clipping bound.
    d : int
        Columns of X (the gradient ``x_j r_j'`` has ``d k`` numbers).
    """
    if np.isfinite(B):
        with np.errstate(over="ignore", invalid="ignore"):
            norms = xnorm * privacy.row_norms(Res)
        factor = privacy.clip_factors(norms, B, d * Res.shape[1])
        Res *= factor[:, None]
        Res[factor == 0] = 0.0          # inf * 0 and NaN * 0 are NaN: the rule says zero


def stacked_gradients(fds: list, i: int, Thetas: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
    """Client i's clipped gradients at J parameters at once (J, d, k): for softmax, from one
    product ``X [Theta_1 ... Theta_J]`` (X read once); for k = 1 one by one.

    Parameters
    ----------
    fds : list of FoldData
        J fold data on the same clients (one per mu; bound ``fds[j].bound``).
    i : int
        The client.
    Thetas : ndarray of shape (J, d, k)
        The parameters.
    rows : slice
        The client's rows to use.
    """
    fd = fds[0]
    J, d, k = Thetas.shape
    if J == 1 or k == 1:
        return np.stack([f.gradient(i, T, rows) for f, T in zip(fds, Thetas)])
    X, Y, xn = fd.design(i, rows), fd.Y[i][rows], fd.xnorm[i][rows]
    S = X @ np.concatenate(list(Thetas), axis=1)                 # (n, J k)
    for j, f in enumerate(fds):
        block = S[:, j * k:(j + 1) * k]
        with np.errstate(over="ignore", invalid="ignore"):
            Res = fd.model.mean(block) - Y
        clip_residuals(Res, xn, f.bound, d)
        block[...] = Res
    return (X.T @ S / X.shape[0]).reshape(d, J, k).transpose(1, 0, 2)


def clip_bound_real(model: GLM, X: list, Y: list, rule: dict, *, mu: float = math.inf,
                    rng=None) -> float:
    """The clipping bound on real data by `fedgdp.core.privacy.bound_of_rule`: max over clients
    of the q-quantile of per-sample gradient norms at Theta = 0, a fixed value, or the
    private quantile.

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
        The model.
    X, Y : list of ndarray
        Each client's rows and targets.
    rule : dict
        The clipping rule.
    mu : float
        The target mu (``private_quantile``).
    rng : numpy.random.Generator or None
        The histogram's noise (``private_quantile``).
    """
    def norms():
        zero = np.zeros((X[0].shape[1], model.k))
        return [privacy.row_norms(x) * privacy.row_norms(model.residuals(zero, x, y)) for x, y in zip(X, Y)]

    return privacy.bound_of_rule(rule, norms, mu=mu, rng=rng)
