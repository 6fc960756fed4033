"""Real-data federated logistic regression: nine methods, client-level metrics (docs/methods.md §5).

Paper section 5.1 (Figures 7 and 8): binary (odd vs even digit) and 10-class softmax
regression on images split over m clients, 5 folds within each client, S client
splits. For every split and fold, each method trains on the training folds of all
clients and every client scores the result on its own test fold (AUC for binary,
accuracy for multiclass); a client's value is the average over its folds.

Methods (:data:`REGISTRY`, one interface :class:`RealMethod`)
---------------------------------------------------------------
Private (mu-GDP per client, the noise of the table of docs/methods.md §2):

- ``fedsgd``      Algorithm 1: K server steps on noisy clipped client gradients.
- ``fedavg``      Algorithm 3: R rounds of K noisy local steps, averaged.
- ``fedhybrid``   Algorithm 2: K1 noisy local steps, average, then K2 FedSGD steps.
- ``fednewton``   Algorithm 4: FedAvg (R = 1) on half 1 of each client's training
  data, then one private Newton step (Hessian on half 1, clipped gradient on
  half 2), solving ``(H_i + tau1 I) s = g_i`` by conjugate gradients on
  Hessian-vector products (``solver: cg``; no d x d matrix, d = 7850 on MNIST) or,
  for small d, densely with H's eigenvalues floored at tau1 (``solver: floor``).
  Both keep ``||s|| <= ||g_i|| / tau1``, the bound the calibration assumes (CG
  started at 0 has iterates of increasing norm, so a truncated solve keeps it too).
- ``dp_scaffold`` SCAFFOLD (Karimireddy et al. 2020, option II control variates) with
  FedAvg's noise: each local step is ``y <- y - eta (clip-grad_i(y) - c_i + c) +
  sigma Z`` with FedAvg's sigma for R rounds of K steps. The control variates
  ``c_i+ = c_i - c + (theta - y_K) / (K eta)`` and ``c`` are computed from the noisy
  iterates and the server's broadcasts only, i.e. from quantities already released;
  they are post-processing, cost no privacy, and the ledger is FedAvg's (R K
  releases of sensitivity ``2 eta B / n_i``). Option I (a fresh gradient for c_i)
  would be an extra release and is not used.

Non-private baselines (mu = inf: no clipping, no noise; run once, stored with mu = inf):

- ``np_scaffold``, ``np_fedavg``  the same algorithms without privacy (their settings
  default to those of ``dp_scaffold`` and ``fedavg``).
- ``np_localfit`` each client fits alone on its own training folds.
- ``np_pooled``   one fit on the pooled training folds of all clients.
  Both minimise the mean negative log-likelihood plus ``ridge/2 ||Theta||^2`` (the
  intercept row unpenalised) by trust-region Newton-CG (:func:`ridge_fit`, to a
  gradient norm of 1e-8): on images the unpenalised MLE often does not exist
  (separable data, and softmax's redundant parameterisation).

Conventions
-----------
``m`` clients; client i holds ``X_i`` (n_i, d) and targets ``Y_i`` (n_i, k)
(:mod:`fedgdp.glm`, matrix models); parameters are ``Theta`` (d, k). Aggregation
weights are ``w_i = n_i / N`` over training sizes. All methods start at 0.

Privacy: the clipping bound B of a fold follows the configured rule on that fold's
training data: the paper's q-quantile of per-sample gradient norms at Theta = 0, max
over clients (data-driven: recorded as unaccounted, so ``mu_certified`` is inf), a
fixed public value, or the private quantile (noisy histograms, recorded in the
ledger; its noise from the stream ``clip_histogram``, and B then depends on mu).
Every method declares its releases as a plan (:mod:`fedgdp.privacy`); ``privacy:
{mode: certified}`` makes FedNewton clip per-sample Hessians (``fednewton_certified``
does so in every mode). tau1 is a configured number here: the population Hessian of
image data is singular (constant pixels), so the simulations' ``auto`` rule gives 0.

Cost: FedSGD, FedAvg, FedHybrid and (DP-/NP-)SCAFFOLD fit every configured mu in one
pass (:meth:`RealMethod.fit_many`): the J parameters are stacked, each client computes
the scores of all J from one product ``X [Theta_1 ... Theta_J]`` (softmax; binary
computes them one by one, matrix-vector products being faster), clips with each
level's bound, and one noise draw per step serves all J levels, which is what J
separate runs draw, their generators being seeded alike. NP-LocalFit and NP-Pooled
evaluate loss, gradient and probabilities from one product ``X Theta``.

Seeds: the layout of split s comes from :func:`fedgdp.datasets.split_layout`; the
noise of method M in split s, fold f from ``SeedSequence([base_seed,
stable_hash(layout_key + task), s, f, stable_hash(M)])``, the same for every mu
(common random numbers across privacy levels).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from . import privacy
from .datasets import Dataset, layout_key, split_layout
from .estimators import floored_solve
from .realdata_settings import NONPRIVATE, PRIVATE, TASKS, RealdataSettings  # noqa: F401 (re-exported)
from .glm import MatrixGLM, matrix_model
from .simulate import stable_hash

__all__ = [
    "DEFAULTS", "TASKS", "METRICS", "resolve", "FoldData", "RealFit", "RealMethod", "REGISTRY",
    "get_method", "clipped_gradient", "cg_solve", "newton_step", "ridge_fit", "auc", "accuracy",
    "run_split", "write_rows", "read_rows", "COLUMNS", "clip_bound_real",
]

METRICS = {"binary": "auc", "multiclass": "accuracy"}

#: also private, not in the default list: FedNewton with certified privacy in every mode
EXTRA_PRIVATE = ["fednewton_certified"]

#: the defaults (fedgdp.realdata_settings): the digits layout (offline run); config/mnist.yaml holds the paper's
DEFAULTS: dict = RealdataSettings.defaults()

# the settings of docs/methods.md §3. DP-SCAFFOLD runs FedAvg's schedule (so it has FedAvg's noise, docs/methods.md §5)
# plus a server step size eta_g; the NP- versions inherit their private counterpart's.
METHOD_DEFAULTS: dict = {
    "fedsgd": {"K": 50, "eta": 0.5},
    "fedavg": {"R": 2, "K": 50, "eta": 0.5},
    "fedhybrid": {"K1": 30, "eta1": 0.5, "K2": 20, "eta2": 0.5},
    "fednewton": {"K": 50, "eta": 0.5},
    "fednewton_certified": {},     # inherits fednewton's
    "dp_scaffold": {"eta_g": 1.0},  # inherits fedavg's R, K, eta
    "np_scaffold": {},             # inherits dp_scaffold's
    "np_fedavg": {},               # inherits fedavg's
    # ridge: the MLE need not exist on images; maxiter: Newton iterations; gtol: ||gradient||_F
    "np_localfit": {"ridge": 1.0e-3, "maxiter": 200, "gtol": 1.0e-8},
    "np_pooled": {"ridge": 1.0e-3, "maxiter": 200, "gtol": 1.0e-8},
}
_INHERIT = {"fednewton_certified": "fednewton", "dp_scaffold": "fedavg", "np_scaffold": "dp_scaffold", "np_fedavg": "fedavg"}


# --------------------------------------------------------------- parameters
def _check_int(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {name}={value!r}")


def resolve(overrides: dict | None = None) -> dict:
    """Fully resolved real-data parameters (a new dict); ValueError naming a bad value."""
    p = RealdataSettings.build(overrides).as_dict()      # every parameter but the methods'
    if p["methods"] in (["all"], "all"):
        p["methods"] = list(REGISTRY)
    if not p["methods"]:
        raise ValueError("methods must name at least one method")
    for name in p["methods"]:
        get_method(name)
    user = p["method_settings"] or {}
    for name in user:
        get_method(name)
    settings = {}
    for name in REGISTRY:
        s = dict(METHOD_DEFAULTS[name])
        if name in _INHERIT:
            s = {**settings[_INHERIT[name]], **s}
        s.update(user.get(name) or {})
        unknown = set(s) - set(settings.get(_INHERIT.get(name), {})) - set(METHOD_DEFAULTS[name])
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)} for method {name}")
        for key, value in s.items():
            if key in ("K", "R", "K1", "K2", "maxiter"):
                _check_int(f"{name}.{key}", value, low=0 if key == "K2" else 1)
            elif not float(value) > 0:
                raise ValueError(f"{name}.{key} must be > 0, got {value!r}")
        settings[name] = s
    p["method_settings"] = {name: settings[name] for name in p["methods"]}
    return p


# ------------------------------------------------------------- fold data
@dataclass
class FoldData:
    """The training data of one fold, split by client, and the privacy setting.

    Attributes
    ----------
    model : MatrixGLM
    X, Y : list of ndarray
        Client i's design (n_i, d) and targets (n_i, k), rows in random order.
    mu : float          target mu per client (inf: non-private)
    B : float           clipping bound (ignored, no clipping, when mu = inf)
    tau1 : float        FedNewton's eigenvalue floor / ridge
    newton : dict       solver settings (``solver``, ``cg_tol``, ``cg_maxiter``)
    """

    model: MatrixGLM
    X: list
    Y: list
    mu: float = math.inf
    B: float = math.inf
    tau1: float = 0.5
    newton: dict = field(default_factory=lambda: dict(DEFAULTS["newton"]))
    privacy: dict = field(default_factory=lambda: dict(DEFAULTS["privacy"]))
    clip: dict = field(default_factory=lambda: dict(DEFAULTS["clip"]))

    def __post_init__(self):
        self.xnorm = [np.linalg.norm(x, axis=1) for x in self.X]

    @property
    def private(self) -> bool:
        return bool(np.isfinite(self.mu))

    @property
    def m(self) -> int:
        return len(self.X)

    @property
    def d(self) -> int:
        return int(self.X[0].shape[1])

    @property
    def k(self) -> int:
        return int(self.model.k)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([x.shape[0] for x in self.X], dtype=np.int64)

    @property
    def weights(self) -> np.ndarray:
        n = self.sizes.astype(float)
        return n / n.sum()

    @property
    def bound(self) -> float:
        """The clipping bound in force: B, or inf when non-private."""
        return float(self.B) if self.private else math.inf

    def gradient(self, i: int, Theta: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
        """Client i's average clipped gradient at Theta over ``rows`` of its data."""
        return clipped_gradient(self.model, Theta, self.X[i][rows], self.Y[i][rows], self.bound,
                                self.xnorm[i][rows])

    def zeros(self) -> np.ndarray:
        return np.zeros((self.d, self.k))

    def calibrate(self, plan: tuple) -> tuple[list, privacy.Ledger]:
        """Per-client noise sds (one (m,) array per spec) and the ledger of a plan
        built with ``B = self.B`` and ``n`` of shape (1, m)
        (:func:`fedgdp.privacy.calibrate_with_clip`)."""
        cal = privacy.calibrate_with_clip(plan, mu=self.mu, clip=self.clip,
                                          n=self.sizes.astype(float)[None, :])
        return [np.asarray(s)[0] for s in cal.sigmas], cal.ledger

    @property
    def n_row(self) -> np.ndarray:
        """Client sizes as a (1, m) float array (the shape of a plan's ``n``)."""
        return self.sizes.astype(float)[None, :]


def clipped_gradient(model: MatrixGLM, Theta, X, Y, B: float, xnorm=None) -> np.ndarray:
    """Mean over rows of the per-sample gradients ``x_j r_j'`` clipped to norm B.

    The Frobenius norm of ``x_j r_j'`` is ``||x_j|| ||r_j||``, so clipping scales the
    residual row ``r_j``. ``B = inf`` gives the plain gradient.
    """
    R = model.residuals(Theta, X, Y)
    _clip_residuals(R, np.linalg.norm(X, axis=1) if xnorm is None else xnorm, B)
    return X.T @ R / X.shape[0]


def _clip_residuals(R: np.ndarray, xnorm: np.ndarray, B: float) -> None:
    """Scale the rows of R (n, k) in place so that ``||x_j|| ||r_j|| <= B``."""
    if np.isfinite(B):
        norms = xnorm * np.linalg.norm(R, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            R *= np.where(norms > B, B / norms, 1.0)[:, None]


def stacked_gradients(fds: list, i: int, Thetas: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
    """Client i's clipped gradients at J parameters at once, shape (J, d, k).

    ``fds``: J :class:`FoldData` on the same data (one per mu; bound ``fds[j].bound``);
    ``Thetas`` (J, d, k). For softmax (k > 1) and J > 1 the scores of all J come from
    one product ``X [Theta_1 ... Theta_J]`` and the gradients from one ``X' [R_1 ...
    R_J]``: a wider product reads X once for J models (about 1.6x faster for J = 2,
    k = 10 on MNIST-sized clients). For k = 1 (matrix-vector products) the J
    gradients are computed one by one, which is faster there.
    """
    fd = fds[0]
    J, d, k = Thetas.shape
    if J == 1 or k == 1:
        return np.stack([f.gradient(i, T, rows) for f, T in zip(fds, Thetas)])
    X, Y, xn = fd.X[i][rows], fd.Y[i][rows], fd.xnorm[i][rows]
    S = X @ np.concatenate(list(Thetas), axis=1)                 # (n, J k)
    for j, f in enumerate(fds):
        block = S[:, j * k:(j + 1) * k]
        R = fd.model.probabilities_from_scores(block.copy()) - Y
        _clip_residuals(R, xn, f.bound)
        block[...] = R
    return (X.T @ S / X.shape[0]).reshape(d, J, k).transpose(1, 0, 2)


def clip_bound_real(model: MatrixGLM, X: list, Y: list, rule: dict, *, mu: float = math.inf,
                    rng=None) -> float:
    """The clipping bound on real data: max over clients of the q-quantile of the
    per-sample gradient norms at Theta = 0 (``quantile``), the fixed value, or the
    private quantile (:func:`fedgdp.privacy.private_clip_bound`, needs mu and rng)."""
    if rule["rule"] == "fixed":
        return float(rule["value"])
    zero = np.zeros((X[0].shape[1], model.k))
    norms = [np.linalg.norm(x, axis=1) * np.linalg.norm(model.residuals(zero, x, y), axis=1)
             for x, y in zip(X, Y)]
    if rule["rule"] == "private_quantile":
        return privacy.private_clip_bound(norms, rule, mu=mu, rng=rng)
    return float(max(np.quantile(v, rule["q"]) for v in norms))


# ----------------------------------------------------------- Newton step
def cg_solve(apply, b: np.ndarray, *, tol: float = 1e-8, maxiter: int = 500) -> tuple[np.ndarray, int]:
    """Conjugate gradients for ``A x = b`` with A symmetric positive definite.

    ``apply(v)`` returns ``A v`` for arrays shaped like ``b``. Stops when
    ``||b - A x|| <= tol ||b||``. Returns ``(x, iterations)``.
    """
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rs = float(np.vdot(r, r))
    target = tol * math.sqrt(rs)
    if rs == 0.0:
        return x, 0
    for it in range(1, maxiter + 1):
        Ap = apply(p)
        alpha = rs / float(np.vdot(p, Ap))
        x += alpha * p
        r -= alpha * Ap
        rs_new = float(np.vdot(r, r))
        if math.sqrt(rs_new) <= target:
            return x, it
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x, maxiter


def newton_step(model: MatrixGLM, Theta: np.ndarray, X1: np.ndarray, g: np.ndarray, tau1: float, *,
                solver: str = "cg", cg_tol: float = 1e-8, cg_maxiter: int = 500,
                hessian_bound: float | None = None) -> np.ndarray:
    """The step s of FedNewton's local update ``Theta - s`` (shape of Theta).

    ``cg``: ``(H + tau1 I) s = g`` by conjugate gradients on Hessian-vector products
    of the loss on X1 (no dense Hessian). ``ridge``: the same system solved densely.
    ``floor``: ``H_floor s = g`` with H's eigenvalues floored at tau1 (docs/methods.md §2, as in
    the simulations; dense, for small d k). All satisfy ``||s|| <= ||g|| / tau1``.

    ``hessian_bound = H_c`` (certified FedNewton): every per-sample Hessian is clipped
    to operator norm H_c (:meth:`fedgdp.glm.MatrixGLM.hessian_scale`) and the system is
    the ridge one, ``(H + tau1 I) s = g`` (``floor`` is not used: the ridge inverse is
    what the certified sensitivity needs; ``cg`` solves it to ``cg_tol``).
    """
    scale = None if hessian_bound is None else model.hessian_scale(Theta, X1, hessian_bound)
    if scale is not None and solver == "floor":
        solver = "ridge"
    if solver == "cg":
        s, _ = cg_solve(lambda V: model.hvp(Theta, X1, V, scale) + tau1 * V, g, tol=cg_tol,
                        maxiter=cg_maxiter)
        return s
    H = model.hessian(Theta, X1, scale)
    if solver == "ridge":
        return np.linalg.solve(H + tau1 * np.eye(H.shape[0]), g.ravel()).reshape(g.shape)
    if solver == "floor":
        return floored_solve(H, g.ravel(), tau1).reshape(g.shape)
    raise ValueError(f"unknown newton solver {solver!r}; use cg, ridge or floor")


# ------------------------------------------------------------- ridge MLE
def ridge_fit(model: MatrixGLM, X: np.ndarray, Y: np.ndarray, *, ridge: float, maxiter: int,
              gtol: float = 1e-8, Theta0: np.ndarray | None = None) -> np.ndarray:
    """Minimise ``f(Theta) = loss + ridge/2 ||Theta[1:]||^2`` (intercept row free).

    Trust-region Newton-CG (scipy's ``trust-ncg``) on exact Hessian-vector products
    (:meth:`fedgdp.glm.MatrixGLM.hvp_at`), stopping when ``||grad f||_F <= gtol`` or
    after ``maxiter`` Newton iterations. One evaluation is one product ``X Theta``
    (loss, gradient and probabilities together); one Hessian-vector product is two
    products with X. f is strongly convex with modulus at least ``ridge`` on the
    penalised rows, so ``||grad f|| <= 1e-8`` puts them within ``1e-8 / ridge = 1e-5``
    (ridge 1e-3) of the minimiser; softmax's one flat direction (the same shift of
    every class's intercept) changes no probability and is never moved, since the
    gradient is orthogonal to it. L-BFGS, used before, stopped at a max-abs gradient
    of 1e-6 about 0.01 away from the minimiser on MNIST-sized data at a similar cost.
    """
    from scipy.optimize import minimize

    d, k = X.shape[1], model.k
    mask = np.ones((d, k))
    mask[0] = 0.0
    last = {"v": None, "P": None}

    def fun(v):
        T = v.reshape(d, k)
        pen = mask * T
        value, grad, P = model.loss_gradient(T, X, Y)
        last["v"], last["P"] = v.copy(), P
        return value + 0.5 * ridge * float(np.sum(pen * T)), (grad + ridge * pen).ravel()

    def hessp(v, u):
        if last["v"] is None or not np.array_equal(v, last["v"]):
            fun(v)
        U = u.reshape(d, k)
        return (model.hvp_at(last["P"], X, U) + ridge * mask * U).ravel()

    start = np.zeros(d * k) if Theta0 is None else Theta0.ravel()
    res = minimize(fun, start, jac=True, hessp=hessp, method="trust-ncg",
                   options={"maxiter": int(maxiter), "gtol": float(gtol)})
    return res.x.reshape(d, k)


# --------------------------------------------------------------- methods
@dataclass
class RealFit:
    """A method's result on one fold.

    ``theta``: (d, k) global model, or (m, d, k) one model per client (``local``).
    """

    theta: np.ndarray
    ledger: privacy.Ledger
    rounds: int
    floats_up: int
    floats_down: int
    local: bool = False

    def client_theta(self, i: int) -> np.ndarray:
        return self.theta[i] if self.local else self.theta


def _noise(rng, shape):
    return None if rng is None else rng.standard_normal(shape)


def local_descent(fd: FoldData, i: int, Theta0, *, K: int, eta: float, sigma: float, rng,
                  rows: slice = slice(None), drift: np.ndarray | None = None) -> np.ndarray:
    """K noisy local steps of client i: ``Theta <- Theta - eta (g(Theta) + drift) + sigma Z``."""
    return local_descent_many([fd], i, Theta0[None], K=K, eta=eta, sigmas=np.array([sigma]), rng=rng,
                              rows=rows, drift=None if drift is None else drift[None])[0]


def local_descent_many(fds: list, i: int, Theta0, *, K: int, eta: float, sigmas, rng,
                       rows: slice = slice(None), drift: np.ndarray | None = None) -> np.ndarray:
    """:func:`local_descent` for J privacy levels at once (``fds``, ``sigmas`` (J,),
    ``Theta0`` and ``drift`` (J, d, k)), all on one noise draw Z per step (d, k): the J
    separate runs draw the same Z, their generators being seeded alike (common random
    numbers across mu)."""
    Theta = Theta0.copy()
    sig = np.asarray(sigmas, dtype=float)[:, None, None]
    for _ in range(K):
        step = stacked_gradients(fds, i, Theta, rows)
        if drift is not None:
            step += drift
        Theta -= eta * step
        Z = _noise(rng, Theta.shape[1:])
        if Z is not None:
            Theta += sig * Z
    return Theta


def server_descent(fd: FoldData, Theta0, *, K: int, eta: float, sigmas: np.ndarray, rng) -> np.ndarray:
    """K FedSGD steps: ``Theta <- Theta - eta sum_i w_i (g_i(Theta) + sigma_i Z_i)``."""
    return server_descent_many([fd], Theta0[None], K=K, eta=eta, sigmas=np.asarray(sigmas)[None], rng=rng)[0]


def server_descent_many(fds: list, Theta0, *, K: int, eta: float, sigmas: np.ndarray, rng) -> np.ndarray:
    """:func:`server_descent` for J privacy levels at once (``sigmas`` (J, m),
    ``Theta0`` (J, d, k)), one noise draw per client and step shared as in
    :func:`local_descent_many`."""
    Theta, w = Theta0.copy(), fds[0].weights
    sig = np.asarray(sigmas, dtype=float)
    for _ in range(K):
        total = np.zeros_like(Theta)
        for i in range(fds[0].m):
            g = stacked_gradients(fds, i, Theta)
            Z = _noise(rng, Theta.shape[1:])
            if Z is not None:
                g += sig[:, i, None, None] * Z
            total += w[i] * g
        Theta -= eta * total
    return Theta


def _stacked(fds: list) -> np.ndarray:
    """Zeros (J, d, k), one parameter per privacy level."""
    return np.zeros((len(fds), fds[0].d, fds[0].k))


def _same_stream(rngs: list) -> bool:
    """True when the generators would draw the same numbers (all None, or all in one state)."""
    if all(r is None for r in rngs):
        return True
    if any(r is None for r in rngs):
        return False
    state = rngs[0].bit_generator.state
    return all(r.bit_generator.state == state for r in rngs[1:])


class _Batched:
    """Mixin of the gradient methods that fit J privacy levels in one pass
    (:func:`stacked_gradients`): ``fit`` is ``fit_stacked`` with J = 1."""

    def fit(self, fd, s, rng):
        return self.fit_stacked([fd], s, rng)[0]

    def fit_many(self, fds, s, rngs):
        if _same_stream(rngs):
            return self.fit_stacked(fds, s, rngs[0])
        return [self.fit(fd, s, rng) for fd, rng in zip(fds, rngs)]

    def fit_stacked(self, fds: list, s: dict, rng) -> list[RealFit]:
        """The J fits as one computation on stacked parameters (J, d, k), drawing each
        noise once from ``rng`` for all J."""
        raise NotImplementedError

    def calibrate_many(self, fds: list, s: dict) -> tuple[list, list]:
        """Per spec, the noise sds stacked over the J levels (J, m); the J ledgers."""
        cals = [fd.calibrate(self.plan(fd, s)) for fd in fds]
        sigmas = [np.stack([c[0][r] for c in cals]) for r in range(len(cals[0][0]))]
        return sigmas, [c[1] for c in cals]


def _comm(rounds: int, m: int, dk: int, per_round: int = 1) -> dict:
    return {"rounds": rounds, "floats_up": rounds * m * dk * per_round,
            "floats_down": rounds * m * dk * per_round}


class RealMethod:
    """One real-data estimator: ``fit(fd, settings, rng)`` -> :class:`RealFit`.

    ``private`` methods run at every configured mu; the others once, at mu = inf.
    ``rng`` is the method's noise generator (None when non-private).
    """

    name = ""
    label = ""
    private = True
    algorithm = ""

    @property
    def noise_stream(self) -> str:
        """Name that seeds the method's noise generator (its own name by default)."""
        return self.name

    def fit(self, fd: FoldData, s: dict, rng: np.random.Generator | None) -> RealFit:
        raise NotImplementedError

    def fit_many(self, fds: list, s: dict, rngs: list) -> list[RealFit]:
        """:meth:`fit` at J privacy levels on the same data (``fds``), each with its
        generator (``rngs``, seeded alike); one fit each unless a method batches them."""
        return [self.fit(fd, s, rng) for fd, rng in zip(fds, rngs)]

    def plan(self, fd: FoldData, s: dict) -> tuple:
        """The releases of a private method (:class:`fedgdp.privacy.ReleaseSpec`), shapes (1, m)."""
        raise NotImplementedError


class FedSGD(_Batched, RealMethod):
    name, label, algorithm = "fedsgd", "FedSGD", "Algorithm 1"

    def plan(self, fd, s):
        return privacy.plan_fedsgd(B=fd.B, n=fd.n_row, K=s["K"])

    def fit_stacked(self, fds, s, rng):
        (sig,), ledgers = self.calibrate_many(fds, s)
        Theta = server_descent_many(fds, _stacked(fds), K=s["K"], eta=s["eta"], sigmas=sig, rng=rng)
        fd = fds[0]
        return [RealFit(T, ledger, **_comm(s["K"], fd.m, fd.d * fd.k)) for T, ledger in zip(Theta, ledgers)]


class FedAvg(_Batched, RealMethod):
    name, label, algorithm = "fedavg", "FedAvg", "Algorithm 3"

    def plan(self, fd, s):
        return privacy.plan_fedavg(B=fd.B, n=fd.n_row, eta=s["eta"], R=s["R"], K=s["K"])

    def fit_stacked(self, fds, s, rng):
        R, K, eta = s["R"], s["K"], s["eta"]
        (sig,), ledgers = self.calibrate_many(fds, s)
        fd = fds[0]
        Theta, w = _stacked(fds), fd.weights
        for _ in range(R):
            Theta = sum(w[i] * local_descent_many(fds, i, Theta, K=K, eta=eta, sigmas=sig[:, i], rng=rng)
                        for i in range(fd.m))
        return [RealFit(T, ledger, **_comm(R, fd.m, fd.d * fd.k)) for T, ledger in zip(Theta, ledgers)]


class FedHybrid(_Batched, RealMethod):
    name, label, algorithm = "fedhybrid", "FedHybrid", "Algorithm 2"

    def plan(self, fd, s):
        return privacy.plan_fedhybrid(B=fd.B, n=fd.n_row, eta1=s["eta1"], K1=s["K1"], K2=s["K2"])

    def fit_stacked(self, fds, s, rng):
        K1, K2 = s["K1"], s["K2"]
        (a1, a2), ledgers = self.calibrate_many(fds, s)
        fd = fds[0]
        w = fd.weights
        Theta = sum(w[i] * local_descent_many(fds, i, _stacked(fds), K=K1, eta=s["eta1"], sigmas=a1[:, i],
                                              rng=rng) for i in range(fd.m))
        Theta = server_descent_many(fds, Theta, K=K2, eta=s["eta2"], sigmas=a2, rng=rng)
        return [RealFit(T, ledger, **_comm(1 + K2, fd.m, fd.d * fd.k)) for T, ledger in zip(Theta, ledgers)]


class FedNewton(RealMethod):
    """Algorithm 4; in privacy mode ``certified`` with clipped per-sample Hessians and
    the ridge solve (:func:`fedgdp.privacy.plan_fednewton`)."""

    name, label, algorithm = "fednewton", "FedNewton", "Algorithm 4"
    always_certified = False

    def certified(self, fd: FoldData) -> bool:
        return self.always_certified or fd.privacy.get("mode") == "certified"

    def halves(self, fd: FoldData) -> np.ndarray:
        h1 = fd.sizes // 2
        if h1.min() < 1:
            raise ValueError(f"FedNewton needs at least 2 training rows per client, got {fd.sizes.min()}")
        return h1

    def hessian_bound(self, fd: FoldData) -> float | None:
        return float(fd.privacy["hessian_clip"]) * fd.tau1 if self.certified(fd) else None

    def plan(self, fd: FoldData, s: dict) -> tuple:
        h1 = self.halves(fd)
        return privacy.plan_fednewton(B=fd.B, n1=h1[None, :].astype(float),
                                      n2=(fd.sizes - h1)[None, :].astype(float), eta=s["eta"], K=s["K"],
                                      tau1=fd.tau1, hessian_bound=self.hessian_bound(fd))

    def newton_update(self, fd: FoldData, i: int, Theta1: np.ndarray) -> np.ndarray:
        """Client i's pre-noise Newton release ``Theta1 - s`` (Hessian on half 1,
        clipped gradient on half 2)."""
        h1 = self.halves(fd)[i]
        nw = fd.newton
        g = fd.gradient(i, Theta1, slice(h1, None))
        return Theta1 - newton_step(fd.model, Theta1, fd.X[i][:h1], g, fd.tau1, solver=nw["solver"],
                                    cg_tol=nw["cg_tol"], cg_maxiter=nw["cg_maxiter"],
                                    hessian_bound=self.hessian_bound(fd))

    def fit(self, fd, s, rng):
        K, eta = s["K"], s["eta"]
        h1 = self.halves(fd)
        (s1, s2), ledger = fd.calibrate(self.plan(fd, s))
        w = fd.weights
        Theta1 = sum(w[i] * local_descent(fd, i, fd.zeros(), K=K, eta=eta, sigma=s1[i], rng=rng,
                                          rows=slice(0, h1[i])) for i in range(fd.m))
        Theta = np.zeros_like(Theta1)
        for i in range(fd.m):
            local = self.newton_update(fd, i, Theta1)
            Z = _noise(rng, local.shape)
            if Z is not None:
                local += s2[i] * Z
            Theta += w[i] * local
        return RealFit(Theta, ledger, **_comm(2, fd.m, fd.d * fd.k))


class FedNewtonCertified(FedNewton):
    """FedNewton with certified privacy in every mode, on FedNewton's noise stream."""

    name, label, algorithm = "fednewton_certified", "FedNewton (certified)", "Algorithm 4, certified"
    always_certified = True
    noise_stream = "fednewton"


class Scaffold(_Batched, RealMethod):
    """SCAFFOLD (option II); private with FedAvg's noise (see the module docstring)."""

    name, label, algorithm = "dp_scaffold", "DP-SCAFFOLD", "SCAFFOLD + Algorithm 3 noise"

    def plan(self, fd, s):   # FedAvg's releases: the control variates are post-processing
        return privacy.plan_fedavg(B=fd.B, n=fd.n_row, eta=s["eta"], R=s["R"], K=s["K"])

    def fit_stacked(self, fds, s, rng):
        R, K, eta = s["R"], s["K"], s["eta"]
        (sig,), ledgers = self.calibrate_many(fds, s)
        fd = fds[0]
        w = fd.weights
        Theta, c = _stacked(fds), _stacked(fds)
        ci = np.zeros((fd.m,) + Theta.shape)
        for _ in range(R):
            dy, dc = np.zeros_like(Theta), np.zeros_like(Theta)
            for i in range(fd.m):
                y = local_descent_many(fds, i, Theta, K=K, eta=eta, sigmas=sig[:, i], rng=rng, drift=c - ci[i])
                ci_new = ci[i] - c + (Theta - y) / (K * eta)
                dy += w[i] * (y - Theta)
                dc += w[i] * (ci_new - ci[i])
                ci[i] = ci_new
            Theta = Theta + s["eta_g"] * dy
            c = c + dc
        return [RealFit(T, ledger, **_comm(R, fd.m, fd.d * fd.k, per_round=2)) for T, ledger in zip(Theta, ledgers)]


class _NonPrivate(RealMethod):
    """A private algorithm run without clipping and noise."""

    private = False
    base: RealMethod

    def fit(self, fd, s, rng):
        if fd.private:
            raise ValueError(f"{self.name} is non-private; got mu={fd.mu}")
        return self.base.fit(fd, s, None)


class NPScaffold(_NonPrivate):
    name, label, algorithm, base = "np_scaffold", "NP-SCAFFOLD", "SCAFFOLD", Scaffold()


class NPFedAvg(_NonPrivate):
    name, label, algorithm, base = "np_fedavg", "NP-FedAvg", "Algorithm 3, mu = inf", FedAvg()


class NPLocalFit(RealMethod):
    name, label, algorithm, private = "np_localfit", "NP-LocalFit", "ridge MLE per client", False

    def fit(self, fd, s, rng):
        thetas = np.stack([ridge_fit(fd.model, fd.X[i], fd.Y[i], ridge=s["ridge"], maxiter=s["maxiter"],
                                     gtol=s.get("gtol", 1e-8))
                           for i in range(fd.m)])
        return RealFit(thetas, privacy.Ledger(), rounds=0, floats_up=0, floats_down=0, local=True)


class NPPooled(RealMethod):
    name, label, algorithm, private = "np_pooled", "NP-Pooled", "pooled ridge MLE", False

    def fit(self, fd, s, rng):
        X, Y = np.vstack(fd.X), np.vstack(fd.Y)
        Theta = ridge_fit(fd.model, X, Y, ridge=s["ridge"], maxiter=s["maxiter"], gtol=s.get("gtol", 1e-8))
        # not federated: the raw training data go to the server once
        return RealFit(Theta, privacy.Ledger(), rounds=1, floats_up=int(X.size + Y.size), floats_down=0)


REGISTRY: dict[str, RealMethod] = {M.name: M() for M in (
    FedSGD, FedAvg, FedHybrid, FedNewton, FedNewtonCertified, Scaffold, NPScaffold, NPFedAvg, NPLocalFit, NPPooled)}


def get_method(name: str) -> RealMethod:
    """Look up a real-data method; ValueError naming the bad value otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown real-data method {name!r}; choose from {', '.join(REGISTRY)}") from None


# --------------------------------------------------------------- metrics
def auc(scores: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties count half); NaN if one class is absent."""
    from scipy.stats import rankdata

    y = np.asarray(y).astype(bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def accuracy(P: np.ndarray, labels: np.ndarray) -> float:
    """Share of rows whose most probable class is the label."""
    return float(np.mean(np.argmax(P, axis=1) == np.asarray(labels)))


def client_metric(task: str, model: MatrixGLM, Theta, X, labels) -> float:
    if labels.shape[0] == 0:
        return float("nan")
    P = model.predict_scores(Theta, X)
    return auc(P[:, 0], labels) if task == "binary" else accuracy(P, labels)


# ------------------------------------------------------------------- run
# One row per (method, mu, client) of one split:
#   task, dataset, method (registry name), label (figure name), private (bool),
#   mu (float; inf for the non-private baselines), split, client, n_client (the client's
#   images, all folds), metric ("auc" or "accuracy"), value (mean over the folds where it
#   is defined), value_folds (list, one per fold; NaN where a binary test fold has one
#   class), m, n_min, folds, base_seed, B (clipping bound, mean over folds; inf when
#   non-private), tau1, mu_composed (largest composed mu of the client's ledger over
#   folds; inf when non-private), rounds, floats_up, floats_down (communication of one
#   fit), elapsed_s (the method's fit time summed over the folds; a method fitting all mu
#   in one pass, :meth:`RealMethod.fit_many`, shares its time equally), mu_certified (as
#   mu_composed when every release is certified and the clipping bound is public or
#   private, inf otherwise: mu and mu_composed are nominal), privacy_mode.
COLUMNS = ["task", "dataset", "method", "label", "private", "mu", "split", "client", "n_client",
           "metric", "value", "value_folds", "m", "n_min", "folds", "base_seed", "B", "tau1",
           "mu_composed", "rounds", "floats_up", "floats_down", "elapsed_s", "mu_certified", "privacy_mode"]


#: Noise stream of the private clipping rule's histograms.
CLIP_STREAM = "clip_histogram"


def noise_rng(p: dict, key: dict, split: int, fold: int, method: str) -> np.random.Generator:
    """The noise generator of one method in one split and fold (module docstring)."""
    seq = np.random.SeedSequence([p["base_seed"], stable_hash({**key, "task": p["task"]}), split, fold,
                                  stable_hash(method)])
    return np.random.default_rng(seq)


def run_split(p: dict, data: Dataset, split: int, *, progress=None) -> list[dict]:
    """Every configured method (private ones at every mu) on every fold of one split.

    Returns one row per (method, mu, client), keys :data:`COLUMNS`.
    """
    key = layout_key(p["dataset"], data.N, p["m"], p["n_min"], p["alpha"], p["folds"])
    layout = split_layout(p["base_seed"], key, split)
    model = matrix_model(p["task"])
    labels = data.targets(p["task"])
    Yall = model.targets(labels)
    runs = [(name, mu) for name in p["methods"]
            for mu in (p["mu"] if get_method(name).private else [math.inf])]
    values = {run: np.full((layout.m, p["folds"]), np.nan) for run in runs}
    mu_comp = {run: np.zeros(layout.m) for run in runs}
    mu_cert = {run: np.zeros(layout.m) for run in runs}
    bounds, elapsed, comm = {}, {run: 0.0 for run in runs}, {}
    for f in range(p["folds"]):
        parts = [layout.train_test(i, f) for i in range(layout.m)]
        Xtr = [data.X[tr] for tr, _ in parts]
        Ytr = [Yall[tr] for tr, _ in parts]
        fold_bounds = {}     # per mu: the private rule's bound depends on mu
        for mu in dict.fromkeys(mu for _, mu in runs):
            fold_bounds[mu] = clip_bound_real(model, Xtr, Ytr, p["clip"], mu=mu,
                                              rng=noise_rng(p, key, split, f, CLIP_STREAM))
            bounds.setdefault(mu, []).append(fold_bounds[mu])
        fits = {}
        for name in p["methods"]:     # all mu of a method in one call (fit_many)
            meth = get_method(name)
            mus = [mu for n, mu in runs if n == name]
            fds = [FoldData(model, Xtr, Ytr, mu=mu, B=fold_bounds[mu], tau1=p["tau1"], newton=p["newton"],
                            privacy=p["privacy"], clip=p["clip"]) for mu in mus]
            rngs = [noise_rng(p, key, split, f, meth.noise_stream) if np.isfinite(mu) else None for mu in mus]
            t0 = time.perf_counter()
            with np.errstate(over="ignore", under="ignore"):
                fits.update(zip([(name, mu) for mu in mus], meth.fit_many(fds, p["method_settings"][name], rngs)))
            for mu in mus:
                elapsed[(name, mu)] += (time.perf_counter() - t0) / len(mus)
        for name, mu in runs:
            fit = fits[(name, mu)]
            comm[(name, mu)] = (fit.rounds, fit.floats_up, fit.floats_down)
            if fit.ledger.releases:
                mu_comp[(name, mu)] = np.maximum(mu_comp[(name, mu)], fit.ledger.composed_mu()[0])
                mu_cert[(name, mu)] = np.maximum(mu_cert[(name, mu)], fit.ledger.certified_mu()[0])
            else:
                mu_comp[(name, mu)][:] = math.inf
                mu_cert[(name, mu)][:] = math.inf
            for i, (_, te) in enumerate(parts):
                values[(name, mu)][i, f] = client_metric(p["task"], model, fit.client_theta(i),
                                                         data.X[te], labels[te])
            if progress:
                progress(f"split {split} fold {f} {name} mu={mu:g}: "
                         f"median {np.nanmedian(values[(name, mu)][:, f]):.3f}")
    rows = []
    for name, mu in runs:
        meth = get_method(name)
        v = values[(name, mu)]
        rounds, up, down = comm[(name, mu)]
        for i in range(layout.m):
            folds_i = v[i]
            rows.append({
                "task": p["task"], "dataset": p["dataset"], "method": name, "label": meth.label,
                "private": bool(meth.private), "mu": float(mu), "split": int(split), "client": i,
                "n_client": int(layout.sizes[i]), "metric": METRICS[p["task"]],
                "value": float(np.nanmean(folds_i)) if np.any(np.isfinite(folds_i)) else float("nan"),
                "value_folds": [float(x) for x in folds_i], "m": int(p["m"]), "n_min": int(p["n_min"]),
                "folds": int(p["folds"]), "base_seed": int(p["base_seed"]),
                "B": float(np.mean(bounds[mu])) if np.isfinite(mu) else float("inf"),
                "tau1": float(p["tau1"]), "mu_composed": float(mu_comp[(name, mu)][i]),
                "rounds": int(rounds), "floats_up": int(up), "floats_down": int(down),
                "elapsed_s": float(elapsed[(name, mu)]),
                "mu_certified": float(mu_cert[(name, mu)][i]), "privacy_mode": p["privacy"]["mode"],
            })
    return rows


def _schema():
    import pyarrow as pa

    return pa.schema([
        ("task", pa.string()), ("dataset", pa.string()), ("method", pa.string()), ("label", pa.string()),
        ("private", pa.bool_()), ("mu", pa.float64()), ("split", pa.int64()), ("client", pa.int64()),
        ("n_client", pa.int64()), ("metric", pa.string()), ("value", pa.float64()),
        ("value_folds", pa.list_(pa.float64())), ("m", pa.int64()), ("n_min", pa.int64()),
        ("folds", pa.int64()), ("base_seed", pa.int64()), ("B", pa.float64()), ("tau1", pa.float64()),
        ("mu_composed", pa.float64()), ("rounds", pa.int64()), ("floats_up", pa.int64()),
        ("floats_down", pa.int64()), ("elapsed_s", pa.float64()), ("mu_certified", pa.float64()),
        ("privacy_mode", pa.string()),
    ])


def write_rows(rows: list[dict], p: dict, out: str | os.PathLike) -> None:
    """Write rows (:data:`COLUMNS`) atomically with provenance metadata
    (:func:`fedgdp.runner.write_parquet`)."""
    import pyarrow as pa

    from .runner import write_parquet

    write_parquet(pa.Table.from_pylist(rows, schema=_schema()), out, p)


def read_rows(paths):
    """Read and concatenate real-data Parquet files into a pandas DataFrame;
    ValueError naming a bad file."""
    from .runner import read_parquet_files

    return read_parquet_files(paths, COLUMNS, "real-data")
