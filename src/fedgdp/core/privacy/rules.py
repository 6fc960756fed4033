"""The clipping-bound rules: ``quantile`` (the paper's §4.1, data-driven, so mu is nominal), ``fixed`` (public) and
``private_quantile`` (a noisy histogram per client, in the ledger; docs/methods.md §2, "A private clipping bound").
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import numpy as np

from .calibration import CLIP_HISTOGRAM, ReleaseSpec, calibrate
from .clipping import row_norms

#: The default clipping rule (paper §4.1): the max over clients of each client's 0.9-quantile
#: of its per-sample gradient norms at zero. Read-only: copy it.
DEFAULT_CLIP: Mapping[str, Any] = MappingProxyType({"rule": "quantile", "q": 0.9})


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


def bound_of_rule(rule: dict, norms, *, mu: float = math.inf, rng=None, max_quantile=None) -> float:
    """The clipping bound B of ``rule``: the one dispatch of the rules, for every experiment.

    Parameters
    ----------
    rule : dict
        ``fixed`` (its ``value``), ``private_quantile`` or ``quantile`` (max over clients of the q-quantile).
    norms : callable
        ``norms()`` -> list of m ndarrays of shape (n_i,), the per-sample gradient norms at zero.
    mu, rng : float, numpy.random.Generator
        The privacy level and noise of ``private_quantile``.
    max_quantile : callable or None
        ``max_quantile(q)`` -> the quantile rule's bound by the caller; None: ``np.quantile`` per client.
    """
    if rule["rule"] == "fixed":
        return float(rule["value"])
    if rule["rule"] == "private_quantile":
        return private_clip_bound(norms(), rule, mu=mu, rng=rng)
    if max_quantile is not None:
        return float(max_quantile(rule["q"]))
    return float(max(np.quantile(v, rule["q"]) for v in norms()))


def clip_bound(glm, rep, rule: dict, *, mu: float = math.inf, rng=None) -> float:
    """The clipping bound B of one simulation replicate (`bound_of_rule` at theta = 0).

    Parameters
    ----------
    glm : fedgdp.core.glm.GLM
    rep : fedgdp.simulation.data.Replicate
    rule : dict
    mu, rng : float, numpy.random.Generator
        The privacy level and noise of ``private_quantile``.
    """
    def flat():
        return np.abs(glm.mean(np.zeros(1))[0] - rep.y) * row_norms(rep.X)

    return bound_of_rule(rule, lambda: np.split(flat(), np.cumsum(rep.sizes)[:-1]), mu=mu, rng=rng,
                         max_quantile=lambda q: _client_quantiles(flat(), rep.sizes, q).max())


def histogram_grid(rule: dict) -> np.ndarray:
    """The public geometric bin edges of a ``private_quantile`` rule, shape (bins + 1,).

    Parameters
    ----------
    rule : dict
    """
    lo, hi, bins = rule["grid"]
    return np.geomspace(float(lo), float(hi), int(bins) + 1)


def clip_histogram(norms: np.ndarray, rule: dict) -> np.ndarray:
    """One client's pre-noise histogram: the share of its norms (n,) in each bin (bins,), the ends open.

    Parameters
    ----------
    norms : ndarray of shape (n,)
    rule : dict
    """
    edges = histogram_grid(rule)
    bins = edges.shape[0] - 1
    idx = np.clip(np.searchsorted(edges, norms, side="right") - 1, 0, bins - 1)
    return np.bincount(idx, minlength=bins) / float(len(norms))


def plan_clip_histogram(*, n, share) -> tuple:
    """The private rule's release: one noisy normalised histogram per client, sensitivity ``sqrt(2)/n``.

    Parameters
    ----------
    n : ndarray
        Client sizes, broadcastable to (b, m).
    share : Fraction or float
        Share of mu^2 the histogram spends.
    """
    return (ReleaseSpec(CLIP_HISTOGRAM, 1, math.sqrt(2.0), n, Fraction(share)),)


def private_clip_bound(norms: list, rule: dict, *, mu: float, rng: np.random.Generator) -> float:
    """The ``private_quantile`` bound: the largest over clients of the q-crossing of its noisy cumulative histogram.

    Noise: one ``rng.standard_normal((m, bins))`` draw, calibrated by `plan_clip_histogram`.

    Parameters
    ----------
    norms : list of ndarray
        Per client, the per-sample gradient norms at zero, shape (n_i,).
    rule : dict
    mu : float
    rng : numpy.random.Generator
    """
    edges = histogram_grid(rule)
    bins = edges.shape[0] - 1
    n = np.array([len(v) for v in norms], float)
    sigma = calibrate(plan_clip_histogram(n=n, share=rule["share"]), mu=mu).sigmas[0]
    Z = rng.standard_normal((len(norms), bins))
    best = 0.0
    for i, v in enumerate(norms):
        h = clip_histogram(v, rule) + sigma[i] * Z[i]
        hit = np.flatnonzero(np.cumsum(h) >= rule["q"])
        best = max(best, float(edges[(hit[0] if hit.size else bins - 1) + 1]))
    return best


def clip_share(rule: dict) -> Fraction:
    """Share of mu^2 the clipping rule spends (``private_quantile``: its ``share``; else 0).

    Parameters
    ----------
    rule : dict
    """
    return Fraction(rule["share"]) if rule.get("rule") == "private_quantile" else Fraction(0)


def clip_unaccounted(rule: dict) -> list[str]:
    """The ledger note of a data-driven, unaccounted clipping bound (``quantile``; else empty).

    Parameters
    ----------
    rule : dict
    """
    if rule.get("rule") == "quantile":
        return [f"clip bound B: data-driven q={rule['q']} quantile of the clients' gradient norms, "
                "not accounted (use clip rule private_quantile or fixed)"]
    return []
