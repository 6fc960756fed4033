"""The four private federated estimators, vectorised over replicates and clients.

Methods (paper section 3, docs/methods.md §2-3), each behind one interface (:class:`Method`) and
listed in :data:`REGISTRY`:

- ``fedsgd``    Algorithm 1: K server steps on noisy client gradients.
- ``fedhybrid`` Algorithm 2: K1 noisy local steps, average, then K2 FedSGD steps.
- ``fedavg``    Algorithm 3: R rounds of K noisy local steps, averaged.
- ``fednewton`` Algorithm 4: FedAvg (R = 1) on half 1 of every client, then one
  private local Newton step (Hessian on half 1, clipped gradient on half 2); in
  privacy mode ``certified`` with clipped per-sample Hessians and a ridge solve.
- ``fednewton_certified`` the certified FedNewton in every mode (same noise draws).

Privacy: each method declares its releases as a plan (:mod:`fedgdp.privacy`) and
:meth:`FitData.calibrate` turns it into noise sds and a ledger.

Conventions
-----------
``R`` replicates (of one cell), ``m`` clients, ``d`` parameters. Parameters are
``(R, d)`` (global) or ``(R, m, d)`` (per client); sizes, clipping bounds and noise
sds are ``(R, m)`` or ``(R,)``; standard-normal noise arrays carry the replicate axis
first, e.g. ``(R, K, m, d)``. All methods start at theta = 0.

Speed: :class:`ClientData` stores the clients of a block of replicates rows-contiguous
and features-first, and the gradient steps run in the fused compiled kernels of
:mod:`fedgdp.kernels` (one pass over a client's rows per step; clipping a per-sample
gradient ``r_j x_j`` is clipping the scalar ``r_j`` to ``B/||x_j||``). Every client is
computed on its own, so a replicate's numbers do not depend on which replicates share
its block.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import privacy
from .glm import GLM
from .simulate import Replicate

__all__ = ["ClientData", "FitData", "Fit", "Method", "REGISTRY", "get_method",
           "aggregation_weights", "floored_solve", "ridge_solve", "RELEASES"]


#: What a fit releases (:class:`FitData` ``release``): the private algorithm, the same
#: with its noise left out (clipped to the same bound), or neither clipped nor noisy.
RELEASES = ("private", "clip_only", "plain")


# ------------------------------------------------------------------ data layout
_NO_NOISE = np.zeros((0, 0, 0, 0))   # Z of a non-private run (never read)
_NO_CLIP = np.zeros(0)               # residual clips of a non-private run (never read)


class ClientData:
    """The clients of a block of replicates in the layout of :mod:`fedgdp.kernels`.

    Parameters
    ----------
    reps : list of Replicate
        ``R`` replicates with the same number of clients m.
    glm : GLM
        ``logistic`` or ``poisson`` (the models the compiled kernels know).

    Attributes
    ----------
    XT : ndarray, shape (d, N)   all rows, features first, client after client
    y, inv_norm : ndarray, shape (N,)   responses and ``1/||x_j||``
    offsets : ndarray, shape (R m + 1,)   client ``c = r m + i`` owns ``offsets[c]:offsets[c+1]``
    groups : ndarray   groups of clients of the local steps (:func:`fedgdp.kernels.client_groups`)
    sizes : ndarray, shape (R, m)
    """

    def __init__(self, reps: list[Replicate], glm: GLM):
        from .kernels import MODEL_CODES, client_groups

        if glm.name not in MODEL_CODES:
            raise ValueError(f"no compiled kernel for model {glm.name!r}; have {sorted(MODEL_CODES)}")
        self.glm = glm
        self.model = MODEL_CODES[glm.name]
        self.R, self.m = len(reps), reps[0].sizes.shape[0]
        self.d = reps[0].X.shape[1]
        self.sizes = np.stack([r.sizes for r in reps])
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes.ravel())]).astype(np.int64)
        self.XT = np.empty((self.d, self.offsets[-1]))
        start = 0
        for r in reps:
            self.XT[:, start:start + r.X.shape[0]] = r.X.T
            start += r.X.shape[0]
        self.y = np.ascontiguousarray(np.concatenate([r.y for r in reps]), dtype=float)
        self.inv_norm = 1.0 / np.sqrt(np.einsum("kn,kn->n", self.XT, self.XT))
        self.groups = client_groups(self.sizes)

    @property
    def C(self) -> int:
        """Number of clients in the block, ``R m``."""
        return self.R * self.m

    def clip_bounds(self, B: np.ndarray | None) -> np.ndarray | None:
        """The clip of every row's residual, ``B_r / ||x_j||``, shape ``(N,)`` (B: one
        bound per replicate, shape (R,)), or None (no clipping)."""
        if B is None:
            return None
        return np.repeat(np.asarray(B, float), self.sizes.sum(axis=1)) * self.inv_norm

    def _clip(self, bounds):
        return (_NO_CLIP, False) if bounds is None else (bounds, True)

    def _per_client(self, a) -> np.ndarray:
        """An ``(R, m)``-broadcastable array as a contiguous ``(R m,)`` float array."""
        return np.ascontiguousarray(np.broadcast_to(np.asarray(a, float), (self.R, self.m)).ravel())

    def gradients(self, theta: np.ndarray, bounds) -> np.ndarray:
        """Average clipped gradient of every client at its own parameter.

        Parameters
        ----------
        theta : ndarray, shape (R, m, d)
        bounds : from :meth:`clip_bounds`

        Returns
        -------
        ndarray, shape (R, m, d)
        """
        from . import kernels

        th = np.ascontiguousarray(theta, dtype=float).reshape(self.C, self.d)
        out = np.empty((self.C, self.d))
        lim, clip = self._clip(bounds)
        kernels.gradients(self.XT, self.y, lim, self.offsets, self.groups, th, self.model, clip, out)
        return out.reshape(self.R, self.m, self.d)

    def local_steps(self, theta, *, K, eta, bounds, sigma, Z) -> np.ndarray:
        """K noisy local steps of every client from ``theta`` (R, m, d); see
        :func:`local_descent`. Returns a new (R, m, d) array."""
        from . import kernels

        th = np.array(theta, dtype=float, order="C").reshape(self.C, self.d)
        lim, clip = self._clip(bounds)
        noise = _NO_NOISE if Z is None else np.ascontiguousarray(Z, dtype=float)
        kernels.local_descent(self.XT, self.y, lim, self.offsets, self.groups, self.m, th, int(K), float(eta),
                              self.model, clip, self._per_client(sigma), noise, Z is not None)
        return th.reshape(self.R, self.m, self.d)

    def server_steps(self, theta, w, *, K, eta, bounds, sigma, Z) -> np.ndarray:
        """K FedSGD steps of every replicate from the global ``theta`` (R, d); see
        :func:`server_descent`. Returns a new (R, d) array."""
        from . import kernels

        th = np.array(theta, dtype=float, order="C")
        w = np.ascontiguousarray(w, dtype=float)
        wrow = np.repeat((w / self.sizes).ravel(), self.sizes.ravel())
        lim, clip = self._clip(bounds)
        noise = _NO_NOISE if Z is None else np.ascontiguousarray(Z, dtype=float)
        kernels.server_descent(self.XT, self.y, lim, self.offsets, self.m, th, wrow, w, int(K), float(eta),
                               self.model, clip, self._per_client(sigma), noise, Z is not None)
        return th

    def hessians(self, theta: np.ndarray, bound: float | None = None) -> np.ndarray:
        """Hessian of every client's loss at its parameter, (R, m, d, d).

        ``bound = H_c`` clips every per-sample Hessian ``b''(eta_j) x_j x_j'`` to
        operator norm H_c: its weight becomes ``min(b''(eta_j), H_c / ||x_j||^2)``
        (certified FedNewton); None leaves them unclipped (Algorithm 4 as printed).
        """
        from . import kernels

        th = np.ascontiguousarray(theta, dtype=float).reshape(self.C, self.d)
        out = np.empty((self.C, self.d, self.d))
        kernels.hessians(self.XT, self.inv_norm, self.offsets, th, self.model,
                         np.inf if bound is None else float(bound), out)
        return out.reshape(self.R, self.m, self.d, self.d)


# --------------------------------------------------------------- shared pieces
def aggregation_weights(sizes: np.ndarray, rule: str, *, B=None, mu=np.inf, releases=1, d=1) -> np.ndarray:
    """Server weights, shape ``(R, m)``, rows summing to one.

    ``size``: ``n_i / N`` (the paper's simulations). ``optimal``: proportional to
    ``(d/n_i + B^2 K d/(mu^2 n_i^2))^{-1}`` (Theorem 3.2, Remark 3.3), K = number of
    noisy releases per client.
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


def floored_solve(H: np.ndarray, g: np.ndarray, tau1: float) -> np.ndarray:
    """Solve ``H_floor s = g`` with H's eigenvalues floored at tau1 (docs/methods.md §2).

    H: (..., d, d) symmetric, g: (..., d). Returns s: (..., d), ``||s|| <= ||g||/tau1``.
    """
    bad = ~(np.isfinite(H).all(axis=(-1, -2)) & np.isfinite(g).all(axis=-1))
    if bad.any():   # a diverged client: keep NaN instead of failing inside LAPACK
        H = np.where(bad[..., None, None], np.eye(H.shape[-1]), H)
    lam, V = np.linalg.eigh(H)
    lam = np.maximum(lam, tau1)
    coef = np.einsum("...ji,...j->...i", V, g) / lam
    s = np.einsum("...ij,...j->...i", V, coef)
    s[bad] = np.nan
    return s


def ridge_solve(H: np.ndarray, g: np.ndarray, tau1: float) -> np.ndarray:
    """Solve ``(H + tau1 I) s = g`` (certified FedNewton).

    H: (..., d, d) symmetric PSD, g: (..., d). Returns s: (..., d); NaN for a
    client whose H or g is not finite (a diverged run).
    """
    bad = ~(np.isfinite(H).all(axis=(-1, -2)) & np.isfinite(g).all(axis=-1))
    A = H + tau1 * np.eye(H.shape[-1])
    if bad.any():
        A = np.where(bad[..., None, None], np.eye(H.shape[-1]), A)
        g = np.where(bad[..., None], 0.0, g)
    s = np.linalg.solve(A, g[..., None])[..., 0]
    s[bad] = np.nan
    return s


@dataclass
class FitData:
    """Everything a method needs for one block of replicates.

    Attributes
    ----------
    reps : list of Replicate
    glm : GLM
    B : ndarray, shape (R,)   clipping bound per replicate (inf when mu = inf)
    mu : float                target mu (inf: non-private)
    tau1 : float              eigenvalue floor of FedNewton
    weights : str             ``size`` or ``optimal``
    privacy : dict            ``{"mode": "paper" | "certified", "hessian_clip": factor of tau1}``
    clip : dict               the clipping rule that gave B (its share of mu^2, ledger notes)
    release : str             what the fit releases (:data:`RELEASES`, docs/methods.md §8):
                              ``private`` clipped and noisy (the algorithms); ``clip_only``
                              clipped to the same B, no noise (ledger of mu = inf); ``plain``
                              neither (sets mu = inf: the non-private fit, bit for bit)
    """

    reps: list
    glm: GLM
    B: np.ndarray
    mu: float
    tau1: float
    weights: str = "size"
    privacy: dict = field(default_factory=lambda: {"mode": "paper", "hessian_clip": 4.0})
    clip: dict = field(default_factory=lambda: {"rule": "quantile", "q": 0.9})
    release: str = "private"

    def __post_init__(self):
        if self.release not in RELEASES:
            raise ValueError(f"release must be one of {', '.join(RELEASES)}, got release={self.release!r}")
        if self.release == "plain":
            self.mu = np.inf

    @property
    def private(self) -> bool:
        """Whether the releases carry privacy noise (finite mu, release ``private``)."""
        return bool(np.isfinite(self.mu)) and self.release == "private"

    @property
    def clipped(self) -> bool:
        """Whether per-sample gradients are clipped to B (finite mu, release not ``plain``)."""
        return bool(np.isfinite(self.mu)) and self.release != "plain"

    @cached_property
    def full(self) -> ClientData:
        return ClientData(self.reps, self.glm)

    @cached_property
    def halves(self) -> tuple[ClientData, ClientData]:
        pairs = [r.halves() for r in self.reps]
        return ClientData([p[0] for p in pairs], self.glm), ClientData([p[1] for p in pairs], self.glm)

    @property
    def sizes(self) -> np.ndarray:
        return self.full.sizes

    def bounds(self, data: ClientData):
        return data.clip_bounds(self.B if self.clipped else None)

    def calibrate(self, plan: tuple) -> tuple[tuple, privacy.Ledger]:
        """Noise sds of a method's plan and its ledger (:func:`fedgdp.privacy.calibrate`).

        A ``private_quantile`` clipping rule's histogram release comes first in the
        ledger and the method's releases share the rest of mu^2; a data-driven
        ``quantile`` bound is noted as unaccounted.
        """
        mu = self.mu if self.private else np.inf     # clip_only: no noise, so no private release
        cal = privacy.calibrate_with_clip(plan, mu=mu, clip=self.clip, n=self.sizes.astype(float))
        return cal.sigmas, cal.ledger

    def hessian_bound(self) -> float:
        """The per-sample Hessian clip H_c = hessian_clip * tau1 (certified FedNewton)."""
        return float(self.privacy["hessian_clip"]) * self.tau1

    @property
    def certified_mode(self) -> bool:
        return self.privacy.get("mode", "paper") == "certified"


@dataclass
class Fit:
    """Result of one method on a block: estimates (R, d), ledger, communication."""

    theta: np.ndarray
    ledger: privacy.Ledger
    rounds: int
    floats_up: int
    floats_down: int


def _noise(Z, sigma):
    """``sigma[..., None] * Z`` or 0 when non-private (Z is None)."""
    return 0.0 if Z is None else sigma[..., None] * Z


def _comm(rounds: int, m: int, d: int) -> dict:
    # each round: every client uploads d floats, the server broadcasts d floats to each
    return {"rounds": rounds, "floats_up": rounds * m * d, "floats_down": rounds * m * d}


def local_descent(data: ClientData, theta: np.ndarray, *, K: int, eta: float, bounds,
                  sigma: np.ndarray, Z: np.ndarray | None) -> np.ndarray:
    """K noisy local gradient steps of every client from ``theta`` (R, m, d).

    ``theta_{t+1} = theta_t - eta * mean_j clip(g_j) + sigma Z_t`` (Algorithms 2-4);
    sigma: (R, m), Z: (R, K, m, d) or None. Runs in :func:`fedgdp.kernels.local_descent`.
    """
    return data.local_steps(theta, K=K, eta=eta, bounds=bounds, sigma=sigma, Z=Z)


def server_descent(data: ClientData, theta: np.ndarray, w: np.ndarray, *, K: int, eta: float,
                   bounds, sigma: np.ndarray, Z: np.ndarray | None) -> np.ndarray:
    """K FedSGD steps from the global ``theta`` (R, d):
    ``theta -= eta sum_i w_i (mean_j clip(g_j) + sigma_i Z_ki)`` (Algorithms 1-2);
    w, sigma: (R, m), Z: (R, K, m, d) or None. Runs in :func:`fedgdp.kernels.server_descent`."""
    return data.server_steps(theta, w, K=K, eta=eta, bounds=bounds, sigma=sigma, Z=Z)


# --------------------------------------------------------------------- methods
class Method:
    """One estimator. Subclasses set ``name``/``label`` and implement the hooks.

    ``settings(params)`` turns resolved cell parameters into the method's own
    settings (K, eta, ...); ``noise_shapes`` lists the standard-normal arrays one
    replicate draws (in draw order); ``fit`` runs on a block.
    """

    name = ""
    label = ""
    algorithm = ""

    @property
    def noise_stream(self) -> str:
        """Name that seeds the method's noise generator (its own name by default)."""
        return self.name

    def settings(self, params: dict) -> dict:
        raise NotImplementedError

    def noise_shapes(self, s: dict, m: int, d: int) -> dict[str, tuple]:
        raise NotImplementedError

    def fit(self, fd: FitData, s: dict, noise: dict) -> Fit:
        raise NotImplementedError

    def plan(self, fd: FitData, s: dict) -> tuple:
        """The method's releases (:class:`fedgdp.privacy.ReleaseSpec`), shapes (R, m)."""
        raise NotImplementedError

    def comm(self, s: dict, m: int, d: int) -> dict:
        raise NotImplementedError

    def draw_noise(self, rng: np.random.Generator, s: dict, m: int, d: int, private: bool) -> dict:
        """One replicate's noise, in the order of :meth:`noise_shapes` (None if non-private)."""
        return {k: (rng.standard_normal(shape) if private else None)
                for k, shape in self.noise_shapes(s, m, d).items()}


def _method_params(params: dict, name: str) -> dict:
    return dict(params.get("method_settings", {}).get(name, {}))


class FedSGD(Method):
    name, label, algorithm = "fedsgd", "FedSGD", "Algorithm 1"

    def settings(self, params):
        s = {"K": params["K"], "eta": 0.5} | _method_params(params, self.name)
        return s

    def noise_shapes(self, s, m, d):
        return {"Z": (s["K"], m, d)}

    def comm(self, s, m, d):
        return _comm(s["K"], m, d)

    def plan(self, fd, s):
        return privacy.plan_fedsgd(B=fd.B[:, None], n=fd.sizes.astype(float), K=s["K"])

    def fit(self, fd, s, noise):
        (sigma,), ledger = fd.calibrate(self.plan(fd, s))
        w = aggregation_weights(fd.sizes, fd.weights, B=fd.B, mu=fd.mu, releases=s["K"], d=fd.full.d)
        theta = server_descent(fd.full, np.zeros((fd.full.R, fd.full.d)), w, K=s["K"], eta=s["eta"],
                               bounds=fd.bounds(fd.full), sigma=sigma, Z=noise["Z"])
        return Fit(theta, ledger, **self.comm(s, fd.full.m, fd.full.d))


class FedAvg(Method):
    name, label, algorithm = "fedavg", "FedAvg", "Algorithm 3"

    def settings(self, params):
        s = {"R": 2, "eta": 0.5} | _method_params(params, self.name)
        if "K" not in s:
            s["K"] = params["K"] if params["schedule"] == "paper" else max(1, -(-params["K"] // s["R"]))
        return s

    def noise_shapes(self, s, m, d):
        return {"Z": (s["R"], s["K"], m, d)}

    def comm(self, s, m, d):
        return _comm(s["R"], m, d)

    def plan(self, fd, s):
        return privacy.plan_fedavg(B=fd.B[:, None], n=fd.sizes.astype(float), eta=s["eta"], R=s["R"], K=s["K"])

    def fit(self, fd, s, noise):
        data, R_, K, eta = fd.full, s["R"], s["K"], s["eta"]
        (sigma,), ledger = fd.calibrate(self.plan(fd, s))
        w = aggregation_weights(fd.sizes, fd.weights, B=fd.B, mu=fd.mu, releases=R_ * K, d=data.d)
        bounds = fd.bounds(data)
        theta = np.zeros((data.R, data.d))
        for r in range(R_):
            Z = None if noise["Z"] is None else noise["Z"][:, r]
            local = local_descent(data, np.repeat(theta[:, None, :], data.m, axis=1), K=K, eta=eta,
                                  bounds=bounds, sigma=sigma, Z=Z)
            theta = np.einsum("rm,rmd->rd", w, local)
        return Fit(theta, ledger, **self.comm(s, data.m, data.d))


class FedHybrid(Method):
    name, label, algorithm = "fedhybrid", "FedHybrid", "Algorithm 2"

    def settings(self, params):
        s = {"eta1": 0.5, "eta2": 0.5, "share1": 0.6} | _method_params(params, self.name)
        if "K1" not in s:
            s["K1"] = int(round(s["share1"] * params["K"]))
        if "K2" not in s:
            s["K2"] = params["K"] - s["K1"]
        return s

    def noise_shapes(self, s, m, d):
        return {"Z1": (s["K1"], m, d), "Z2": (s["K2"], m, d)}

    def comm(self, s, m, d):
        return _comm(1 + s["K2"], m, d)

    def plan(self, fd, s):
        return privacy.plan_fedhybrid(B=fd.B[:, None], n=fd.sizes.astype(float), eta1=s["eta1"],
                                      K1=s["K1"], K2=s["K2"])

    def fit(self, fd, s, noise):
        data, K1, K2 = fd.full, s["K1"], s["K2"]
        (a1, a2), ledger = fd.calibrate(self.plan(fd, s))
        w = aggregation_weights(fd.sizes, fd.weights, B=fd.B, mu=fd.mu, releases=K1 + K2, d=data.d)
        bounds = fd.bounds(data)
        local = local_descent(data, np.zeros((data.R, data.m, data.d)), K=K1, eta=s["eta1"],
                              bounds=bounds, sigma=a1, Z=noise["Z1"])
        theta = np.einsum("rm,rmd->rd", w, local)
        theta = server_descent(data, theta, w, K=K2, eta=s["eta2"], bounds=bounds, sigma=a2, Z=noise["Z2"])
        return Fit(theta, ledger, **self.comm(s, data.m, data.d))


class FedNewton(Method):
    """Algorithm 4. In privacy mode ``paper`` as printed (eigenvalue floor, the
    Newton release calibrated on ``8B/(tau1 n)``, uncertified); in mode
    ``certified`` with clipped per-sample Hessians and the ridge solve
    (:func:`fedgdp.privacy.plan_fednewton`)."""

    name, label, algorithm = "fednewton", "FedNewton", "Algorithm 4"
    always_certified = False

    def settings(self, params):
        return {"K": params["K"], "eta": 0.5} | _method_params(params, self.name)

    def noise_shapes(self, s, m, d):
        return {"Z1": (s["K"], m, d), "Z2": (m, d)}

    def comm(self, s, m, d):
        return _comm(2, m, d)

    def certified(self, fd: FitData) -> bool:
        return self.always_certified or fd.certified_mode

    def plan(self, fd: FitData, s: dict) -> tuple:
        h1, h2 = fd.halves
        return privacy.plan_fednewton(B=fd.B[:, None], n1=h1.sizes.astype(float), n2=h2.sizes.astype(float),
                                      eta=s["eta"], K=s["K"], tau1=fd.tau1,
                                      hessian_bound=fd.hessian_bound() if self.certified(fd) else None)

    def newton_update(self, fd: FitData, at: np.ndarray) -> np.ndarray:
        """Every client's pre-noise Newton release ``theta1 - s`` at ``at`` (R, m, d)."""
        h1, h2 = fd.halves
        g = h2.gradients(at, fd.bounds(h2))
        if self.certified(fd):
            return at - ridge_solve(h1.hessians(at, fd.hessian_bound()), g, fd.tau1)
        return at - floored_solve(h1.hessians(at), g, fd.tau1)

    def stage1(self, fd: FitData, *, K, eta, w, sigma, Z) -> np.ndarray:
        """theta1 (R, d): K noisy local steps on half 1, averaged with weights w.

        Both FedNewton variants draw the same noise (common random numbers) and have the
        same stage 1, so the result is kept on ``fd`` and reused when every input is
        equal (checked, not assumed).
        """
        inputs = (K, eta, w, sigma, Z)
        cached = fd.__dict__.get("_newton_stage1")
        if cached is not None and _same(cached[0], inputs):
            return cached[1]
        h1 = fd.halves[0]
        local = local_descent(h1, np.zeros((h1.R, h1.m, h1.d)), K=K, eta=eta, bounds=fd.bounds(h1),
                              sigma=sigma, Z=Z)
        theta1 = np.einsum("rm,rmd->rd", w, local)
        fd.__dict__["_newton_stage1"] = (inputs, theta1)
        return theta1

    def fit(self, fd, s, noise):
        h1, _ = fd.halves
        K, eta = s["K"], s["eta"]
        (s1, s2), ledger = fd.calibrate(self.plan(fd, s))
        w = aggregation_weights(fd.sizes, fd.weights, B=fd.B, mu=fd.mu, releases=K + 1, d=h1.d)
        theta1 = self.stage1(fd, K=K, eta=eta, w=w, sigma=s1, Z=noise["Z1"])
        local = self.newton_update(fd, np.repeat(theta1[:, None, :], h1.m, axis=1))
        if noise["Z2"] is not None:
            local += _noise(noise["Z2"], s2)
        theta = np.einsum("rm,rmd->rd", w, local)
        return Fit(theta, ledger, **self.comm(s, h1.m, h1.d))


def _same(a: tuple, b: tuple) -> bool:
    """Element-wise equality of two tuples of scalars, arrays or None."""
    return all((x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
               for x, y in zip(a, b))


class FedNewtonCertified(FedNewton):
    """Certified FedNewton in every privacy mode, on FedNewton's noise stream (common
    random numbers: the two differ only in the Newton step and its calibration)."""

    name, label, algorithm = "fednewton_certified", "FedNewton (certified)", "Algorithm 4, certified"
    always_certified = True

    @property
    def noise_stream(self) -> str:
        return "fednewton"

    def settings(self, params):
        return {"K": params["K"], "eta": 0.5} | _method_params(params, self.name)


REGISTRY: dict[str, Method] = {M.name: M() for M in (FedSGD, FedHybrid, FedAvg, FedNewton,
                                                      FedNewtonCertified)}


def get_method(name: str) -> Method:
    """Look up a method by name; ValueError naming the bad value otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(REGISTRY)}") from None
