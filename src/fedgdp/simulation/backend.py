"""The simulation backend of the algorithm core: a block of replicates in the kernels' layout.

`ClientBlock` (the clients of a block, rows-contiguous and features-first, with the
fused kernels' steps and Hessians), `FitData` (a block, its privacy setting and the
calibration of a method's plan), `SimBackend` (its `fedgdp.methods.Backend`) and
`aggregation_weights`. ``n_rep`` replicates, ``m`` clients, ``d`` parameters; shapes as
in `fedgdp.methods.base`, noise ``(n_rep, K, m, d)``. All methods start at theta = 0.
Every client is computed on its own, so a replicate's numbers do not depend on which
replicates share its block (docs/ARCHITECTURE.md, "The fast path").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..core import privacy
from ..core.glm import GLM
from ..core.privacy import RELEASES, Fixed, Ledger, PrivateQuantile, Quantile
from ..core.solvers import floored_solve, ridge_solve
from ..methods import SIMULATION, Fit, Method, PreDrawnNoise, registry
from ..methods import get_method as _get_method
from .data import Replicate

__all__ = ["ClientBlock", "FitData", "SimBackend", "REGISTRY", "get_method", "aggregation_weights"]


# ------------------------------------------------------------------ data layout
_NO_NOISE = np.zeros((0, 0, 0, 0))   # Z of a non-private run (never read)
_NO_CLIP = np.zeros(0)               # residual clips of a non-private run (never read)


def _scaled_limits(X: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``scale / ||x_j||`` for rows whose norm or its inverse is not a normal float, computed
    as ``(scale/a) / ||x/a||`` (``a`` the largest entry) so never above the exact value by
    more than the clip margin; inf for a zero row, 0 for a row that is not finite.
    """
    a = np.max(np.abs(X), axis=1)
    ok = np.isfinite(a) & (a > 0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        safe = np.where(ok, a, 1.0)
        first = privacy.round_down_subnormal(np.minimum(scale / safe, np.finfo(np.float64).max))
        q = privacy.round_down_subnormal(first / privacy.row_norms(X / safe[:, None]))
    return np.where(ok, q, np.where(a == 0, np.inf, 0.0))


class ClientBlock:
    """The clients of a block of replicates in the layout of `fedgdp.simulation.kernels`.

    Parameters
    ----------
    reps : list of Replicate
        ``n_rep`` replicates with the same number of clients m.
    glm : GLM
        ``logistic`` or ``poisson`` (the models the compiled kernels know).

    Attributes
    ----------
    XT : ndarray of shape (d, N)   all rows, features first, client after client
    y, inv_norm : ndarray of shape (N,)   responses and ``1/||x_j||``
    offsets : ndarray of shape (n_rep m + 1,)   client ``c = r m + i`` owns ``offsets[c]:offsets[c+1]``
    groups : ndarray   groups of clients of the local steps (`fedgdp.simulation.kernels.client_groups`)
    sizes : ndarray of shape (n_rep, m)
    """

    def __init__(self, reps: list[Replicate], glm: GLM):
        from .kernels import MODEL_CODES, client_groups

        if glm.name not in MODEL_CODES:
            raise ValueError(f"no compiled kernel for model {glm.name!r}; have {sorted(MODEL_CODES)}")
        self.glm = glm
        self.model = MODEL_CODES[glm.name]
        self.n_rep, self.m = len(reps), reps[0].sizes.shape[0]
        self.d = reps[0].X.shape[1]
        self.sizes = np.stack([r.sizes for r in reps])
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes.ravel())]).astype(np.int64)
        self.XT = np.empty((self.d, self.offsets[-1]))
        start = 0
        for r in reps:
            self.XT[:, start:start + r.X.shape[0]] = r.X.T
            start += r.X.shape[0]
        self.y = np.ascontiguousarray(np.concatenate([r.y for r in reps]), dtype=float)
        # a zero row: 1/0 = inf, no clip (a row of subnormal norm: clip_bounds redoes its limit)
        with np.errstate(divide="ignore", over="ignore"):
            self.inv_norm = 1.0 / privacy.row_norms(self.XT.T, np.sqrt(np.einsum("kn,kn->n", self.XT, self.XT)))
        self.groups = client_groups(self.sizes)
        # the intercept column (all ones) is not read by the kernels: x * 1.0 == x, same numbers
        self.ones = bool(self.XT.shape[1] and np.all(self.XT[0] == 1.0))

    @property
    def C(self) -> int:
        """Number of clients in the block, ``n_rep m``."""
        return self.n_rep * self.m

    def clip_bounds(self, B: np.ndarray | None) -> np.ndarray | None:
        """The clip of every row's residual, ``(1 - kappa) B_r / ||x_j||`` (N,), or None: the rule of
        `fedgdp.core.privacy.clip_factors` that the kernels port.

        Parameters
        ----------
        B : ndarray of shape (n_rep,), or None
            The clipping bound of each replicate (None: no clipping).
        """
        if B is None:
            return None
        scale = np.repeat(privacy.clip_scale(np.asarray(B, float), self.d), self.sizes.sum(axis=1))
        lim = scale * self.inv_norm
        # where 1/||x_j|| or the limit is subnormal, or 1/||x_j|| overflowed (a row of subnormal
        # entries, whose residual may still be huge), the limit from the row scaled by its
        # largest entry a: (s/a)/||x/a||, each subnormal quotient rounded down (as the reference's)
        redo = ~((self.inv_norm >= privacy.TINY64) & (self.inv_norm < np.inf) & (lim >= privacy.TINY64))
        if redo.any():
            lim[redo] = _scaled_limits(self.XT[:, redo].T, scale[redo])
        return lim

    def _clip(self, bounds):
        return (_NO_CLIP, False) if bounds is None else (bounds, True)

    def _per_client(self, a) -> np.ndarray:
        """An ``(n_rep, m)``-broadcastable array as a contiguous ``(n_rep m,)`` float array."""
        return np.ascontiguousarray(np.broadcast_to(np.asarray(a, float), (self.n_rep, self.m)).ravel())

    def gradients(self, theta: np.ndarray, bounds) -> np.ndarray:
        """Average clipped gradient (n_rep, m, d) of every client at its own parameter.

        Parameters
        ----------
        theta : ndarray of shape (n_rep, m, d)
            Every client's parameter.
        bounds : ndarray of shape (N,), or None
            Residual clips (`clip_bounds`).
        """
        from . import kernels

        th = np.ascontiguousarray(theta, dtype=float).reshape(self.C, self.d)
        out = np.empty((self.C, self.d))
        lim, clip = self._clip(bounds)
        kernels.gradients(self.XT, self.y, lim, self.offsets, self.groups, th, self.model, clip, out, self.ones)
        return out.reshape(self.n_rep, self.m, self.d)

    def local_steps(self, theta, *, K, eta, bounds, sigma, Z) -> np.ndarray:
        """K noisy local steps (`fedgdp.simulation.kernels.local_descent`): a new (n_rep, m, d) array.

        Parameters
        ----------
        theta : ndarray of shape (n_rep, m, d)
            Every client's start (not changed).
        K, eta
            Local steps and their size.
        bounds : ndarray of shape (N,), or None
            Residual clips (`clip_bounds`), None: no clipping.
        sigma : float or ndarray
            Noise sds, broadcastable to (n_rep, m).
        Z : ndarray of shape (n_rep, K, m, d), or None
            Standard normals (None: no noise).
        """
        from . import kernels

        th = np.array(theta, dtype=float, order="C").reshape(self.C, self.d)
        lim, clip = self._clip(bounds)
        noise = _NO_NOISE if Z is None else np.ascontiguousarray(Z, dtype=float)
        kernels.local_descent(self.XT, self.y, lim, self.offsets, self.groups, self.m, th, int(K), float(eta),
                              self.model, clip, self._per_client(sigma), noise, Z is not None, self.ones)
        return th.reshape(self.n_rep, self.m, self.d)

    def server_steps(self, theta, w, *, K, eta, bounds, sigma, Z) -> np.ndarray:
        """K FedSGD steps (`fedgdp.simulation.kernels.server_descent`): a new (n_rep, d) array.

        Parameters
        ----------
        theta : ndarray of shape (n_rep, d)
            The global start (not changed).
        w : ndarray of shape (n_rep, m)
            Aggregation weights.
        K, eta, bounds, sigma, Z
            As in `local_steps` (K: server steps).
        """
        from . import kernels

        th = np.array(theta, dtype=float, order="C")
        w = np.ascontiguousarray(w, dtype=float)
        wrow = np.repeat((w / self.sizes).ravel(), self.sizes.ravel())
        lim, clip = self._clip(bounds)
        noise = _NO_NOISE if Z is None else np.ascontiguousarray(Z, dtype=float)
        kernels.server_descent(self.XT, self.y, lim, self.offsets, self.m, th, wrow, w, int(K), float(eta),
                               self.model, clip, self._per_client(sigma), noise, Z is not None, self.ones)
        return th

    def hessians(self, theta: np.ndarray, bound: float | None = None) -> np.ndarray:
        """Mean Hessian of every client's loss at its parameter, (n_rep, m, d, d).

        Parameters
        ----------
        theta : ndarray of shape (n_rep, m, d)
            Every client's parameter.
        bound : float or None
            ``H_c``: each per-sample Hessian's weight becomes ``min(b''(eta_j), H_c / ||x_j||^2)``
            (certified FedNewton); None: unclipped (Algorithm 4 as printed).
        """
        from . import kernels

        th = np.ascontiguousarray(theta, dtype=float).reshape(self.C, self.d)
        out = np.empty((self.C, self.d, self.d))
        kernels.hessians(self.XT, self.inv_norm, self.offsets, th, self.model,
                         np.inf if bound is None else float(bound), out)
        return out.reshape(self.n_rep, self.m, self.d, self.d)


# --------------------------------------------------------------- shared pieces
def aggregation_weights(sizes: np.ndarray, rule: str, *, B=None, mu=np.inf, releases=1, d=1) -> np.ndarray:
    """Server weights (n_rep, m), rows summing to one: ``size``, ``n_i / N`` (the paper's simulations);
    ``optimal``, proportional to ``(d/n_i + B^2 K d/(mu^2 n_i^2))^{-1}`` (Theorem 3.2, Remark 3.3).

    Parameters
    ----------
    sizes : ndarray of shape (n_rep, m)
        Client sizes ``n_i``.
    rule : str
        ``size`` or ``optimal`` (ValueError otherwise); ``size`` whenever mu is inf.
    B : float or ndarray of shape (n_rep,)
        Clipping bound per replicate (``optimal`` only).
    mu : float
        The target mu.
    releases : int
        Noisy releases per client, the K of Theorem 3.2.
    d : int
        Parameter dimension.
    """
    n = sizes.astype(float)
    if rule == "size" or not np.isfinite(mu):
        w = n
    elif rule == "optimal":
        B = np.asarray(B, float).reshape(-1, 1)
        w = 1.0 / (d / n + B ** 2 * releases * d / (mu ** 2 * n ** 2))
    else:
        raise ValueError(f"unknown weights rule {rule!r}; use 'size' or 'optimal'")
    return w / w.sum(axis=-1, keepdims=True)


@dataclass
class FitData:
    """Everything a method needs for one block of replicates.

    Attributes
    ----------
    reps : list of Replicate
    glm : GLM
    B : ndarray of shape (n_rep,)   clipping bound per replicate (inf when mu = inf)
    mu : float                target mu (inf: non-private)
    tau1 : float              eigenvalue floor of FedNewton
    weights : str             ``size`` or ``optimal``
    privacy : dict            ``{"mode": "paper" | "certified", "hessian_clip": factor of tau1}``
    clip : Fixed, Quantile or PrivateQuantile (or its dict form)   the clipping rule that gave B (its share
                              of mu^2, ledger notes)
    release : str             ``private``, ``clip_only`` or ``plain`` (`fedgdp.core.privacy.RELEASES`,
                              docs/methods.md §9)
    """

    reps: list
    glm: GLM
    B: np.ndarray
    mu: float
    tau1: float
    weights: str = "size"
    privacy: dict = field(default_factory=lambda: dict(privacy.DEFAULT_PRIVACY))
    clip: Fixed | Quantile | PrivateQuantile | dict = field(
        default_factory=lambda: privacy.clip_rule(privacy.DEFAULT_CLIP))
    release: str = "private"

    def __post_init__(self):
        if self.release not in RELEASES:
            raise ValueError(f"release must be one of {', '.join(RELEASES)}, got release={self.release!r}")
        if self.release == "plain":
            self.mu = np.inf

    @property
    def private(self) -> bool:
        """Whether the releases carry privacy noise (`fedgdp.core.privacy.adds_noise`)."""
        return privacy.adds_noise(self.mu, self.release)

    @property
    def clipped(self) -> bool:
        """Whether per-sample gradients are clipped to B (`fedgdp.core.privacy.clips`)."""
        return privacy.clips(self.mu, self.release)

    @cached_property
    def full(self) -> ClientBlock:
        return ClientBlock(self.reps, self.glm)

    @cached_property
    def halves(self) -> tuple[ClientBlock, ClientBlock]:
        pairs = [r.halves() for r in self.reps]
        return ClientBlock([p[0] for p in pairs], self.glm), ClientBlock([p[1] for p in pairs], self.glm)

    @property
    def sizes(self) -> np.ndarray:
        return self.full.sizes

    def bounds(self, data: ClientBlock):
        """`ClientBlock.clip_bounds` of ``data`` at ``B``, or None when the fit does not clip.

        Parameters
        ----------
        data : ClientBlock
            `full` or one of `halves`.
        """
        return data.clip_bounds(self.B if self.clipped else None)

    def calibrate(self, plan: tuple) -> tuple[tuple, Ledger]:
        """Noise sds of a method's plan, one (n_rep, m) array per spec, and its ledger
        (`fedgdp.core.privacy.calibrate`); a ``private_quantile`` clip's histogram release comes first in the
        ledger.

        Parameters
        ----------
        plan : tuple of fedgdp.core.privacy.ReleaseSpec
            The method's releases.
        """
        mu = self.mu if self.private else np.inf     # clip_only: no noise, so no private release
        cal = privacy.calibrate_with_clip(plan, mu=mu, clip=self.clip, n=self.sizes.astype(float))
        return cal.sigmas, cal.ledger

    # -- what the core reads (fedgdp.methods)
    kind = SIMULATION

    @property
    def plan_B(self) -> np.ndarray:
        """The clipping bound as a (n_rep, 1) column (a plan's ``B``)."""
        return self.B[:, None]

    @property
    def plan_n(self) -> np.ndarray:
        """Client sizes (n_rep, m) as floats (a plan's ``n``)."""
        return self.sizes.astype(float)

    #: FedNewton's solves are dense here: no iterative-solve term in its sensitivity
    solve_tol = 0.0

    def plan_halves(self) -> tuple[np.ndarray, np.ndarray]:
        """FedNewton's half sizes (n_rep, m) each, as floats."""
        h1, h2 = self.halves
        return h1.sizes.astype(float), h2.sizes.astype(float)

    def backend(self, noise: dict) -> SimBackend:
        """This block with one method's stacked noise arrays (`SimBackend`).

        Parameters
        ----------
        noise : dict
            Name -> standard normals (n_rep, ...), or None values when non-private.
        """
        return SimBackend(self, noise)


def _same(a: tuple, b: tuple) -> bool:
    """Element-wise equality of two tuples of scalars, arrays or None."""
    return all((x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
               for x, y in zip(a, b))


class SimBackend:
    """The simulation's `fedgdp.methods.Backend`: n_rep replicates, pre-drawn noise, compiled steps."""

    kind = SIMULATION

    def __init__(self, fd: FitData, noise: dict):
        self.data, self.noise = fd, PreDrawnNoise(noise)
        self.m, self.dk = fd.full.m, fd.full.d

    def calibrate(self, method, s):
        """The sds of ``method``'s plan on this block and its one ledger (`FitData.calibrate`)."""
        sigmas, ledger = self.data.calibrate(method.plan(self.data, s))
        return sigmas, [ledger]

    def weights(self, releases):
        """The block's aggregation weights (`aggregation_weights` at the block's rule, B and mu)."""
        fd = self.data
        return aggregation_weights(fd.sizes, fd.weights, B=fd.B, mu=fd.mu, releases=releases, d=fd.full.d)

    def zeros(self):
        return np.zeros((self.data.full.n_rep, self.dk))

    def start(self):
        """Every GLM method starts at 0."""
        return self.zeros()

    def _part(self, part: str) -> ClientBlock:
        if part == "full":
            return self.data.full
        if part == "half1":
            return self.data.halves[0]
        raise ValueError(f"unknown part {part!r}; use full or half1")

    def local_steps(self, start, *, K, eta, sigma, noise, part="full", drift=None):
        """K noisy local steps of every client of ``part`` from the global ``start`` (no drift here)."""
        if drift is not None:
            raise ValueError("the simulation backend has no drift term in its local steps")
        data = self._part(part)
        return data.local_steps(np.repeat(start[:, None, :], data.m, axis=1), K=K, eta=eta,
                                bounds=self.data.bounds(data), sigma=sigma, Z=noise)

    def average(self, w, local):
        """``sum_i w_i local_i`` per replicate."""
        return np.einsum("rm,rmd->rd", w, local)

    def server_steps(self, theta, w, *, K, eta, sigma, noise):
        """K FedSGD steps on the full block (`ClientBlock.server_steps`)."""
        data = self.data.full
        return data.server_steps(theta, w, K=K, eta=eta, bounds=self.data.bounds(data), sigma=sigma, Z=noise)

    def newton_release(self, theta1, *, hessian_bound):
        """``theta1 - s_i`` (n_rep, m, d): half-1 Hessian system (floor, or ridge when clipped)."""
        fd = self.data
        h1, h2 = fd.halves
        at = np.repeat(theta1[:, None, :], h1.m, axis=1)
        g = h2.gradients(at, fd.bounds(h2))
        if hessian_bound is not None:
            return at - ridge_solve(h1.hessians(at, hessian_bound), g, fd.tau1)
        return at - floored_solve(h1.hessians(at), g, fd.tau1)

    def add_noise(self, local, sigma, noise):
        """``local + sigma Z``, in place (``local`` unchanged when noise is None)."""
        if noise is not None:
            local += sigma[..., None] * noise
        return local

    def memo(self, key, inputs, compute):
        """Results kept on the block (`FitData`), reused for equal inputs."""
        cached = self.data.__dict__.get(key)
        if cached is not None and _same(cached[0], inputs):
            return cached[1]
        value = compute()
        self.data.__dict__[key] = (inputs, value)
        return value

    def finish(self, theta, ledgers, comm):
        """The block's one fit."""
        return [Fit(theta, ledgers[0], **comm)]


#: The methods the simulations run (a view of `fedgdp.methods.REGISTRY`).
REGISTRY = registry(SIMULATION)


def get_method(name: str) -> Method:
    """A method that runs on the simulation (ValueError naming the bad value otherwise).

    Parameters
    ----------
    name : str
        The method's name.
    """
    return _get_method(name, SIMULATION)
