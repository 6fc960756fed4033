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
    gradient are rescaled by ``resid_scale``. For the logistic model this turns the
    sigmoid into a single ``tanh`` pass.
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


def _tanh_inplace(a: np.ndarray) -> np.ndarray:
    return np.tanh(a, out=a)


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
    kernel=Kernel(0.5, _tanh_inplace, lambda y: 2.0 * y - 1.0, 2.0),
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


def population_min_eigenvalue(model: str, beta_true, sigma_c: float, *, n_mc: int = 400_000,
                              seed: int = 20260529) -> float:
    """Smallest eigenvalue of ``E[b''(x'beta) x x']`` for x = [1, N(0, sigma_c^2 I)].

    Monte Carlo with a fixed seed (SPEC 3, ``tau1: auto``); ``n_mc`` draws give the
    eigenvalue to about three significant digits.
    """
    beta = np.asarray(beta_true, dtype=float)
    rng = np.random.default_rng(seed)
    X = np.empty((n_mc, beta.shape[0]))
    X[:, 0] = 1.0
    X[:, 1:] = sigma_c * rng.standard_normal((n_mc, beta.shape[0] - 1))
    w = get_model(model).variance(X @ beta)
    H = (X * w[:, None]).T @ X / n_mc
    return float(np.linalg.eigvalsh(H)[0])
