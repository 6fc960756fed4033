"""Plain-loop reference implementation of the methods (FedNewton in both privacy modes): the test oracle.

Replicate by replicate, client by client, step by step, with the per-sample
gradient matrix clipped row by row (:func:`fedgdp.core.privacy.clip_rows`). It consumes
exactly the noise arrays of :mod:`fedgdp.simulation.backend` (one dict per replicate, from
:meth:`Method.draw_noise`) and is the baseline of ``scripts/speedup.py``.

It lives with the tests, outside the installed package: no module of ``fedgdp``
imports it. The tests import it as ``oracle`` (pytest puts ``tests/`` on the path,
as for ``settings_cases``); the benchmark script puts ``tests/`` there itself.
"""
from __future__ import annotations

import math

import numpy as np

from fedgdp.core import privacy
from fedgdp.core.glm import GLM
from fedgdp.core.solvers import floored_solve
from fedgdp.simulation.backend import REGISTRY, aggregation_weights
from fedgdp.simulation.data import Replicate

__all__ = ["reference_fit", "clip_bound_reference", "oracle_fit", "ORACLE", "sigma_fedsgd", "sigma_fedavg",
           "sigma_fedhybrid", "sigma_fednewton", "newton_sensitivity"]


def _client_gradient(glm: GLM, theta, X, y, B) -> np.ndarray:
    """Mean of the clipped per-sample gradients of one client, shape (d,)."""
    return privacy.clip_rows(glm.per_sample_gradients(theta, X, y), B).mean(axis=0)


def _local_steps(glm, theta, X, y, B, K, eta, sigma, Z):
    theta = theta.copy()
    for t in range(K):
        step = -eta * _client_gradient(glm, theta, X, y, B)
        theta = theta + (step if Z is None else sigma * Z[t] + step)   # noise joins the step first
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


def _sigmas(plan, mu, clip, n):
    """Noise sds of one client's plan (``n``: the client's full size)."""
    return privacy.calibrate_with_clip(plan, mu=mu, clip=clip, n=float(n)).sigmas


def _fedsgd(glm, rep, s, B, mu, w, noise, ctx):
    sig = [float(_sigmas(privacy.plan_fedsgd(B=B, n=float(ni), K=s.K), mu, ctx["clip"], ni)[0])
           for ni in rep.sizes]
    return _server_steps(glm, rep, np.zeros(rep.X.shape[1]), w, B, s.K, s.eta, sig, noise["Z"])


def _fedavg(glm, rep, s, B, mu, w, noise, ctx):
    theta = np.zeros(rep.X.shape[1])
    for r in range(s.R):
        new = np.zeros_like(theta)
        for i in range(rep.sizes.shape[0]):
            X, y = rep.client(i)
            plan = privacy.plan_fedavg(B=B, n=float(rep.sizes[i]), eta=s.eta, R=s.R, K=s.K)
            sig = float(_sigmas(plan, mu, ctx["clip"], rep.sizes[i])[0])
            Z = None if noise["Z"] is None else noise["Z"][r, :, i]
            new += w[i] * _local_steps(glm, theta, X, y, B, s.K, s.eta, sig, Z)
        theta = new
    return theta


def _fedhybrid(glm, rep, s, B, mu, w, noise, ctx):
    d = rep.X.shape[1]
    theta = np.zeros(d)
    sig2 = []
    for i in range(rep.sizes.shape[0]):
        X, y = rep.client(i)
        plan = privacy.plan_fedhybrid(B=B, n=float(rep.sizes[i]), eta1=s.eta1, K1=s.K1, K2=s.K2)
        a1, a2 = (float(a) for a in _sigmas(plan, mu, ctx["clip"], rep.sizes[i]))
        sig2.append(a2)
        Z = None if noise["Z1"] is None else noise["Z1"][:, i]
        theta = theta + w[i] * _local_steps(glm, np.zeros(d), X, y, B, s.K1, s.eta1, a1, Z)
    return _server_steps(glm, rep, theta, w, B, s.K2, s.eta2, sig2, noise["Z2"])


def _clipped_hessian(glm, theta, X, bound):
    """``mean_j min(b''(eta_j), H_c/||x_j||^2) x_j x_j'``, row by row (H_c = ``bound``)."""
    H = np.zeros((X.shape[1], X.shape[1]))
    for x in X:
        w = float(glm.variance(np.array([x @ theta]))[0])
        norm2 = float(x @ x)
        if norm2 > 0 and w * norm2 > bound:
            w = bound / norm2
        H += w * np.outer(x, x)
    return H / X.shape[0]


def _fednewton(glm, rep, s, B, mu, w, noise, ctx):
    half1, half2 = rep.halves()
    d = rep.X.shape[1]
    certified = ctx["certified"]
    H_c = ctx["hessian_clip"] * ctx["tau1"] if certified else None
    sig = []
    for i in range(rep.sizes.shape[0]):
        plan = privacy.plan_fednewton(B=B, n1=float(half1.sizes[i]), n2=float(half2.sizes[i]), eta=s.eta,
                                      K=s.K, tau1=ctx["tau1"], hessian_bound=H_c)
        sig.append([float(a) for a in _sigmas(plan, mu, ctx["clip"], rep.sizes[i])])
    theta1 = np.zeros(d)
    for i in range(rep.sizes.shape[0]):
        X, y = half1.client(i)
        Z = None if noise["Z1"] is None else noise["Z1"][:, i]
        theta1 = theta1 + w[i] * _local_steps(glm, np.zeros(d), X, y, B, s.K, s.eta, sig[i][0], Z)
    theta = np.zeros(d)
    for i in range(rep.sizes.shape[0]):
        X1, _ = half1.client(i)
        X2, y2 = half2.client(i)
        g = _client_gradient(glm, theta1, X2, y2, B)
        if certified:
            H = _clipped_hessian(glm, theta1, X1, H_c)
            local = theta1 - np.linalg.solve(H + ctx["tau1"] * np.eye(d), g)
        else:
            local = theta1 - floored_solve(glm.hessian(theta1, X1), g, ctx["tau1"])
        if noise["Z2"] is not None:
            local = local + sig[i][1] * noise["Z2"][i]
        theta = theta + w[i] * local
    return theta


_FITS = {"fedsgd": _fedsgd, "fedavg": _fedavg, "fedhybrid": _fedhybrid, "fednewton": _fednewton,
         "fednewton_certified": _fednewton}
#: the methods the loop oracle has (a new method is not in it until written here)
ORACLE_METHODS = tuple(_FITS)


def reference_fit(name: str, reps: list[Replicate], glm: GLM, s, noises: list[dict],
                  B: np.ndarray, mu: float, tau1: float, weights: str = "size", *,
                  privacy: dict | None = None, clip: dict | None = None) -> np.ndarray:
    """Estimates of method ``name`` for each replicate, shape (R, d).

    Parameters
    ----------
    noises : list of dict
        One per replicate, as drawn by ``Method.draw_noise`` (values None if mu = inf).
    B : ndarray, shape (R,)
        Clipping bound per replicate (ignored when mu = inf).
    privacy : dict, optional
        ``{"mode", "hessian_clip"}`` (default: paper mode, hessian_clip 4).
    clip : dict, optional
        The clipping rule that gave B (its share of mu^2; default quantile).
    """
    priv = {"mode": "paper", "hessian_clip": 4.0} | (privacy or {})
    ctx = {"tau1": tau1, "hessian_clip": float(priv["hessian_clip"]),
           "certified": name == "fednewton_certified" or priv["mode"] == "certified",
           "clip": clip or {"rule": "quantile", "q": 0.9}}
    s = REGISTRY[name].settings(s)       # a resolved record or frozen: the attributes the loops read
    releases = {"fedsgd": lambda: s.K, "fedavg": lambda: s.R * s.K, "fedhybrid": lambda: s.K1 + s.K2,
                "fednewton": lambda: s.K + 1, "fednewton_certified": lambda: s.K + 1}[name]()
    out = []
    for r, rep in enumerate(reps):
        Br = float(B[r]) if np.isfinite(mu) else np.inf
        w = aggregation_weights(rep.sizes[None, :], weights, B=np.array([Br]), mu=mu,
                                releases=releases, d=rep.X.shape[1])[0]
        with np.errstate(all="ignore"):
            out.append(_FITS[name](glm, rep, s, Br, mu, w, noises[r], ctx))
    return np.array(out)


def clip_bound_reference(glm, rep, rule, *, mu: float = math.inf, rng=None) -> float:
    """Loop version of :func:`fedgdp.core.privacy.clip_bound` (test oracle); ``rule`` a rule or its dict form."""
    rule = privacy.clip_rule(rule)
    if rule.rule == "fixed":
        return float(rule.value)
    d = rep.X.shape[1]
    norms = []
    for i in range(rep.sizes.shape[0]):
        Xi, yi = rep.client(i)
        norms.append(np.linalg.norm(glm.per_sample_gradients(np.zeros(d), Xi, yi), axis=1))
    if rule.rule == "private_quantile":
        return privacy.private_clip_bound(norms, rule, mu=mu, rng=rng)
    return float(max(np.quantile(v, rule.q) for v in norms))


def oracle_fit(name: str, fd, s: dict, noises: list[dict]):
    """:func:`reference_fit` in the form :func:`fedgdp.simulation.run.run_cell` takes:
    ``(theta (R, d), None)`` (the oracle keeps no ledger)."""
    theta = reference_fit(name, fd.reps, fd.glm, s, noises, fd.B, fd.mu, fd.tau1, fd.weights,
                          privacy=fd.privacy, clip=fd.clip)
    return theta, None


#: Keyword arguments of :func:`fedgdp.simulation.run.run_cell` that run the loop oracle:
#: ``run_cell(p, seeds, **ORACLE)`` (one replicate at a time).
ORACLE = {"fit": oracle_fit, "bound": clip_bound_reference, "rows_per_block": 1}



# ----------------------------------------------------------- the sds of one method
# Convenience wrappers of the core's plans (once in fedgdp.core.privacy): the sds of one
# method for given sizes, ``calibrate(plan_*(...), mu=mu).sigmas``.
def sigma_fedsgd(*, B, n, mu, K):
    """FedSGD (Algorithm 1): ``2 B sqrt(K) / (mu n)`` per noisy gradient."""
    return privacy.calibrate(privacy.plan_fedsgd(B=B, n=n, K=K), mu=mu).sigmas[0]


def sigma_fedavg(*, B, n, mu, eta, R, K):
    """FedAvg (Algorithm 3): ``2 B eta sqrt(R K) / (mu n)`` per noisy local step."""
    return privacy.calibrate(privacy.plan_fedavg(B=B, n=n, eta=eta, R=R, K=K), mu=mu).sigmas[0]


def sigma_fedhybrid(*, B, n, mu, eta1, K1, K2):
    """FedHybrid (Algorithm 2): the stage-1 and stage-2 sds, each stage spending mu/sqrt(2)."""
    return privacy.calibrate(privacy.plan_fedhybrid(B=B, n=n, eta1=eta1, K1=K1, K2=K2), mu=mu).sigmas


def sigma_fednewton(*, B, n, mu, eta, K, tau1, n2=None, hessian_bound=None):
    """FedNewton (Algorithm 4): the stage-1 and Newton sds (``n1 = n / 2``; ``n2`` None: ``n / 2``)."""
    n1 = np.asarray(n, float) / 2.0
    plan = privacy.plan_fednewton(B=B, n1=n1, n2=n1 if n2 is None else n2, eta=eta, K=K, tau1=tau1,
                                  hessian_bound=hessian_bound)
    return privacy.calibrate(plan, mu=mu).sigmas


def newton_sensitivity(*, B, n, tau1):
    """The sensitivity the paper's Newton release is calibrated on, ``8 B / (tau1 n)``."""
    return privacy.plan_fednewton(B=B, n1=np.asarray(n, float) / 2.0, n2=1.0, eta=1.0, K=1,
                                  tau1=tau1)[1].sensitivity
