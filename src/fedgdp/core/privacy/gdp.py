"""mu-GDP's composition, and mu-GDP <-> (epsilon, delta)-DP (Dong, Roth & Su 2022, Corollary 1), in log space,
finite up to `MU_MAX`.

docs/privacy.md, "Privacy calibration", gives the formulas; non-finite and out-of-range inputs are refused.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..settings import as_float
from .checks import MU_MAX


def compose(terms: Iterable) -> float | np.ndarray:
    """mu-GDP composition (Dong, Roth & Su 2022, Corollary 3.3), ``sqrt(sum_k c_k mu_k^2)``: the one rule
    the ledgers, `fedgdp.PrivacyBudget` and the reports compose by.

    Parameters
    ----------
    terms : iterable of (mu, count)
        Each release's (or fit's) mu, a float or an array (one per client), and how many times it is
        made (0 or fewer: not made, adding 0); the arrays broadcast.

    Returns
    -------
    float or ndarray
        The composed mu (0.0 for no terms), a float where every term is a scalar.
    """
    total: float | np.ndarray = 0.0
    for mu, count in terms:
        c = np.asarray(count, float)
        with np.errstate(invalid="ignore"):            # a release made 0 times adds 0, whatever its mu
            total = total + np.where(c > 0, c * np.asarray(mu, float) ** 2, 0.0)
    return float(np.sqrt(total)) if np.ndim(total) == 0 else np.sqrt(total)


def headroom(total: float, spent: float) -> float:
    """The largest mu that composes with ``spent`` to at most ``total``: ``sqrt(max(total^2 - spent^2, 0))``.

    Parameters
    ----------
    total, spent : float
        A budget and what it has spent.
    """
    return math.sqrt(max(total * total - spent * spent, 0.0))


def apportion(total: float, share: float) -> tuple[float, float]:
    """Two mus that `compose` to ``total``, the second with ``share`` of ``total^2``:
    ``(total sqrt(1 - share), total sqrt(share))``.

    Parameters
    ----------
    total : float
        The mu to divide.
    share : float
        The second part's share of ``total^2``, in [0, 1].
    """
    return total * math.sqrt(1.0 - share), total * math.sqrt(share)


def share_of(part: float, total: float) -> float:
    """The share of ``total^2`` that ``part`` spends (`compose`'s inverse; 0 where ``total`` is 0):
    ``(part / total)^2``.

    Parameters
    ----------
    part, total : float
        A composed part of a mu and the mu.
    """
    return (part / total) ** 2 if total > 0 else 0.0


def _gdp_log_delta(mu: float, a: float) -> float:
    """log delta at ``a = mu/2 - epsilon/mu``: ``Phi(a) - phi(a) M(mu - a)``, M the Mills ratio (no ``e^epsilon``)."""
    from scipy.special import erfcx, log_ndtr

    log_phi = -0.5 * a * a - 0.5 * math.log(2 * math.pi)
    log_mills = 0.5 * math.log(math.pi / 2) + math.log(float(erfcx((mu - a) / math.sqrt(2))))
    log_cdf = float(log_ndtr(a))
    x = log_phi + log_mills - log_cdf               # log of the second term over the first, < 0
    if not x < 0:
        return -math.inf
    log1mexp = math.log(-math.expm1(x)) if x > -math.log(2) else math.log1p(-math.exp(x))
    return log_cdf + log1mexp


def _gdp_mu_arg(mu) -> float:
    """mu of a GDP conversion: a number in ``(0, MU_MAX]``, or ``inf`` (no privacy)."""
    what = f"a number in (0, {MU_MAX:g}] or inf"
    value = as_float("mu", mu, what)
    if not (0 < value <= MU_MAX or value == math.inf):
        raise ValueError(f"mu must be {what}, got mu={mu!r}")
    return value


def _gdp_epsilon_arg(epsilon) -> float:
    """epsilon of a GDP conversion: a number >= 0, or ``inf``."""
    value = as_float("epsilon", epsilon, "a number >= 0 or inf")
    if not value >= 0:
        raise ValueError(f"epsilon must be a number >= 0 or inf, got epsilon={epsilon!r}")
    return value


def _gdp_delta_arg(delta) -> float:
    """delta of a GDP conversion: a number in ``(0, 1)``."""
    value = as_float("delta", delta, "a number in (0, 1)")
    if not 0 < value < 1:
        raise ValueError(f"delta must be a number in (0, 1), got delta={delta!r}")
    return value


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of a mu-GDP mechanism (Dong, Roth & Su 2022, Corollary 1).

    Parameters
    ----------
    mu : float
        The GDP parameter.
    epsilon : float
        The epsilon.

    Returns
    -------
    float
        delta: 1 at ``mu = inf``, 0 at ``epsilon = inf`` (both at once: ValueError).
    """
    mu, epsilon = _gdp_mu_arg(mu), _gdp_epsilon_arg(epsilon)
    if math.isinf(mu) and math.isinf(epsilon):
        raise ValueError("delta is undefined at mu=inf and epsilon=inf together (give a finite one)")
    if math.isinf(mu):
        return 1.0
    if math.isinf(epsilon):
        return 0.0
    return math.exp(_gdp_log_delta(mu, mu / 2 - epsilon / mu))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon >= 0 with ``gdp_delta(mu, epsilon) <= delta`` (about ``mu^2/2`` for large mu).

    Parameters
    ----------
    mu : float
        The GDP parameter.
    delta : float
        The delta, in (0, 1).

    Returns
    -------
    float
        epsilon (inf at ``mu = inf``).
    """
    from scipy.optimize import brentq
    from scipy.special import ndtri

    mu, delta = _gdp_mu_arg(mu), _gdp_delta_arg(delta)
    if math.isinf(mu):
        return math.inf
    log_delta, top = math.log(delta), mu / 2
    if _gdp_log_delta(mu, top) <= log_delta:
        return 0.0
    lo = float(ndtri(delta))
    a = brentq(lambda t: _gdp_log_delta(mu, t) - log_delta, lo, top, xtol=1e-300, rtol=9e-16, maxiter=2000)
    return float(mu * (top - a))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu whose mu-GDP curve passes through ``(epsilon, delta)``.

    Parameters
    ----------
    epsilon : float
        The point's epsilon, >= 0 or inf.
    delta : float
        The point's delta, in (0, 1).

    Returns
    -------
    float
        mu (inf at ``epsilon = inf``); ValueError where it would exceed `MU_MAX`.
    """
    from scipy.optimize import brentq

    epsilon, delta = _gdp_epsilon_arg(epsilon), _gdp_delta_arg(delta)
    if math.isinf(epsilon):
        return math.inf
    hi = 1.0
    while gdp_delta(hi, epsilon) < delta:
        if hi * 2 > MU_MAX:
            raise ValueError(f"epsilon={epsilon!r} at delta={delta!r} needs a mu above {MU_MAX:g} (MU_MAX)")
        hi *= 2
    return float(brentq(lambda m: gdp_delta(m, epsilon) - delta, 1e-12, hi, xtol=1e-14, rtol=1e-14))
