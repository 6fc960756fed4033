"""Generalised linear models with canonical link: loss, gradients, Hessians.

Conventions
-----------
Every function is batched over leading axes and follows one layout:

- ``X``: design, shape ``(..., n, d)`` (samples, then features); the first column
  is the intercept (paper section 4.1).
- ``y``: responses, shape ``(..., n)``.
- ``theta``: parameters, shape ``(..., d)``; it broadcasts against ``X[..., 0, :]``.
- ``eta = X @ theta``: linear predictor, shape ``(..., n)``.

The loss is the negative log-likelihood per observation, rho(x, y; theta) =
b(x'theta) - y x'theta with b the cumulant function, so the per-sample gradient is
``(b'(eta) - y) x`` (a scalar residual times ``x``, which is what makes clipping
cheap, see :mod:`fedgdp.privacy`) and the Hessian is ``b''(eta) x x'``.

The vectorised estimators (:mod:`fedgdp.estimators`) use a features-first layout
``(groups, d, samples)`` for speed; :meth:`GLM.kernel` describes the arithmetic
they need in that layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["GLM", "LOGISTIC", "POISSON", "MODELS", "get_model"]


def _sigmoid(eta: np.ndarray) -> np.ndarray:
    # 0.5 * (1 + tanh(eta / 2)) is exact and overflow free
    return 0.5 + 0.5 * np.tanh(0.5 * eta)


def _log1pexp(eta: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, eta)


@dataclass(frozen=True)
class Kernel:
    """Arithmetic of the fast residual kernel in a scaled parameterisation.

    The vectorised code computes ``s = inv(theta_scale * eta) - y_transform(y)``,
    which equals ``resid_scale * (b'(eta) - y)``; clipping bounds and the final
    gradient are rescaled by ``resid_scale``. For the logistic model
    ``theta_scale = -1`` turns the sigmoid into ``1 / (1 + exp(a))`` evaluated in
    place: numpy's vectorised ``exp`` plus two cheap passes beat ``tanh`` and
    ``scipy.special.expit`` (``exp`` overflows to inf for very negative eta, which
    gives the correct limit 0).
    """

    theta_scale: float
    inv_inplace: Callable[[np.ndarray], np.ndarray]
    y_transform: Callable[[np.ndarray], np.ndarray]
    resid_scale: float


@dataclass(frozen=True)
class GLM:
    """A GLM with canonical link, defined by its cumulant b and two derivatives."""

    name: str
    cumulant: Callable[[np.ndarray], np.ndarray]
    mean: Callable[[np.ndarray], np.ndarray]
    variance: Callable[[np.ndarray], np.ndarray]
    kernel: Kernel
    sample: Callable[[np.random.Generator, np.ndarray], np.ndarray]

    def loss(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Mean negative log-likelihood (up to terms free of theta), shape ``(...)``."""
        eta = np.einsum("...nd,...d->...n", X, theta)
        return np.mean(self.cumulant(eta) - y * eta, axis=-1)

    def residuals(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``b'(x'theta) - y``, shape ``(..., n)``."""
        eta = np.einsum("...nd,...d->...n", X, theta)
        return self.mean(eta) - y

    def per_sample_gradients(self, theta, X, y) -> np.ndarray:
        """Gradient of each observation's loss, shape ``(..., n, d)``."""
        return self.residuals(theta, X, y)[..., None] * X

    def gradient(self, theta, X, y) -> np.ndarray:
        """Gradient of :meth:`loss`, shape ``(..., d)``."""
        return np.mean(self.per_sample_gradients(theta, X, y), axis=-2)

    def hessian(self, theta, X) -> np.ndarray:
        """Hessian of :meth:`loss`, ``mean_j b''(eta_j) x_j x_j'``, shape ``(..., d, d)``."""
        eta = np.einsum("...nd,...d->...n", X, theta)
        w = self.variance(eta)
        return np.einsum("...n,...nd,...ne->...de", w, X, X) / X.shape[-2]


def _sigmoid_of_negative_inplace(a: np.ndarray) -> np.ndarray:
    """``a <- 1 / (1 + exp(a))``, i.e. sigmoid(-a), in place."""
    with np.errstate(over="ignore"):
        np.exp(a, out=a)
    a += 1.0
    return np.divide(1.0, a, out=a)


def _exp_inplace(a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(a, out=a)


def _sample_bernoulli(rng: np.random.Generator, eta: np.ndarray) -> np.ndarray:
    return (rng.random(eta.shape) < _sigmoid(eta)).astype(np.float64)


def _sample_poisson(rng: np.random.Generator, eta: np.ndarray) -> np.ndarray:
    return rng.poisson(np.exp(eta)).astype(np.float64)


LOGISTIC = GLM(
    name="logistic",
    cumulant=_log1pexp,
    mean=_sigmoid,
    variance=lambda eta: _sigmoid(eta) * (1.0 - _sigmoid(eta)),
    kernel=Kernel(-1.0, _sigmoid_of_negative_inplace, lambda y: y, 1.0),
    sample=_sample_bernoulli,
)

POISSON = GLM(
    name="poisson",
    cumulant=np.exp,
    mean=np.exp,
    variance=np.exp,
    kernel=Kernel(1.0, _exp_inplace, lambda y: y, 1.0),
    sample=_sample_poisson,
)

MODELS: dict[str, GLM] = {m.name: m for m in (LOGISTIC, POISSON)}


def get_model(name: str) -> GLM:
    """Look up a model by name (``logistic`` or ``poisson``)."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}") from None


def population_hessian(model: str, beta_true, sigma_c: float, *, nodes: int = 80) -> np.ndarray:
    """``E[b''(x'beta) x x']`` for ``x = [1, z]``, ``z ~ N(0, sigma_c^2 I)``, shape (p, p).

    Exact up to quadrature error: with ``s = ||beta_z||``, ``u = beta_z / s`` and
    ``t = u'z / sigma_c ~ N(0, 1)``, the weight depends on t alone, so
    ``a_k = E[b''(beta_0 + sigma_c s t) t^k]`` (Gauss-Hermite, ``nodes`` points) give
    ``H = [[a0, sigma_c a1 u'], [sigma_c a1 u, sigma_c^2 (a0 (I - uu') + a2 uu')]]``.
    """
    beta = np.asarray(beta_true, dtype=float)
    p = beta.shape[0]
    s = float(np.linalg.norm(beta[1:]))
    u = beta[1:] / s if s > 0 else np.eye(p - 1)[0]
    t, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / np.sqrt(2 * np.pi)
    v = get_model(model).variance(beta[0] + sigma_c * s * t)
    a0, a1, a2 = (np.sum(w * v * t ** k) for k in range(3))
    H = np.empty((p, p))
    H[0, 0] = a0
    H[0, 1:] = H[1:, 0] = sigma_c * a1 * u
    uu = np.outer(u, u)
    H[1:, 1:] = sigma_c ** 2 * (a0 * (np.eye(p - 1) - uu) + a2 * uu)
    return H


def population_min_eigenvalue(model: str, beta_true, sigma_c: float) -> float:
    """Smallest eigenvalue of :func:`population_hessian` (docs/methods.md §2, ``tau1: auto``).

    A fixed-seed Monte Carlo estimate would do; the one-dimensional quadrature computes
    the same expectation without Monte Carlo error (tests compare the two).
    """
    return float(np.linalg.eigvalsh(population_hessian(model, beta_true, sigma_c))[0])


# ==========================================================================
# Models with a parameter matrix: binary and multinomial (softmax) logistic
# regression for the real-data study (paper section 5.1, docs/methods.md §5).
#
# Conventions (these models only)
# -------------------------------
# - ``X``: design, shape ``(n, d)``, intercept first; one client at a time.
# - ``Y``: targets, shape ``(n, k)``: ``k = 1`` (binary, y in {0, 1}) or one-hot
#   rows (``k = C`` classes); :meth:`MatrixGLM.targets` builds it from labels.
# - ``Theta``: parameters, shape ``(d, k)``; ``S = X @ Theta`` are the scores.
# - ``P``: fitted probabilities, shape ``(n, k)``; residuals ``Res = P - Y``.
#
# The per-sample gradient is the outer product ``x_j r_j'`` (``d x k``), so its
# Frobenius norm is ``||x_j|| ||r_j||`` and clipping it is scaling ``r_j``.
# Flattened parameters (for Hessians and linear solves) use row-major order of
# ``(d, k)``: index ``a * k + c``.
# ==========================================================================
def _logsumexp_rows(S: np.ndarray) -> np.ndarray:
    top = S.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(S - top).sum(axis=1, keepdims=True)))[:, 0]


#: Designs with more rows are processed in blocks of ROW_BLOCK rows, so that each
#: block is read from memory once for both products (X V, then X' C): 26% faster
#: Hessian-vector products for the pooled MNIST fit (56,000 x 785, block 256).
ROW_BLOCK, ROW_BLOCK_MIN = 256, 4096


def _row_blocks(n: int):
    return (slice(s, min(s + ROW_BLOCK, n)) for s in range(0, n, ROW_BLOCK))


class MatrixGLM:
    """Common interface of :data:`BINARY_LOGISTIC` and :class:`Multinomial`."""

    name = ""
    k = 1

    def targets(self, labels: np.ndarray) -> np.ndarray:
        """Target matrix ``Y`` (n, k) from labels (0/1, or class indices)."""
        raise NotImplementedError

    def probabilities(self, Theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Fitted probabilities ``P`` (n, k)."""
        return self.probabilities_from_scores(X @ Theta)

    def probabilities_from_scores(self, S: np.ndarray) -> np.ndarray:
        """``P`` (n, k) from the scores ``S = X Theta`` (may overwrite S)."""
        raise NotImplementedError

    def loss(self, Theta, X, Y) -> float:
        """Mean negative log-likelihood."""
        raise NotImplementedError

    def _curvature(self, P: np.ndarray, A: np.ndarray) -> np.ndarray:
        """Per-sample Hessian of the loss in the scores applied to rows of A (n, k)."""
        raise NotImplementedError

    def curvature_bound(self, P: np.ndarray) -> np.ndarray:
        """An upper bound on the operator norm of each per-sample Hessian in the
        scores, shape (n,) (binary: ``p(1-p)``; softmax: ``max_c p_c``, since
        ``diag(p) - p p'`` is PSD and below ``diag(p)``)."""
        raise NotImplementedError

    def hessian_scale(self, Theta, X, bound: float) -> np.ndarray:
        """Per-sample factors ``min(1, H_c / (c_j ||x_j||^2))``, shape (n,), that clip
        every per-sample Hessian (``c_j`` from :meth:`curvature_bound`) to operator
        norm at most ``H_c = bound`` (certified FedNewton)."""
        h = self.curvature_bound(self.probabilities(Theta, X)) * np.einsum("nd,nd->n", X, X)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(h > bound, bound / h, 1.0)

    def _loss_probabilities(self, S: np.ndarray, Y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean negative log-likelihood and ``P`` from the scores ``S = X Theta`` (n, k)."""
        raise NotImplementedError

    def loss_gradient(self, Theta, X, Y) -> tuple[float, np.ndarray, np.ndarray]:
        """:meth:`loss`, :meth:`gradient` (d, k) and ``P`` (n, k) from one product
        ``X @ Theta`` (the same arithmetic as the separate calls; for n above
        :data:`ROW_BLOCK_MIN` by blocks of rows, which reassociates the sums)."""
        n = X.shape[0]
        if n <= ROW_BLOCK_MIN:
            value, P = self._loss_probabilities(X @ Theta, Y)
            return value, X.T @ (P - Y) / n, P
        P = np.empty((n, Theta.shape[1]))
        total, grad = 0.0, np.zeros(Theta.shape)
        for rows in _row_blocks(n):
            Xb = X[rows]
            value, P[rows] = self._loss_probabilities(Xb @ Theta, Y[rows])
            total += value * Xb.shape[0]
            grad += Xb.T @ (P[rows] - Y[rows])
        return total / n, grad / n, P

    def residuals(self, Theta, X, Y) -> np.ndarray:
        """``P - Y``, shape (n, k)."""
        return self.probabilities(Theta, X) - Y

    def gradient(self, Theta, X, Y) -> np.ndarray:
        """Gradient of :meth:`loss`, ``X' (P - Y) / n``, shape (d, k)."""
        return X.T @ self.residuals(Theta, X, Y) / X.shape[0]

    def per_sample_gradients(self, Theta, X, Y) -> np.ndarray:
        """Gradient of each observation's loss, shape (n, d, k) (tests, small n)."""
        return X[:, :, None] * self.residuals(Theta, X, Y)[:, None, :]

    def hvp(self, Theta, X, V, scale: np.ndarray | None = None) -> np.ndarray:
        """Hessian of :meth:`loss` at Theta applied to V (d, k), without forming it.

        ``scale`` (n,): per-sample Hessian weights (:meth:`hessian_scale`), or None.
        """
        return self.hvp_at(self.probabilities(Theta, X), X, V, scale)

    def hvp_at(self, P, X, V, scale: np.ndarray | None = None) -> np.ndarray:
        """:meth:`hvp` given the fitted probabilities ``P`` (n, k) at Theta (by blocks
        of rows for n above :data:`ROW_BLOCK_MIN`)."""
        n = X.shape[0]
        if n <= ROW_BLOCK_MIN:
            return self._hvp_rows(P, X, V, scale) / n
        out = np.zeros(V.shape)
        for rows in _row_blocks(n):
            out += self._hvp_rows(P[rows], X[rows], V, None if scale is None else scale[rows])
        return out / n

    def _hvp_rows(self, P, X, V, scale):
        C = self._curvature(P, X @ V)
        if scale is not None:
            C *= scale[:, None]
        return X.T @ C

    def hessian(self, Theta, X, scale: np.ndarray | None = None) -> np.ndarray:
        """Dense Hessian of :meth:`loss`, shape (d k, d k), row-major flattening
        (``scale``: per-sample weights as in :meth:`hvp`)."""
        d, k = Theta.shape
        P = self.probabilities(Theta, X)
        if scale is not None:
            X = X * np.sqrt(scale)[:, None]
        H = np.empty((d, k, d, k))
        for c in range(k):
            E = np.zeros((X.shape[0], k))
            E[:, c] = 1.0
            W = self._curvature(P, E)                          # (n, k): column c of each W_j
            H[:, :, :, c] = np.einsum("na,nc,nb->acb", X, W, X) / X.shape[0]
        return H.reshape(d * k, d * k)

    def predict_scores(self, Theta, X) -> np.ndarray:
        """Scores used for ranking (binary: P(y = 1)) or classification (argmax)."""
        return self.probabilities(Theta, X)


class _BinaryLogistic(MatrixGLM):
    """Logistic regression with ``Theta`` of shape (d, 1); same loss as :data:`LOGISTIC`."""

    name = "binary"
    k = 1

    def targets(self, labels):
        y = np.asarray(labels, dtype=float)
        return y.reshape(-1, 1)

    def probabilities_from_scores(self, S):
        return _sigmoid(S)

    def loss(self, Theta, X, Y):
        S = X @ Theta
        return float(np.mean(_log1pexp(S) - Y * S))

    def _loss_probabilities(self, S, Y):
        return float(np.mean(_log1pexp(S) - Y * S)), _sigmoid(S)

    def _curvature(self, P, A):
        return P * (1.0 - P) * A

    def curvature_bound(self, P):
        return P[:, 0] * (1.0 - P[:, 0])


class Multinomial(MatrixGLM):
    """Softmax regression over ``n_classes`` classes with the full (d, C) parameter.

    The parameterisation is redundant (adding one vector to every column leaves P
    unchanged), so the Hessian is singular along those directions; the methods
    that solve with it floor or ridge it (docs/methods.md §2, §5).
    """

    name = "multiclass"

    def __init__(self, n_classes: int = 10):
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got n_classes={n_classes}")
        self.k = int(n_classes)

    def targets(self, labels):
        labels = np.asarray(labels, dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= self.k):
            raise ValueError(f"labels must lie in 0..{self.k - 1}, got {labels.min()}..{labels.max()}")
        Y = np.zeros((labels.shape[0], self.k))
        Y[np.arange(labels.shape[0]), labels] = 1.0
        return Y

    def probabilities_from_scores(self, S):
        S -= S.max(axis=1, keepdims=True)
        np.exp(S, out=S)
        S /= S.sum(axis=1, keepdims=True)
        return S

    def loss(self, Theta, X, Y):
        S = X @ Theta
        return float(np.mean(_logsumexp_rows(S) - np.sum(Y * S, axis=1)))

    def _loss_probabilities(self, S, Y):
        # the arithmetic of loss() and probabilities(), sharing max and exp
        top = S.max(axis=1, keepdims=True)
        E = np.exp(S - top)
        total = E.sum(axis=1, keepdims=True)
        value = float(np.mean((top + np.log(total))[:, 0] - np.sum(Y * S, axis=1)))
        E /= total
        return value, E

    def _curvature(self, P, A):
        # (diag(p) - p p') a, row by row
        PA = P * A
        return PA - P * PA.sum(axis=1, keepdims=True)

    def curvature_bound(self, P):
        return P.max(axis=1)


BINARY_LOGISTIC = _BinaryLogistic()


def matrix_model(task: str, n_classes: int = 10) -> MatrixGLM:
    """The model of a real-data task: ``binary`` or ``multiclass``."""
    if task == "binary":
        return BINARY_LOGISTIC
    if task == "multiclass":
        return Multinomial(n_classes)
    raise ValueError(f"unknown task {task!r}; choose 'binary' or 'multiclass'")


__all__ += ["MatrixGLM", "Multinomial", "BINARY_LOGISTIC", "matrix_model"]
