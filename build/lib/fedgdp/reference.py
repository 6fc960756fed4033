"""Plain-loop reference implementation of the four methods: the test oracle.

Replicate by replicate, client by client, step by step, with the per-sample
gradient matrix clipped row by row (:func:`fedgdp.privacy.clip_rows`). It consumes
exactly the noise arrays of :mod:`fedgdp.estimators` (one dict per replicate, from
:meth:`Method.draw_noise`) and is the baseline of ``fedgdp bench``.
"""
from __future__ import annotations

import numpy as np

from . import privacy
from .estimators import aggregation_weights, floored_solve
from .glm import GLM
from .simulate import Replicate

__all__ = ["reference_fit"]


def _client_gradient(glm: GLM, theta, X, y, B) -> np.ndarray:
    """Mean of the clipped per-sample gradients of one client, shape (d,)."""
    return privacy.clip_rows(glm.per_sample_gradients(theta, X, y), B).mean(axis=0)


def _local_steps(glm, theta, X, y, B, K, eta, sigma, Z):
    theta = theta.copy()
    for t in range(K):
        theta = theta - eta * _client_gradient(glm, theta, X, y, B)
        if Z is not None:
            theta = theta + sigma * Z[t]
    return theta


def _server_steps(glm, rep, theta, w, B, K, eta, sigmas, Z):
    theta = theta.copy()
    for k in range(K):
        total = np.zeros_like(theta)
        for i in range(rep.sizes.shape[0]):
            X, y = rep.client(i)
            g = _client_gradient(glm, theta, X, y, B)
            if Z is not None:
                g = g + sigmas[i] * Z[k, i]
            total += w[i] * g
        theta = theta - eta * total
    return theta


def _fedsgd(glm, rep, s, B, mu, w, noise, tau1):
    n = rep.sizes.astype(float)
    sig = [privacy.sigma_fedsgd(B=B, n=ni, mu=mu, K=s["K"]) for ni in n]
    return _server_steps(glm, rep, np.zeros(rep.X.shape[1]), w, B, s["K"], s["eta"], sig, noise["Z"])


def _fedavg(glm, rep, s, B, mu, w, noise, tau1):
    theta = np.zeros(rep.X.shape[1])
    for r in range(s["R"]):
        new = np.zeros_like(theta)
        for i in range(rep.sizes.shape[0]):
            X, y = rep.client(i)
            sig = privacy.sigma_fedavg(B=B, n=float(rep.sizes[i]), mu=mu, eta=s["eta"], R=s["R"], K=s["K"])
            Z = None if noise["Z"] is None else noise["Z"][r, :, i]
            new += w[i] * _local_steps(glm, theta, X, y, B, s["K"], s["eta"], sig, Z)
        theta = new
    return theta


def _fedhybrid(glm, rep, s, B, mu, w, noise, tau1):
    d = rep.X.shape[1]
    theta = np.zeros(d)
    sig2 = []
    for i in range(rep.sizes.shape[0]):
        X, y = rep.client(i)
        a1, a2 = privacy.sigma_fedhybrid(B=B, n=float(rep.sizes[i]), mu=mu, eta1=s["eta1"], K1=s["K1"], K2=s["K2"])
        sig2.append(a2)
        Z = None if noise["Z1"] is None else noise["Z1"][:, i]
        theta = theta + w[i] * _local_steps(glm, np.zeros(d), X, y, B, s["K1"], s["eta1"], a1, Z)
    return _server_steps(glm, rep, theta, w, B, s["K2"], s["eta2"], sig2, noise["Z2"])


def _fednewton(glm, rep, s, B, mu, w, noise, tau1):
    half1, half2 = rep.halves()
    d = rep.X.shape[1]
    theta1 = np.zeros(d)
    for i in range(rep.sizes.shape[0]):
        X, y = half1.client(i)
        s1, _ = privacy.sigma_fednewton(B=B, n=2.0 * half1.sizes[i], mu=mu, eta=s["eta"], K=s["K"], tau1=tau1)
        Z = None if noise["Z1"] is None else noise["Z1"][:, i]
        theta1 = theta1 + w[i] * _local_steps(glm, np.zeros(d), X, y, B, s["K"], s["eta"], s1, Z)
    theta = np.zeros(d)
    for i in range(rep.sizes.shape[0]):
        X1, _ = half1.client(i)
        X2, y2 = half2.client(i)
        H = glm.hessian(theta1, X1)
        g = _client_gradient(glm, theta1, X2, y2, B)
        local = theta1 - floored_solve(H, g, tau1)
        if noise["Z2"] is not None:
            _, s2 = privacy.sigma_fednewton(B=B, n=2.0 * half1.sizes[i], mu=mu, eta=s["eta"], K=s["K"], tau1=tau1)
            local = local + s2 * noise["Z2"][i]
        theta = theta + w[i] * local
    return theta


_FITS = {"fedsgd": _fedsgd, "fedavg": _fedavg, "fedhybrid": _fedhybrid, "fednewton": _fednewton}


def reference_fit(name: str, reps: list[Replicate], glm: GLM, s: dict, noises: list[dict],
                  B: np.ndarray, mu: float, tau1: float, weights: str = "size") -> np.ndarray:
    """Estimates of method ``name`` for each replicate, shape (R, d).

    Parameters
    ----------
    noises : list of dict
        One per replicate, as drawn by ``Method.draw_noise`` (values None if mu = inf).
    B : ndarray, shape (R,)
        Clipping bound per replicate (ignored when mu = inf).
    """
    out = []
    for r, rep in enumerate(reps):
        Br = float(B[r]) if np.isfinite(mu) else np.inf
        releases = {"fedsgd": s.get("K"), "fedavg": s.get("R", 1) * s.get("K", 1),
                    "fedhybrid": s.get("K1", 0) + s.get("K2", 0), "fednewton": s.get("K", 0) + 1}[name]
        w = aggregation_weights(rep.sizes[None, :], weights, B=np.array([Br]), mu=mu,
                                releases=releases, d=rep.X.shape[1])[0]
        with np.errstate(all="ignore"):
            out.append(_FITS[name](glm, rep, s, Br, mu, w, noises[r], tau1))
    return np.array(out)
