"""The paper's error bounds, up to constants (Table 1, Theorems 3.2-3.10; docs/methods.md §7).

``n``: client sizes (m,), ``N = n.sum()``; ``mu = inf``: non-private. Every bound has
its constants set to one, so only its shape in m, n, N, mu, K is meaningful.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["upper_bound", "lower_bound", "lower_bound_holds", "TABLE1", "local_exponent", "BOUND_FORMS",
           "BOUND_TERMS"]


def _privacy_scale(mu: float) -> float:
    return 0.0 if not np.isfinite(mu) else 1.0 / mu ** 2


BOUND_FORMS = ("table1", "k_explicit")

# The privacy term of each bound in each form (constants omitted); one place for the
# formulas that upper_bound evaluates and the tables print.
BOUND_TERMS = {
    ("fedsgd", "table1"): "m d^2 log N / (mu^2 N^2)",
    ("fedsgd", "k_explicit"): "m K d^2 / (mu^2 N^2)",
    ("fedhybrid", "table1"): "m d^2 log m / (mu^2 N^2)",
    ("fedhybrid", "k_explicit"): "m K2 d^2 / (mu^2 N^2)",
    ("fedavg", "table1"): "m^2 d^2 / N^2 + m d^2 R K / (mu^2 N^2)",
    ("fedavg", "k_explicit"): "m^2 d^2 / N^2 + m d^2 R K / (mu^2 N^2)",
    ("fednewton", "table1"): "m d^2 / (mu^2 N^2)",
    ("fednewton", "k_explicit"): "m d^2 / (mu^2 N^2)",
}


def upper_bound(method: str, n, *, d: int, mu: float, K: int = 50, R: int = 2, K2: int | None = None,
                form: str = "table1") -> float:
    """Order of the MSE bound of ``method``: ``d/N`` plus the term `BOUND_TERMS` names for ``form``.

    ``form="table1"`` (Table 1; K = Theta(log N) for FedSGD, K2 = Theta(log m) for FedHybrid):

    - fedsgd   : d/N + m d^2 log(N) / (mu^2 N^2)           (Theorem 3.2, Remark 3.2)
    - fedhybrid: d/N + m d^2 log(m) / (mu^2 N^2)           (Theorem 3.5)
    - fedavg   : d/N + m^2 d^2 / N^2 + m d^2 R K / (mu^2 N^2)   (Theorem 3.7)
    - fednewton: d/N + m d^2 / (mu^2 N^2)                  (Theorem 3.9)

    ``form="k_explicit"`` (Remark 3.4): the noisy releases as the algorithm ran them:

    - fedsgd   : d/N + m K d^2 / (mu^2 N^2)
    - fedhybrid: d/N + m K2 d^2 / (mu^2 N^2)    (``K2`` required)
    - fedavg, fednewton: as Table 1 (Remark 3.9: no K for FedNewton)

    Parameters
    ----------
    method : str
        ``fedsgd``, ``fedhybrid``, ``fedavg`` or ``fednewton`` (ValueError otherwise).
    n : int or array_like of shape (m,)
        Client sizes (an int: one client).
    d : int
        Parameter dimension.
    mu : float
        The privacy parameter (inf: non-private).
    K : int
        Iterations (FedSGD's K in ``k_explicit``; FedAvg's local steps per round).
    R : int
        FedAvg's rounds.
    K2 : int or None
        FedHybrid's stage-2 steps (required for ``k_explicit``).
    form : str
        ``table1`` or ``k_explicit`` (`BOUND_FORMS`).
    """
    if form not in BOUND_FORMS:
        raise ValueError(f"unknown bound form {form!r}; use one of {', '.join(BOUND_FORMS)}")
    n = np.atleast_1d(np.asarray(n, dtype=float))
    m, N = n.shape[0], float(n.sum())
    priv = _privacy_scale(mu) * m * d ** 2 / N ** 2
    if method not in _BOUNDS:
        raise ValueError(f"unknown method {method!r}")
    return _BOUNDS[method](d=d, m=m, N=N, priv=priv, K=K, R=R, K2=K2, form=form)


def _fedsgd(*, d, m, N, priv, K, R, K2, form):            # Theorem 3.2, Remark 3.2
    return d / N + priv * (K if form == "k_explicit" else math.log(N))


def _fedhybrid(*, d, m, N, priv, K, R, K2, form):         # Theorem 3.5
    if form == "k_explicit":
        if K2 is None:
            raise ValueError("fedhybrid: the K-explicit bound needs K2")
        return d / N + priv * K2
    return d / N + priv * math.log(max(m, 2))


def _fedavg(*, d, m, N, priv, K, R, K2, form):            # Theorem 3.7
    return d / N + m ** 2 * d ** 2 / N ** 2 + priv * R * K


def _fednewton(*, d, m, N, priv, K, R, K2, form):         # Theorem 3.9
    return d / N + priv


# The rows of Table 1 (a method names its row: ``MethodTags.theory_bound``).
_BOUNDS = {"fedsgd": _fedsgd, "fedhybrid": _fedhybrid, "fedavg": _fedavg, "fednewton": _fednewton}


def lower_bound_holds(mu: float) -> bool:
    """Whether Theorem 3.10 covers ``mu`` (it is stated for ``0 < mu < 1``).

    Parameters
    ----------
    mu : float
        The privacy parameter.
    """
    return bool(0 < mu < 1)


def lower_bound(n, *, d: int, mu: float) -> float:
    """Minimax lower bound of Theorem 3.10, constants set to one:
    ``d / sum_i min(n_i, n_i^2 mu^2 log(1/mu) / d)``; ``d / N`` for ``mu >= 1`` (not covered).

    Parameters
    ----------
    n, d, mu
        As in `upper_bound`.
    """
    n = np.atleast_1d(np.asarray(n, dtype=float))
    if not lower_bound_holds(mu):
        return d / float(n.sum())
    eff = np.minimum(n, n ** 2 * mu ** 2 * math.log(1 / mu) / d)
    return d / float(eff.sum())


# Table 1 of the paper: effective rounds, total communication, error-bound order.
TABLE1 = {
    "fedsgd": {"rounds": "K = Omega(log Nd)", "communication": "O(mKd)",
               "bound": "d/N + m d^2 log N / (mu^2 N^2)"},
    "fedhybrid": {"rounds": "K2 = Omega(log m)", "communication": "O(m K2 d)",
                  "bound": "d/N + m d^2 log m / (mu^2 N^2)"},
    "fedavg": {"rounds": "R = O(1)", "communication": "O(mRd)",
               "bound": "d/N + m^2 d^2 / N^2 + m d^2 R K / (mu^2 N^2)"},
    "fednewton": {"rounds": "2", "communication": "O(md)",
                  "bound": "d/N + m d^2 / (mu^2 N^2)"},
}


def local_exponent(xs, ys) -> float:
    """Least-squares slope of ``log ys`` on ``log xs``: the exponent a bound predicts over a grid.

    Parameters
    ----------
    xs : array_like of shape (k,)
        Grid values (positive).
    ys : array_like of shape (k,)
        The bound or the MSE at them (positive).
    """
    lx, ly = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    lx = lx - lx.mean()
    return float(np.sum(lx * (ly - ly.mean())) / np.sum(lx ** 2))
