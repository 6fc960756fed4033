"""The real-data backend of the algorithm core: per-client matrices, J privacy levels in one pass.

`RealBackend` implements `fedgdp.methods.Backend` on J `FoldData` with the same data (one
per mu, the batch axis): parameters (J, d, k), per client (J, m, d, k). Noise comes from
one generator (`fedgdp.methods.StreamNoise`) in a fixed order (local steps client by
client, server steps step by step); one draw (d, k) serves all J levels, as J separate
runs seeded alike would draw (common random numbers across mu).
"""
from __future__ import annotations

import numpy as np

from ..core.glm import product_design
from ..methods import REALDATA, Fit, StreamNoise
from ..methods.settings import RidgeSettings
from .clipping import stacked_gradients
from .solvers import newton_step, ridge_fit

__all__ = ["RealBackend", "gradient_release", "local_descent", "local_descent_many", "server_descent",
           "server_descent_many", "same_stream"]


def _draw(noise, shape):
    return None if noise is None else noise.draw(shape)


def local_descent_many(fds: list, i: int, Theta0, *, K: int, eta: float, sigmas, noise,
                       rows: slice = slice(None), drift: np.ndarray | None = None,
                       trace: list | None = None) -> np.ndarray:
    """K noisy local steps of client i at J levels, its parameters (J, d, k) after them:
    ``Theta <- Theta - eta (g(Theta) + drift) + sigma_j Z``, one draw Z (d, k) per step.

    Parameters
    ----------
    fds : list of FoldData, length J
        The folds (same data; one per privacy level).
    i : int
        The client.
    Theta0 : ndarray of shape (J, d, k)
        The start, one per level (not modified).
    K, eta
        Local steps and their size.
    sigmas : array_like of shape (J,)
        Client i's noise sd at each level.
    noise : fedgdp.methods.StreamNoise or None
        The noise stream, None when non-private.
    rows : slice
        The client's rows to use (``slice(None)``: all).
    drift : ndarray of shape (J, d, k), optional
        Added to every step's gradient (SCAFFOLD's correction).
    trace : list or None
        Appended ``("local", i, step, eta, Theta, noise2)`` per iterate, ``noise2`` (J,) the
        expected squared norm of the step's noise (read by `fedgdp.api.diagnostics`).
    """
    Theta = Theta0.copy()
    sig = np.asarray(sigmas, dtype=float)[:, None, None]
    if trace is not None:
        noise2 = (sig[:, 0, 0] ** 2 if noise is not None else np.zeros(len(sig))) * Theta[0].size
        trace.append(("local", i, 0, eta, Theta.copy(), noise2))
    for t in range(K):
        step = stacked_gradients(fds, i, Theta, rows)
        if drift is not None:
            step += drift
        Z = _draw(noise, Theta.shape[1:])
        if Z is not None:                   # the noise joins the step before the step meets Theta
            Theta += sig * Z - eta * step
        else:
            Theta -= eta * step
        if trace is not None:
            trace.append(("local", i, t + 1, eta, Theta.copy(), noise2))
    return Theta


def local_descent(fd, i: int, Theta0, *, K: int, eta: float, sigma: float, rng,
                  rows: slice = slice(None), drift: np.ndarray | None = None) -> np.ndarray:
    """`local_descent_many` at one level on the fold ``fd`` (noise from ``rng``): client i's (d, k).

    Parameters
    ----------
    fd : FoldData
        The fold.
    i, Theta0, K, eta, rows, drift
        As in `local_descent_many`, at one level: Theta0 and drift (d, k).
    sigma : float
        The noise sd.
    rng : numpy.random.Generator or None
        Draws the noise (None: no noise).
    """
    return local_descent_many([fd], i, Theta0[None], K=K, eta=eta, sigmas=np.array([sigma]),
                              noise=StreamNoise(rng).take("Z"), rows=rows,
                              drift=None if drift is None else drift[None])[0]


def server_descent_many(fds: list, Theta0, w, *, K: int, eta: float, sigmas: np.ndarray, noise,
                        trace: list | None = None) -> np.ndarray:
    """K FedSGD steps at J levels to (J, d, k): ``Theta <- Theta - eta sum_i w_i (g_i(Theta) + sigma_i Z_i)``.

    Parameters
    ----------
    fds, noise
        As in `local_descent_many`.
    Theta0 : ndarray of shape (J, d, k)
        The start (not modified).
    w : ndarray of shape (m,)
        Aggregation weights.
    K, eta
        Server steps and their size.
    sigmas : ndarray of shape (J, m)
        Noise sds per level and client.
    trace : list or None
        Appended ``("server", -1, step, eta, Theta, noise2)`` per iterate.
    """
    sig = np.asarray(sigmas, dtype=float)
    noise2 = None
    if trace is not None:
        w_ = np.broadcast_to(np.asarray(w, float), sig.shape[-1:])
        noise2 = (eta ** 2 * (sig ** 2 @ w_ ** 2) if noise is not None else np.zeros(len(sig))) * Theta0[0].size
    return server_descent(Theta0, w, K=K, eta=eta, m=fds[0].m, trace=trace, noise2=noise2,
                          release=lambda i, Theta: gradient_release(fds, i, Theta, sig[:, i], noise))


def gradient_release(fds: list, i: int, Theta: np.ndarray, sigma, noise) -> np.ndarray:
    """Client i's noisy gradient (J, d, k), ``g_i(Theta) + sigma_j Z``: one FedSGD step's release.

    Parameters
    ----------
    fds, i, noise
        As in `local_descent_many`.
    Theta, sigma
        The global parameters (J, d, k) and client i's noise sd at each level (J,).
    """
    g = stacked_gradients(fds, i, Theta)
    Z = _draw(noise, Theta.shape[1:])
    if Z is not None:
        g += np.asarray(sigma, dtype=float)[:, None, None] * Z
    return g


def server_descent(Theta0, w, *, K: int, eta: float, m: int, release, trace: list | None = None,
                   noise2: np.ndarray | None = None) -> np.ndarray:
    """K server steps ``Theta <- Theta - eta sum_i w_i release(i, Theta)`` to (J, d, k), clients in
    turn (also a coordinator's across sites).

    Parameters
    ----------
    Theta0, w, K, eta, trace
        As in `server_descent_many`.
    m : int
        Clients.
    release : callable
        ``release(i, Theta)`` -> client i's noisy gradient (J, d, k) (`gradient_release`).
    noise2 : ndarray of shape (J,) or None
        The trace's expected squared norm of a step's noise.
    """
    Theta = Theta0.copy()
    if trace is not None:
        trace.append(("server", -1, 0, eta, Theta.copy(), noise2))
    for t in range(K):
        total = np.zeros_like(Theta)
        for i in range(m):
            total += w[i] * release(i, Theta)
        Theta -= eta * total
        if trace is not None:
            trace.append(("server", -1, t + 1, eta, Theta.copy(), noise2))
    return Theta


def same_stream(rngs: list) -> bool:
    """True when the generators would draw the same numbers (all None, or all in one state).

    Parameters
    ----------
    rngs : list of numpy.random.Generator or None
        The generators.
    """
    if all(r is None for r in rngs):
        return True
    if any(r is None for r in rngs):
        return False
    state = rngs[0].bit_generator.state
    return all(r.bit_generator.state == state for r in rngs[1:])


class RealBackend:
    """J folds with the same data (one per privacy level) and one noise generator.

    Parameters
    ----------
    fds : list of FoldData, length J
        The folds; ``fds[0]`` is `data` (what a method's plan reads).
    rng : numpy.random.Generator or None
        Draws the noise (`fedgdp.methods.StreamNoise`).
    """

    kind = REALDATA

    def __init__(self, fds: list, rng: np.random.Generator | None):
        self.fds, self.data, self.noise = fds, fds[0], StreamNoise(rng)
        self.m, self.dk = self.data.m, self.data.d * self.data.k
        self.trace = getattr(self.data, "trace", None)      # FoldData.trace: the iterates, for diagnostics

    def calibrate(self, method, s):
        """The noise sds of the method's plan at every level, and the ledgers."""
        cals = [fd.calibrate(method.plan(fd, s)) for fd in self.fds]
        sigmas = tuple(np.stack([c[0][r] for c in cals]) for r in range(len(cals[0][0])))
        return sigmas, [c[1] for c in cals]

    def weights(self, releases):
        """Aggregation weights ``n_i / sum n`` (the same at every level)."""
        return self.data.weights

    def zeros(self):
        return np.zeros((len(self.fds), self.data.d, self.data.k))

    def start(self):
        """Every GLM method starts at 0."""
        return self.zeros()

    def _rows(self, part: str) -> list[slice]:
        """Each client's rows of ``part``: all, or half 1 (its first floor(n_i / 2))."""
        if part == "full":
            return [slice(None)] * self.m
        if part == "half1":
            return [slice(0, int(h)) for h in self.data.half_sizes()]
        raise ValueError(f"unknown part {part!r}; use full or half1")

    def local_steps(self, start, *, K, eta, sigma, noise, part="full", drift=None):
        """K noisy local steps of every client from ``start`` (`local_descent_many`), client by client."""
        return np.stack([local_descent_many(self.fds, i, start, K=K, eta=eta, sigmas=sigma[:, i], noise=noise,
                                            rows=rows, drift=None if drift is None else drift[:, i],
                                            trace=self.trace)
                         for i, rows in enumerate(self._rows(part))], axis=1)

    def average(self, w, local):
        """``sum_i w_i local_i``."""
        return sum(w[i] * local[:, i] for i in range(self.m))

    def server_steps(self, theta, w, *, K, eta, sigma, noise):
        """K FedSGD steps (`server_descent_many`)."""
        return server_descent_many(self.fds, theta, w, K=K, eta=eta, sigmas=sigma, noise=noise, trace=self.trace)

    def newton_release(self, theta1, *, hessian_bound):
        """Every client's pre-noise release ``theta1 - s_i`` (J, m, d, k), s_i by `fedgdp.realdata.solvers.newton_step`.

        Parameters
        ----------
        theta1 : ndarray of shape (J, d, k)
            The stage-1 global parameters.
        hessian_bound : float or None
            Clips per-sample Hessians (certified); None: the solver named by ``data.newton`` (cg, floor or ridge).
        """
        h1, nw = self.data.half_sizes(), self.data.newton
        plain_cg = nw["solver"] == "cg" and hessian_bound is None
        out = np.empty(theta1.shape[:1] + (self.m,) + theta1.shape[1:])
        for j, (fd, T) in enumerate(zip(self.fds, theta1)):
            for i in range(self.m):
                g = fd.gradient(i, T, slice(h1[i], None))
                # CG on the plain Hessian multiplies only; the certified and dense solves need X itself
                X1 = fd.design(i, slice(0, h1[i])) if plain_cg else fd.X[i][:h1[i]]
                out[j, i] = T - newton_step(fd.model, T, X1, g, fd.tau1, solver=nw["solver"],
                                            cg_tol=nw["cg_tol"], cg_maxiter=nw["cg_maxiter"],
                                            hessian_bound=hessian_bound)
        return out

    def add_noise(self, local, sigma, noise):
        """``local_i + sigma_i Z_i`` in place, one draw (d, k) per client serving every level."""
        for i in range(self.m):
            Z = _draw(noise, local.shape[2:])
            if Z is not None:
                local[:, i] += sigma[:, i, None, None] * Z
        return local

    def memo(self, key, inputs, compute):
        """``compute()``: this backend keeps no results."""
        return compute()

    def finish(self, theta, ledgers, comm):
        """The fits, one per level."""
        return [Fit(T, ledger, **comm) for T, ledger in zip(theta, ledgers)]

    # -- the plain fits (non-private, one level)
    def ridge_fit_clients(self, s: RidgeSettings) -> np.ndarray:
        """Each client's ridge MLE on its own data, (m, d, k).

        Parameters
        ----------
        s : RidgeSettings
            ``ridge``, ``maxiter`` and ``gtol`` (`fedgdp.realdata.solvers.ridge_fit`).
        """
        fd = self.data
        return np.stack([ridge_fit(fd.model, fd.design(i), fd.Y[i], ridge=s.ridge, maxiter=s.maxiter,
                                   gtol=s.gtol) for i in range(fd.m)])

    def ridge_fit_pooled(self, s: RidgeSettings) -> tuple[np.ndarray, int]:
        """The ridge MLE on the pooled data (d, k), and the floats uploaded (the pooled X and Y).

        Parameters
        ----------
        s : RidgeSettings
            ``ridge``, ``maxiter`` and ``gtol``.
        """
        X, Y = product_design(list(self.data.X)), np.vstack(self.data.Y)   # CSR when large and sparse
        Theta = ridge_fit(self.data.model, X, Y, ridge=s.ridge, maxiter=s.maxiter, gtol=s.gtol)
        return Theta, int(X.shape[0] * X.shape[1] + Y.size)
