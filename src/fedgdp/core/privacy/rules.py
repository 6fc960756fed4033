"""The clipping-bound rules: ``quantile`` (the paper's §4.1, data-driven, so mu is nominal), ``fixed`` (public) and
``private_quantile`` (a noisy histogram per client, in the ledger; docs/methods.md §2, "A private clipping bound").
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

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
    """The clipping bound B of ``rule``, ``clip_rule(rule).bound(...)``: the one dispatch of the rules.

    Parameters
    ----------
    rule : dict
        The clipping rule (checked by `check_clip`).
    norms, mu, rng, max_quantile
        As in the rules' ``bound`` (`Fixed`, `Quantile`, `PrivateQuantile`).
    """
    return clip_rule(rule).bound(norms, mu=mu, rng=rng, max_quantile=max_quantile)


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


def histogram_grid(rule) -> np.ndarray:
    """The public geometric bin edges of a ``private_quantile`` rule, shape (bins + 1,).

    Parameters
    ----------
    rule : PrivateQuantile or its dict form
    """
    lo, hi, bins = clip_rule(rule).grid  # type: ignore[union-attr]
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


def private_clip_bound(norms: list, rule, *, mu: float, rng: np.random.Generator) -> float:
    """The ``private_quantile`` bound: the largest over clients of the q-crossing of its noisy cumulative histogram.

    Noise: one ``rng.standard_normal((m, bins))`` draw, calibrated by `plan_clip_histogram`.

    Parameters
    ----------
    norms : list of ndarray
        Per client, the per-sample gradient norms at zero, shape (n_i,).
    rule : PrivateQuantile or its dict form
    mu : float
    rng : numpy.random.Generator
    """
    rule = clip_rule(rule)
    edges = histogram_grid(rule)
    bins = edges.shape[0] - 1
    n = np.array([len(v) for v in norms], float)
    sigma = calibrate(plan_clip_histogram(n=n, share=rule.share), mu=mu).sigmas[0]
    Z = rng.standard_normal((len(norms), bins))
    best = 0.0
    for i, v in enumerate(norms):
        h = clip_histogram(v, rule) + sigma[i] * Z[i]
        hit = np.flatnonzero(np.cumsum(h) >= rule.q)
        best = max(best, float(edges[(hit[0] if hit.size else bins - 1) + 1]))
    return best


def clip_share(rule: dict) -> Fraction:
    """Share of mu^2 the clipping rule spends (`clip_rule`'s ``spends``).

    Parameters
    ----------
    rule : dict
    """
    return clip_rule(rule).spends


def clip_unaccounted(rule: dict) -> list[str]:
    """The ledger notes of a data-driven, unaccounted clipping bound (`clip_rule`'s ``unaccounted``).

    Parameters
    ----------
    rule : dict
    """
    return clip_rule(rule).unaccounted


class _Rule:
    """What the three rules share: the bound, the share of mu^2 spent, the notes left unaccounted."""

    #: the rule's name in its dict form (``{"rule": name, ...}``)
    rule: ClassVar[str] = ""

    def bound(self, norms, *, mu: float = math.inf, rng=None, max_quantile=None) -> float:
        """The clipping bound B of this rule.

        Parameters
        ----------
        norms : callable
            ``norms()`` -> list of m ndarrays of shape (n_i,), the per-sample gradient norms at zero.
        mu, rng : float, numpy.random.Generator
            The privacy level and noise of ``private_quantile``.
        max_quantile : callable or None
            ``max_quantile(q)`` -> the quantile rule's bound by the caller; None: ``np.quantile`` per client.
        """
        return self._bound(norms, mu, rng, max_quantile)

    def _bound(self, norms, mu, rng, max_quantile) -> float:
        raise NotImplementedError

    @property
    def spends(self) -> Fraction:
        """Share of mu^2 the rule spends (0: it releases nothing)."""
        return Fraction(0)

    @property
    def unaccounted(self) -> list[str]:
        """The ledger notes of what the rule leaves unaccounted (none)."""
        return []


@dataclass(frozen=True)
class Fixed(_Rule):
    """The ``fixed`` rule: a public bound ``value`` (kept as given: it enters the seeds' parameters)."""

    rule: ClassVar[str] = "fixed"

    value: Any

    def _bound(self, norms, mu, rng, max_quantile) -> float:
        return float(self.value)

    def as_dict(self) -> dict:
        """The rule's dict form (what `check_clip` returns, configs and parameters hold)."""
        return {"rule": "fixed", "value": self.value}


@dataclass(frozen=True)
class Quantile(_Rule):
    """The ``quantile`` rule (paper §4.1): the max over clients of their ``q``-quantile; data-driven, unaccounted."""

    rule: ClassVar[str] = "quantile"

    q: Any = 0.9

    def _bound(self, norms, mu, rng, max_quantile) -> float:
        if max_quantile is not None:
            return float(max_quantile(self.q))
        return float(max(np.quantile(v, self.q) for v in norms()))

    @property
    def unaccounted(self) -> list[str]:
        """The ledger note: the bound is computed from the data and not accounted."""
        return [f"clip bound B: data-driven q={self.q} quantile of the clients' gradient norms, "
                "not accounted (use clip rule private_quantile or fixed)"]

    def as_dict(self) -> dict:
        """The rule's dict form."""
        return {"rule": "quantile", "q": self.q}


@dataclass(frozen=True)
class PrivateQuantile(_Rule):
    """The ``private_quantile`` rule: `private_clip_bound` on the public ``grid``, spending ``share`` of mu^2."""

    rule: ClassVar[str] = "private_quantile"

    q: Any = 0.9
    share: Any = 0.1
    grid: tuple = (0.01, 100.0, 64)

    def _bound(self, norms, mu, rng, max_quantile) -> float:
        return private_clip_bound(norms(), self, mu=mu, rng=rng)

    @property
    def spends(self) -> Fraction:
        """Share of mu^2 the histogram spends (in the ledger)."""
        return Fraction(self.share)

    def as_dict(self) -> dict:
        """The rule's dict form."""
        return {"rule": "private_quantile", "q": self.q, "share": self.share, "grid": list(self.grid)}


def clip_rule(rule) -> Fixed | Quantile | PrivateQuantile:
    """The typed view of a clipping rule's dict form (checked by `check_clip`); its ``as_dict()`` gives it back.

    Parameters
    ----------
    rule : Mapping or rule
        ``{"rule": "fixed", "value"}``, ``{"rule": "quantile", "q"}`` or ``{"rule": "private_quantile", "q",
        "share", "grid"}``; a rule object is returned as it is.
    """
    if isinstance(rule, _Rule):
        return rule  # type: ignore[return-value]
    kind = rule.get("rule")
    if kind == "fixed":
        return Fixed(rule["value"])
    if kind == "quantile":
        return Quantile(rule["q"])
    if kind == "private_quantile":
        return PrivateQuantile(rule["q"], rule["share"], tuple(rule["grid"]))
    raise ValueError(f"clip rule must be 'quantile', 'fixed' or 'private_quantile', got {kind!r}")
