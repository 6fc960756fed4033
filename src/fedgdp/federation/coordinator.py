"""The coordinator of a fit across sites: the method's own ``run`` on a backend whose client steps are requests.

`SitesBackend` is `fedgdp.realdata.RealBackend` (J = 1) on the public fold (`PublicFold`:
sizes and settings, no record). A request is a dict: ``op`` (``local``, ``gradient``,
``newton``), its public settings and ``theta`` (d, k); a reply carries one noisy release
(d, k) or ``refused``: one line (docs/federation.md, "What crosses the wire").
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..methods import REALDATA, StreamNoise
from ..methods.base import check_finite_release
from ..realdata import FoldData, RealBackend
from ..realdata.backend import server_descent

__all__ = ["PublicFold", "RefusedError", "SitesBackend", "run_method"]


class RefusedError(RuntimeError):
    """A site refused a request (its one-line reason is the message)."""


@dataclass
class PublicFold(FoldData):
    """A fold's public part: the client sizes ``n`` (m,) and ``dim`` design columns, no record.

    What a method's plan and the coordinator read (`FoldData.calibrate`, ``weights``,
    ``plan_n``, ``plan_halves``); the rows stay at the sites (``X`` and ``Y`` are empty).
    """

    n: tuple = ()
    dim: int = 0

    def __post_init__(self):
        self.products, self.xnorm = [], []

    @property
    def m(self) -> int:
        return len(self.n)

    @property
    def d(self) -> int:
        return int(self.dim)

    @property
    def sizes(self) -> np.ndarray:
        return np.array(self.n, dtype=np.int64)


class _Sent(StreamNoise):
    """The noise of a private fit across sites: drawn at the sites, never here."""

    def __init__(self):
        super().__init__(None)

    def take(self, name: str, *index):
        return self

    def draw(self, shape: tuple):
        raise RuntimeError("the coordinator draws no noise: each site adds its own")


class SitesBackend(RealBackend):
    """`fedgdp.realdata.RealBackend` on a `PublicFold` whose client steps are requests.

    Parameters
    ----------
    fold : PublicFold
        The public fold (sizes in the sites' order, settings).
    ask : callable
        ``ask([(i, request), ...]) -> [reply, ...]``: sends each request to its site i
        (all at once) and returns the replies in order (``{"release": ndarray (d, k)}``
        or ``{"refused": line}``).
    """

    kind = REALDATA

    def __init__(self, fold: PublicFold, ask):
        super().__init__([fold], None)
        self.noise, self.trace, self.ask = _Sent() if fold.private else self.noise, None, ask

    def _releases(self, request: dict, theta: np.ndarray) -> list:
        """Every site's release for ``request`` at ``theta`` (d, k), asked of all at once."""
        replies = self.ask([(i, {**request, "theta": np.asarray(theta, float)}) for i in range(self.m)])
        out = []
        for i, reply in enumerate(replies):
            if "refused" in reply:
                raise RefusedError(f"site {i} refused: {reply['refused']}")
            r = np.asarray(reply["release"], dtype=float)
            if r.shape != theta.shape:
                raise ValueError(f"site {i} sent a release of shape {r.shape}, expected {theta.shape}")
            out.append(r[None])
        return out

    def local_steps(self, start, *, K, eta, sigma, noise, part="full", drift=None):
        """Each site's K noisy local steps (1, m, d, k) from ``start`` (its own noise; no drift)."""
        if drift is not None:
            raise ValueError("a drift (DP-SCAFFOLD) is not run across sites")
        request = {"op": "local", "K": int(K), "eta": float(eta), "part": str(part)}
        return np.stack(self._releases(request, start[0]), axis=1)

    def server_steps(self, theta, w, *, K, eta, sigma, noise):
        """K FedSGD steps (`fedgdp.realdata.backend.server_descent`) on the sites' noisy gradients."""
        step: dict = {}

        def release(i, T):
            if i == 0:
                step["releases"] = self._releases({"op": "gradient"}, T[0])
            return step["releases"][i]

        return server_descent(theta, w, K=K, eta=eta, m=self.m, release=release)

    def newton_release(self, theta1, *, hessian_bound):
        """Each site's noisy Newton release at ``theta1`` (the noise is added at the site), (1, m, d, k)."""
        request = {"op": "newton", "hessian_bound": None if hessian_bound is None else float(hessian_bound)}
        return np.stack(self._releases(request, theta1[0]), axis=1)

    def add_noise(self, local, sigma, noise):
        """``local`` unchanged: each site added its noise before sending (`newton_release`)."""
        return local


@dataclass
class Recorder:
    """A stand-in site that answers zeros and records the requests' public parts
    (the script a site checks requests against, `fedgdp.federation.site.Site`)."""

    requests: list = field(default_factory=list)

    def __call__(self, pairs: list) -> list:
        self.requests += [{k: v for k, v in request.items() if k != "theta"} for _, request in pairs]
        return [{"release": np.zeros_like(request["theta"])} for _, request in pairs]


def run_method(meth, fold: PublicFold, s, ask):
    """The method's own ``run`` across sites; the fit (``theta`` (d, k), the planned ledger); ValueError when a
    private estimate is not finite.

    Parameters
    ----------
    meth : fedgdp.methods.Method
        The method.
    fold : PublicFold
        The public fold.
    s : MethodSettings
        The method's frozen settings (`fedgdp.methods.Method.settings`).
    ask : callable
        ``ask([(i, request), ...]) -> [reply, ...]`` (`SitesBackend`).
    """
    meth.check_backend(REALDATA)
    return check_finite_release(meth.name, fold, meth.run(SitesBackend(fold, ask), s))[0]
