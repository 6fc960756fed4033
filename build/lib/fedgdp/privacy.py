"""mu-GDP privacy: clipping, the clipping-bound rule, noise calibration, the ledger.

Everything here follows SPEC 3 and the paper's sections 2.2-3:

- Per-sample clipping ``clip_B(g) = g min(1, B/||g||)``. For a canonical GLM the
  per-sample gradient is ``r_j x_j``, so clipping it is clipping the scalar residual
  ``r_j`` to ``[-B/||x_j||, B/||x_j||]`` (what the fast estimators do).
- A client's average of n clipped gradients has L2 sensitivity ``2B/n``
  (replace-one neighbours); a Gaussian release with sensitivity Delta and noise sd
  sigma is ``Delta/sigma``-GDP and k releases compose to ``sqrt(sum mu_j^2)``-GDP
  (Dong, Roth & Su 2022, Corollary 2).
- ``mu = inf`` means non-private: no clipping and no noise.

The clipping bound of the simulations (paper section 4.1) is data-driven: the q-th
quantile of each client's per-sample gradient norms at theta = 0, maximised over
clients. It uses the clients' data and so leaks a little privacy; the paper (and this
package) ignore that leak in the guarantee, as stated in the docs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "clip_rows", "clip_bound", "clip_bound_reference", "Release", "Ledger",
    "sigma_fedsgd", "sigma_fedavg", "sigma_fedhybrid", "sigma_fednewton",
    "newton_sensitivity", "gdp_delta", "gdp_epsilon", "gdp_mu",
]


def clip_rows(G: np.ndarray, B: float) -> np.ndarray:
    """Clip each row of ``G`` (shape ``(n, d)``) to L2 norm at most ``B``."""
    if not np.isfinite(B):
        return G
    norms = np.linalg.norm(G, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(norms > B, B / norms, 1.0)
    return G * factor


def _client_quantiles(values: np.ndarray, sizes: np.ndarray, q: float) -> np.ndarray:
    """q-quantile (numpy's default 'linear' rule) of each contiguous client segment."""
    m, L = sizes.shape[0], int(sizes.max())
    table = np.full((m, L), np.inf)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    col = np.arange(values.shape[0]) - np.repeat(start, sizes)
    table[np.repeat(np.arange(m), sizes), col] = values
    table.sort(axis=1)
    pos = (sizes - 1) * q
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, sizes - 1)
    rows = np.arange(m)
    a, b = table[rows, lo], table[rows, hi]
    return a + (b - a) * (pos - lo)


def clip_bound(glm, rep, rule: dict) -> float:
    """The clipping bound B of one replicate (SPEC 3).

    Parameters
    ----------
    glm : fedgdp.glm.GLM
    rep : fedgdp.simulate.Replicate
    rule : dict
        ``{"rule": "quantile", "q": 0.9}``: max over clients of the q-quantile of the
        per-sample gradient norms at theta = 0; ``{"rule": "fixed", "value": B}``.
    """
    if rule["rule"] == "fixed":
        return float(rule["value"])
    norms = np.abs(glm.mean(np.zeros(1))[0] - rep.y) * np.linalg.norm(rep.X, axis=1)
    return float(_client_quantiles(norms, rep.sizes, rule["q"]).max())


def clip_bound_reference(glm, rep, rule: dict) -> float:
    """Loop version of :func:`clip_bound` (test oracle)."""
    if rule["rule"] == "fixed":
        return float(rule["value"])
    d = rep.X.shape[1]
    per_client = []
    for i in range(rep.sizes.shape[0]):
        Xi, yi = rep.client(i)
        G = glm.per_sample_gradients(np.zeros(d), Xi, yi)
        per_client.append(np.quantile(np.linalg.norm(G, axis=1), rule["q"]))
    return float(max(per_client))


# ------------------------------------------------------------------ calibration
# Noise sds of SPEC 3's table. ``n`` is the client's sample size (array or float),
# ``B`` the clipping bound. Each returns the sd of ONE release.

def sigma_fedsgd(*, B, n, mu, K):
    """FedSGD (Algorithm 1): ``2 B sqrt(K) / (mu n)`` per noisy gradient."""
    return 2.0 * B * math.sqrt(K) / (mu * n)


def sigma_fedavg(*, B, n, mu, eta, R, K):
    """FedAvg (Algorithm 3): ``2 B eta sqrt(R K) / (mu n)`` per noisy local step."""
    return 2.0 * B * eta * math.sqrt(R * K) / (mu * n)


def sigma_fedhybrid(*, B, n, mu, eta1, K1, K2):
    """FedHybrid (Algorithm 2): stage-1 and stage-2 sds, each spending mu/sqrt(2)."""
    return (2.0 * B * eta1 * math.sqrt(2 * K1) / (mu * n),
            2.0 * B * math.sqrt(2 * K2) / (mu * n))


def sigma_fednewton(*, B, n, mu, eta, K, tau1):
    """FedNewton (Algorithm 4): stage-1 sd ``4 B eta sqrt(2K)/(mu n)`` and Newton sd
    ``2 B_new/(mu n)`` with ``B_new = 4 sqrt(2) B / tau1``."""
    b_new = 4.0 * math.sqrt(2.0) * B / tau1
    return 4.0 * B * eta * math.sqrt(2 * K) / (mu * n), 2.0 * b_new / (mu * n)


def newton_sensitivity(*, B, n, tau1):
    """Sensitivity the Newton release's calibration assumes: ``8 B / (tau1 n)``.

    Twice the gradient term's ``4 B/(tau1 n)`` (the gradient is an average over n/2
    clipped samples and ``||H^{-1}|| <= 1/tau1``): the paper's allowance for the
    Hessian estimated on half 1 (proof of Lemma 3.8). It covers that term when the
    per-sample Hessian norm is at most ``4 tau1``.
    """
    return 8.0 * B / (tau1 * n)


# ----------------------------------------------------------------------- ledger
@dataclass(frozen=True)
class Release:
    """``count`` identical Gaussian releases by every client.

    Attributes
    ----------
    stage : str
        What is released (e.g. ``"gradient"``, ``"local step"``, ``"newton"``).
    count : int
    sensitivity, sigma : ndarray, shape (R, m)
        Per replicate and client. ``sigma = 0`` with ``sensitivity = inf`` is a
        non-private release (mu = inf).
    """

    stage: str
    count: int
    sensitivity: np.ndarray
    sigma: np.ndarray

    @property
    def mu(self) -> np.ndarray:
        """mu of one release, ``sensitivity / sigma``, shape (R, m)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.divide(self.sensitivity, self.sigma)
        return np.where(self.sigma == 0, np.inf, out)


@dataclass
class Ledger:
    """Every Gaussian release of every client, with GDP composition."""

    releases: list[Release] = field(default_factory=list)

    def add(self, stage: str, count: int, sensitivity, sigma) -> None:
        sens, sig = np.broadcast_arrays(np.asarray(sensitivity, float), np.asarray(sigma, float))
        self.releases.append(Release(stage, int(count), sens.copy(), sig.copy()))

    def composed_mu(self) -> np.ndarray:
        """Composed mu of each client, ``sqrt(sum_j mu_j^2)``, shape (R, m)."""
        total = sum(rel.count * rel.mu ** 2 for rel in self.releases)
        return np.sqrt(total)

    def client_report(self, replicate: int = 0) -> list[dict]:
        """JSON-ready list: for each client, its releases and composed mu."""
        mu = self.composed_mu()[replicate]
        out = []
        for i in range(mu.shape[0]):
            rel = []
            for r in self.releases:
                entry = {"stage": r.stage, "sensitivity": float(r.sensitivity[replicate, i]),
                         "sigma": float(r.sigma[replicate, i])}
                rel.extend([entry] * r.count)
            out.append({"client": i, "releases": rel, "mu": float(mu[i])})
        return out


# -------------------------------------------------------------- GDP conversions
def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of a mu-GDP mechanism (Dong, Roth & Su 2022, Corollary 1)."""
    from scipy.stats import norm

    if mu <= 0:
        raise ValueError(f"mu must be positive, got mu={mu}")
    return float(norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon with ``gdp_delta(mu, epsilon) <= delta``."""
    from scipy.optimize import brentq

    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got delta={delta}")
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(mu, hi) > delta:
        hi *= 2
    return float(brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu whose mu-GDP curve passes through ``(epsilon, delta)``."""
    from scipy.optimize import brentq

    if epsilon < 0 or not 0 < delta < 1:
        raise ValueError(f"need epsilon >= 0 and 0 < delta < 1, got epsilon={epsilon}, delta={delta}")
    hi = 1.0
    while gdp_delta(hi, epsilon) < delta:
        hi *= 2
    return float(brentq(lambda m: gdp_delta(m, epsilon) - delta, 1e-12, hi, xtol=1e-14, rtol=1e-14))
