"""A fit across sites by any transport, and the same fit in one process.

`fit_across` takes ``ask`` (the transport: Flower messages, or direct calls), which sends
requests to the sites, all at once, and the public settings: it greets every site once (its size n_i
comes back), orders them (by their test place when they have one), and runs the method's
own rounds (`fedgdp.federation.coordinator.run_method`). A site that drops out (its
``ask`` raises) stops the fit: no estimate is released, and every site's ledger still
counts what it sent (`SiteLostError`). `in_process` runs `fedgdp.federation.site.Site`
objects by direct calls, the simulation of the wire the tests use.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .coordinator import PublicFold, RefusedError, run_method
from .settings import SiteSettings, check_settings, resolve
from .site import LOG

__all__ = ["AcrossSites", "SiteLostError", "fit_across", "greet", "in_process"]


class SiteLostError(RuntimeError):
    """A site stopped answering mid-run: the fit stops and releases no estimate."""


@dataclass
class AcrossSites:
    """A fit across sites.

    Attributes
    ----------
    theta : ndarray of shape (d, k)   the estimate (the intercept's row first when fitted)
    ledger : fedgdp.core.privacy.Ledger  the planned ledger, one column per site (its releases' sds)
    sizes : ndarray of shape (m,)     the sites' sizes n_i, in the fit's order
    order : list of int               the transport's site of each of the fit's clients
    guarantees : list of str          each site's own statement of its guarantee
    rounds : int                      the method's communication rounds
    last : dict                       the last request's public part (asking it again is one round too many)
    """

    theta: np.ndarray
    ledger: object
    sizes: np.ndarray
    order: list
    guarantees: list
    rounds: int
    last: dict


def _call(ask, pairs: list) -> list:
    """``ask(pairs)``, a transport's failure as `SiteLostError`."""
    try:
        replies = list(ask(pairs))
    except Exception as exc:
        raise SiteLostError(f"a site did not answer request {pairs[0][1].get('op')!r} ({type(exc).__name__}: "
                            f"{exc}): the fit stops and releases no estimate; each site's ledger counts what "
                            f"it sent") from exc
    if len(replies) != len(pairs):
        raise SiteLostError(f"{len(pairs) - len(replies)} site(s) did not answer request "
                            f"{pairs[0][1].get('op')!r}: the fit stops and releases no estimate; each site's "
                            f"ledger counts what it sent")
    return replies


def greet(ask, sites: list, settings: dict | SiteSettings, nonce: str = "") -> list:
    """Every site's greeting (`fedgdp.federation.site.Site.hello`); `RefusedError` when one refuses.

    Parameters
    ----------
    ask : callable
        The transport (`fit_across`).
    sites : list
        The transport's sites to greet (its indices j, or node ids).
    settings : dict or SiteSettings
        The public settings.
    nonce : str
        The coordinator's one-time value: each greeting's signature covers it.
    """
    public = check_settings(settings).as_dict()
    hellos = _call(ask, [(j, {"op": "hello", "settings": public, "nonce": str(nonce)}) for j in sites])
    for j, reply in zip(sites, hellos):
        if "refused" in reply:
            raise RefusedError(f"site {reply.get('name', j)} refused: {reply['refused']}")
    return hellos


def fit_across(ask, m: int, settings: dict | SiteSettings, *, hellos: list | None = None,
               progress=None) -> AcrossSites:
    """The method of ``settings`` across ``m`` sites reached by ``ask``: an `AcrossSites` fit; `RefusedError`
    when a site refuses, `SiteLostError` when one drops out.

    Parameters
    ----------
    ask : callable
        ``ask([(j, request), ...]) -> [reply, ...]`` sends each request to the transport's
        site j (0 <= j < m), all at once, and returns the replies in order; it raises (any
        exception) or returns fewer replies when a site does not answer.
    m : int
        Sites.
    settings : dict or SiteSettings
        The public settings (`fedgdp.federation.settings.check_settings`).
    hellos : list of dict or None
        The sites' greetings in the transport's order, when the caller has greeted them (`greet`).
    progress : callable or None
        Called with one line per request of the method (its number, operation, seconds).
    """
    checked = check_settings(settings)
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"a fit across sites needs at least one site, got m={m!r}")
    if hellos is None:
        hellos = greet(ask, list(range(m)), checked)
    dims = {(int(h["d"]), int(h["k"])) for h in hellos}
    if len(dims) != 1:
        raise ValueError(f"the sites' designs differ in shape (d, k): {sorted(dims)}")
    (d, _k), = dims
    places = [int(h["index"]) for h in hellos]
    order = sorted(range(m), key=lambda j: places[j]) if min(places) >= 0 else list(range(m))
    if min(places) >= 0 and sorted(places) != list(range(m)):
        raise ValueError(f"the sites' test places must be 0..{m - 1}, got {places}")
    r = resolve(checked, d)
    p = r.settings
    fold = PublicFold(r.model, [], [], mu=r.mu, B=r.B, tau1=p.tau1, newton=p.newton, privacy=p.privacy,
                      clip=p.clip, n=tuple(int(hellos[j]["n"]) for j in order), dim=d)
    sent: dict = {"count": 0}

    def step(pairs: list) -> list:
        sent["last"] = {k: v for k, v in pairs[-1][1].items() if k != "theta"}
        sent["count"] += 1
        start = time.monotonic()
        replies = _call(ask, [(order[i], request) for i, request in pairs])
        line = (f"request {sent['count']} ({sent['last']['op']}) answered by {len(pairs)} site(s) in "
                f"{time.monotonic() - start:.2f} s")
        LOG.info(line)
        if progress is not None:
            progress(line)
        return replies

    fit = run_method(r.meth, fold, r.method_settings, step)
    return AcrossSites(np.asarray(fit.theta, float), fit.ledger, fold.sizes, order,
                       [str(hellos[j]["guarantee"]) for j in order], int(fit.rounds), sent["last"])


def in_process(sites: list, settings: dict | SiteSettings) -> AcrossSites:
    """`fit_across` with `fedgdp.federation.site.Site` objects called directly (no wire).

    Parameters
    ----------
    sites : list of Site
        The sites.
    settings : dict or SiteSettings
        The coordinator's settings.
    """
    return fit_across(lambda pairs: [sites[j].handle(request) for j, request in pairs], len(sites), settings)
