"""The privacy noise of a fit, forecast from public inputs: `forecast` and its pieces.

Everything here reads public inputs only (client sizes, the number of features, mu, the
clipping bound, the method's settings), so it costs no privacy and may run before any
record is read. The noise sds are the package's own calibration: the method's plan
(`fedgdp.methods.Method.plan`) calibrated by `fedgdp.core.privacy.calibrate_with_clip`,
exactly as `FederatedGLM` calibrates its fit; only their propagation is modelled here.

The curvature model (docs/real-data.md, "Before the data")
-------------------------------------------------------
Features are standardised (mean 0, variance 1, uncorrelated), so with the intercept
``E[x x'] = I_d``, and the Hessian of the mean loss is ``H = W (x) I_d`` with ``W`` (k, k)
the family's mean curvature ``E[b''(s)]`` over the linear predictor ``s``. At theta = 0:
``W = 1/4`` (logistic), ``1`` (Poisson), ``I/C - 11'/C^2`` (softmax over C classes:
eigenvalue ``1/C`` C - 1 times and 0 along the redundant direction, where the noise is
never pulled back). At a released estimate (`noise_se`), ``W`` is ``E[b''(s)]`` over
``s = theta_0 + B' z``, ``z ~ N(0, I_p)``, on a fixed public set of draws. Clipping
takes a row's curvature away: a Poisson row counts with the chance that its residual is
not clipped (`curvature`).

Noise the iterates see
----------------------
The noise moves the iterates, and the iterates then meet a different pull-back. Each
iterate is tracked by its noise variance ``V`` per coefficient (taken equal across the
coefficients and Gaussian) and, for Poisson, the bias ``M`` of its intercept; `Response`
gives the curvature and the intercept's pull at (V, M). Logistic: by Stein's lemma the
restoring force of Gaussian features on a Gaussian displacement is exactly ``E[sigma'(s)]``
over ``s ~ N(0, d V)`` (``1/4`` at V = 0, less as V grows). Poisson: a displaced iterate's
mean count is ``exp(M + d V / 2)`` times theta = 0's, so the intercept is pulled down until
``M = -d V / 2`` (a bias, not averaged away: every client's iterate carries it), with the
curvature that mean count (at most ``1 + b`` times theta = 0's: clipped rows pull no harder).
Softmax keeps W's fixed eigenvalues (the linear model).

`propagate` runs each method's iteration step by step with these: a local step
``e_i <- (1 - eta c_i) e_i + sigma_i Z`` at client i, whose curvature ``c_i`` is read at
client i's own variance (its own noise, not averaged over the m clients: about m times the
average's, so small clients' local iterates flatten their curvature most); a server step
``e <- (1 - eta c) e - eta sum_i w_i sigma_i Z_i``; the average ``sum_i w_i e_i``; FedNewton's
release ``theta_1 - (H + tau1 I)^{-1} g + sigma_2 Z``, which passes stage 1's noise times
``tau1 / (c + tau1)`` (certified ridge solve; ``1 - c / max(c, tau1)`` for the paper's
eigenvalue floor) and takes one Newton step on the intercept's bias. DP-SCAFFOLD is FedAvg
with its server step ``eta_g``; its control variates ``c - c_i``, built from each client's
noisy iterate, widen that client's next local iterates (their curvature) and cancel in the
average. With a fixed curvature (V = 0) this is the linear model: finite geometric sums
(`noise_variances`). ``noise_rmse`` is the root of the mean over the d k coefficients of
(variance + the intercept's squared bias): the root-mean-square per coefficient of (private
fit - the same fit without noise). For softmax the coefficients are taken centred across
the classes (``theta - its row means``, what the probabilities depend on): the redundant
direction's noise changes no prediction.

Measured against the noise fits carry (tests/api/test_forecast.py: logistic and Poisson, 3 to
10 clients of 50-1,000 rows, mu 0.5-5), observed / forecast lies within a factor of 2
wherever the forecast is at most 0.3; beyond it the iterates are far from a Gaussian cloud
and the forecast may be low (docs/real-data.md).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import privacy
from ..core.families import FAMILIES, Family, Logistic, Poisson, get_family
from ..core.solvers import solve_tol
from ..methods.settings import MethodSettings

if TYPE_CHECKING:
    from ..realdata.parameters import RealdataSettings

__all__ = ["IRLS", "IRLS_FAMILIES", "IRLS_DEFAULT", "IRLS_CURVATURE_NOISE", "irls_curvature_noise", "irls_default",
           "IRLS_COUNT_NOISE", "irls_count_noise",
           "planned_theta", "IRLS_CLIP", "NOISE_SE_METHODS", "irls_clip", "forecast", "noise_se",
           "noise_variances", "propagate", "response", "Response", "public_clip", "curvature",
           "CANDIDATES", "NOISE_LIMIT", "CLIP_RULE", "CLIP_NOISE_TARGET", "CLIP_DOUBLINGS",
           "SETTINGS"]

#: The private methods ``method="auto"`` chooses among (fednewton_certified is fednewton in mode certified)
CANDIDATES = ("fedsgd", "fedavg", "fedhybrid", "fednewton", "dp_scaffold")

#: FedIRLS, whose noiseless iteration reaches the MLE (docs/default-estimator.md): what ``method="auto"``
#: fits for the families of `IRLS_DEFAULT` (and, at mu = inf, where it is the exact MLE, for every family of
#: `IRLS_FAMILIES`: `irls_default`); it fits every family of `IRLS_FAMILIES` when named
IRLS = "fedirls"
IRLS_FAMILIES = tuple(name for name, f in FAMILIES.items() if f.irls)
#: Logistic and Poisson (whose FedIRLS first releases the count scale that sets the curvature's units;
#: docs/default-estimator.md), not softmax (`fedgdp.core.families`)
IRLS_DEFAULT = tuple(name for name, f in FAMILIES.items() if f.irls_default)
#: FedIRLS's default gradient clip is this multiple of `public_clip`'s (without the Poisson doublings): on the
#: whitened design few rows reach it, so the clip moves the estimate little (docs/real-data.md)
IRLS_CLIP = 1.5
#: ``method="auto"`` fits FedIRLS only where its curvature's forecast noise (`irls_curvature_noise`) is at most
#: this share of the curvature at 0: beyond it the Newton steps follow the noise (small clients, many features)
IRLS_CURVATURE_NOISE = 0.5
#: ``method="auto"`` fits counts with FedIRLS only where the noise sd of its released mean count
#: (`irls_count_noise`) is at most this: beyond it the count scale, which sets the Newton steps' curvature, is
#: mostly noise on low counts (4 clients of 300 rows at mu = 2: sd 1.6 against a mean count of 1.4, and fits
#: 1.2 off where FedHybrid's are 0.03); the reference problem's 50 clients of 2,000 rows: 0.067
IRLS_COUNT_NOISE = 0.1
#: The methods whose fits report their noise's standard errors (``fit_info_["noise_se"]``)
NOISE_SE_METHODS = CANDIDATES + ("fednewton_certified", IRLS)

#: A forecast ``noise_rmse`` above this (on standardised features) drowns a coefficient of size 1/2,
#: about the largest effect standardised features usually carry: the fit warns before reading data
NOISE_LIMIT = 0.5

#: The default public clipping rule of `FederatedGLM` (`public_clip`)
CLIP_RULE = ("B = sqrt(d) for logistic and softmax (d design columns, the intercept included): on standardised "
             "features ||x|| is about sqrt(d) and a residual is at most 1 (logistic), below 1 at theta = 0 "
             "(softmax); for Poisson 2 sqrt(d) (modest counts), doubled while the forecast noise stays at most "
             "CLIP_NOISE_TARGET, at most twice (B <= 8 sqrt(d)): a count's residual has no public bound, so B is "
             "as large as the noise allows")

#: The Poisson default bound is doubled while the forecast ``noise_rmse`` at the doubled bound stays at most
#: this: a fifth of `NOISE_LIMIT`, noise small beside the effects one hopes to estimate, bought to cut the bias
#: of clipping large counts (docs/real-data.md, "The default clipping bound")
CLIP_NOISE_TARGET = NOISE_LIMIT / 5

#: At most this many doublings of the Poisson default bound: beyond 8 sqrt(d) its step sizes
#: (`fedgdp.core.families.Poisson.default_steps`, proportional to 1/B) leave the default steps short of convergence
CLIP_DOUBLINGS = 2

#: The settings `forecast` takes (FederatedGLM's parameters of the same names)
SETTINGS = ("n_classes", "clip", "privacy_mode", "tau1", "hessian_clip", "method_settings", "newton",
            "fit_intercept", "inference_share")

#: Ties (always at mu = inf, where no method adds noise) go to the fewest rounds, then this order
_PREFER = ("fedirls", "fednewton", "fednewton_certified", "fedhybrid", "fedsgd", "fedavg", "dp_scaffold")
_DRAWS = 512                 # public draws of z for the curvature at an estimate
_DRAW_SEED = 20240046        # a fixed public seed: the draws depend on no record


def public_clip(family: str, d: int, noise=None) -> float:
    """The default public clipping bound (`CLIP_RULE`) for ``d`` design columns.

    Parameters
    ----------
    family : {"logistic", "multinomial", "poisson"}
    d : int
        Design columns, the intercept included.
    noise : callable or None
        Poisson only: ``noise(B)``, the forecast ``noise_rmse`` at bound B (public inputs
        only). The bound ``2 sqrt(d)`` is doubled while ``noise`` at the doubled bound is
        at most `CLIP_NOISE_TARGET`, at most `CLIP_DOUBLINGS` times. None: ``2 sqrt(d)``
        (the sizes or mu are not known).

    Returns
    -------
    float
        B.
    """
    fam = get_family(family)
    B = fam.clip_factor * math.sqrt(d)
    for _ in range(CLIP_DOUBLINGS if noise is not None and fam.clip_doubles else 0):
        if not noise(2.0 * B) <= CLIP_NOISE_TARGET:
            break
        B *= 2.0
    return B


def irls_clip(family: str, d: int) -> float:
    """FedIRLS's default public clip, `IRLS_CLIP` times `public_clip` without doublings.

    Parameters
    ----------
    family : {"logistic", "poisson"}
    d : int
        Design columns.
    """
    return IRLS_CLIP * public_clip(family, d)


def irls_noise(family: str, sizes: np.ndarray, mu: float, B: float, T: int,
               theta: np.ndarray | None = None) -> float:
    """FedIRLS's forecast noise sd per coefficient on standardised features: its last gradient's noise
    through the curvature ``W`` at theta (at 0: ``W_0``), ``sqrt(sum_i w_i^2 sigma_i^2) / W`` (``sigma_i =
    2 B / (n_i mu sqrt(s_T))``, ``s_T`` the last gradient's share, `fedgdp.core.privacy.irls_shares`).
    Where the signal flattens the curvature (a logistic linear predictor of sd 2: about half of ``W_0``)
    the noise is larger: give the planned signal (`planned_theta`).

    Parameters
    ----------
    family : {"logistic", "poisson"}
    sizes : ndarray of shape (m,)
    mu : float
        The estimation's mu.
    B : float
        FedIRLS's gradient clip.
    T : int
        Its Newton rounds.
    theta : ndarray of shape (d, 1) or None
        Where to read the curvature (`planned_theta`); None: theta = 0.
    """
    from ..methods import fedirls

    n = np.asarray(sizes, float)
    w = n / n.sum()
    share = float(privacy.irls_shares(int(T), fedirls.counts(_irls_model(family)))[1][-1])
    sd = 2.0 * B / (n * mu * math.sqrt(share))
    W = fedirls.curvature_at_zero(_irls_model(family)) if theta is None else \
        float(curvature(family, 1, theta, b=B / math.sqrt(len(theta)))[0][0])
    return float(np.sqrt(np.sum((w * sd) ** 2))) / W


def planned_theta(family: str, d: int, outcome_mean: float | None, signal_sd: float = 0.0):
    """The coefficients a plan assumes (public guesses, as the effect size of a power analysis): the
    intercept that gives the outcome's mean ``outcome_mean`` over the public feature draws, and one slope
    ``signal_sd`` (the sd of the linear predictor's part the features carry; on standardised features
    any slopes of that norm give the same curvature).

    Parameters
    ----------
    family : {"logistic", "poisson"}
    d : int
        Design columns, the intercept included.
    outcome_mean : float or None
        The outcome's mean: the share of ones (logistic, in (0, 1)) or the mean count (Poisson, > 0).
        None: theta = 0 (the curvature at 0; for logistic its largest, so the least noise).
    signal_sd : float
        The linear predictor's sd over the rows (>= 0).

    Returns
    -------
    ndarray of shape (d, 1) or None
    """
    fam = get_family(family)
    sd = signal_sd
    if isinstance(sd, bool) or not isinstance(sd, (int, float, np.floating)) or not 0 <= sd <= 20:
        raise ValueError(f"signal_sd must be a number in [0, 20] (the linear predictor's sd), got signal_sd={sd!r}")
    if outcome_mean is None:
        if sd:
            raise ValueError("signal_sd needs outcome_mean (the outcome's mean: share of ones, or mean count)")
        return None
    m = outcome_mean
    upper = 1.0 if fam.labelled else math.inf
    if fam.classes or isinstance(m, bool) or not isinstance(m, (int, float, np.floating)) or not 0 < m < upper:
        raise ValueError(f"outcome_mean must be in (0, {upper:g}) for family {family!r} (the share of ones, or the "
                         f"mean count; one-output families only), got outcome_mean={m!r}")
    if d < 2 and sd:
        raise ValueError(f"signal_sd needs a feature, got d={d} design column(s)")
    theta = np.zeros((d, 1))
    if d > 1:
        theta[1, 0] = sd
    s = _predictors(theta, 1)[:, 0]
    if fam.labelled:
        from scipy.optimize import brentq

        theta[0, 0] = brentq(lambda a: float(np.mean(1.0 / (1.0 + np.exp(-(a + s))))) - m, -50.0, 50.0)
    else:
        theta[0, 0] = math.log(m) - math.log(float(np.mean(np.exp(s))))
    return theta


def _irls_model(family: str):
    """The one-output model of ``family`` (logistic or Poisson)."""
    return get_family(family).model()


def irls_curvature_noise(family: str, sizes: np.ndarray, d: int, mu: float, T: int = 5) -> float:
    """The forecast operator norm of the noise in FedIRLS's last released curvature, over ``W_0``:
    ``2 sqrt(d) sqrt(sum_i w_i^2 sigma_i^2) / W_0`` with ``sigma_i = sqrt(2) H_c / (n_i mu sqrt(s))``,
    ``s`` the last curvature's share (public inputs only). Above `IRLS_CURVATURE_NOISE` the curvature
    is mostly noise and ``method="auto"`` fits the paper's methods instead.

    Parameters
    ----------
    family : {"logistic", "poisson"}
    sizes : ndarray of shape (m,)
    d : int
        Design columns.
    mu : float
        The estimation's mu.
    T : int
        FedIRLS's rounds.
    """
    if not privacy.adds_noise(mu) or T < 3:
        return 0.0
    from ..methods import fedirls

    n = np.asarray(sizes, float)
    w = n / n.sum()
    model = _irls_model(family)
    w0, Hc = fedirls.curvature_at_zero(model), fedirls.hessian_bound(model, d)
    share = float(privacy.irls_shares(int(T))[2][-1])
    sd = math.sqrt(2.0) * Hc / (n * mu * math.sqrt(share))
    return 2.0 * math.sqrt(d) * float(np.sqrt(np.sum((w * sd) ** 2))) / w0


def irls_count_noise(sizes: np.ndarray, mu: float) -> float:
    """The noise sd of FedIRLS's released mean count (counts only; public inputs only):
    ``sqrt(sum_i w_i^2 sigma_i^2)``, ``sigma_i = c sqrt(1 + c^2) / (n_i mu sqrt(s_c))`` with c the count clip and
    ``s_c`` the count scale's share (`fedgdp.core.privacy.plan_fedirls`).

    Parameters
    ----------
    sizes : ndarray of shape (m,)
    mu : float
        The estimation's mu.
    """
    if not privacy.adds_noise(mu):
        return 0.0
    from ..methods import fedirls

    n = np.asarray(sizes, float)
    c = fedirls.COUNT_CLIP
    sd = c * math.sqrt(1.0 + c * c) / (n * mu * math.sqrt(float(privacy.count_share(True))))
    return float(np.sqrt(np.sum((n / n.sum() * sd) ** 2)))


def irls_default(family: str, sizes: np.ndarray, d: int, mu: float) -> bool:
    """Whether ``method="auto"`` fits FedIRLS: at mu = inf for every family of `IRLS_FAMILIES` (Newton to
    the exact MLE), and otherwise for the families of `IRLS_DEFAULT` where `irls_curvature_noise` is at
    most `IRLS_CURVATURE_NOISE` (public inputs only).

    Parameters
    ----------
    family : {"logistic", "multinomial", "poisson"}
    sizes : ndarray of shape (m,)
    d : int
        Design columns.
    mu : float
        The estimation's mu.
    """
    fam = get_family(family)
    if not privacy.adds_noise(mu):
        return fam.irls
    counts_ok = not fam.clip_doubles or irls_count_noise(sizes, mu) <= IRLS_COUNT_NOISE
    return fam.irls_default and counts_ok and irls_curvature_noise(family, sizes, d, mu) <= IRLS_CURVATURE_NOISE


def curvature(family: str, k: int, theta: np.ndarray | None = None, b: float = math.inf):
    """The curvature model's ``W`` (module docstring) as its eigen-decomposition: the eigenvalues (k,) and
    eigenvectors (k, k), in columns.

    Parameters
    ----------
    family : {"logistic", "multinomial", "poisson"}
    k : int
        Outputs (1, or the number of classes).
    theta : ndarray of shape (d, k) or None
        The estimate (intercept row first); None: theta = 0.
    b : float
        The residual a typical row keeps unclipped, ``B / sqrt(d)``: a clipped per-sample
        gradient ``B x r / (||x|| |r|)`` does not change with theta along r, so a Poisson
        row adds its curvature ``lambda`` only with the chance ``erf(b / sqrt(2 lambda))``
        that its residual (sd ``sqrt(lambda)``) is not clipped. (Logistic residuals are at
        most 1 <= b under the default rule; softmax's are taken as unclipped.)
    """
    fam = get_family(family)
    if theta is None or not np.any(theta):
        W = fam.curvature_at_zero(k, b)
    else:
        W = fam.curvature_at(_predictors(theta, k), b)
    values, vectors = np.linalg.eigh(W)
    return np.maximum(values, 0.0), vectors


@dataclass(frozen=True)
class Response:
    """The pull-back an iterate meets (module docstring, "Noise the iterates see"): its
    curvature and the mean gradient of its intercept at a per-coefficient noise variance
    ``V`` and an intercept bias ``M`` (both broadcast, e.g. one per client).

    ``kind`` is ``constant`` (curvature ``base``, no pull), ``logistic`` (the curvature
    ``E[sigma'(s + sqrt(d V) u)]`` tabulated on ``log_v``) or ``poisson`` (mean count
    ``base exp(M + d V / 2)``, at most ``base (1 + b)``; ``intercept``: the intercept is
    pulled by the mean count less ``base``).
    """

    kind: str
    base: float
    d: int = 1
    intercept: bool = True
    cap: float = math.inf
    log_v: np.ndarray | None = None
    table: np.ndarray | None = None

    def _count(self, V, M):
        g = np.asarray(M, float) + (self.d / 2.0) * np.asarray(V, float)
        return self.base * np.exp(np.minimum(g, math.log(self.cap)))

    def curvature(self, V, M):
        """The curvature of each iterate.

        Parameters
        ----------
        V : float or ndarray
            Noise variance per coefficient of each iterate.
        M : float or ndarray
            The intercept's bias of each iterate (broadcast with V).

        Returns
        -------
        ndarray
            One value per iterate (V's shape).
        """
        if self.kind == "constant":
            return np.full(np.shape(V), self.base)
        if self.kind == "poisson":
            return self._count(V, M)
        assert self.log_v is not None and self.table is not None
        return np.interp(np.log(np.maximum(V, 1e-300)), self.log_v, self.table)

    def pull(self, V, M):
        """The intercept's mean gradient (0 where the curvature is symmetric in the noise).

        Parameters
        ----------
        V : float or ndarray
            Noise variance per coefficient of each iterate.
        M : float or ndarray
            The intercept's bias of each iterate (broadcast with V).

        Returns
        -------
        ndarray
            One value per iterate (V's shape).
        """
        if self.kind != "poisson" or not self.intercept:
            return np.zeros(np.shape(V))
        return self._count(V, M) - self.base


_LOG_V = np.log(np.logspace(-10.0, 2.0, 121))     # the noise variances tabulated (beyond: the ends)
_U = np.linspace(-6.0, 6.0, 121)                  # N(0, 1) on a grid: the noise's share of a predictor
_PU = np.exp(-_U ** 2 / 2.0) / np.sum(np.exp(-_U ** 2 / 2.0))


def response(family: str, d: int, b: float, theta: np.ndarray | None = None, intercept: bool = True) -> Response:
    """The scalar families' `Response` (logistic, Poisson) at theta = 0 or at an estimate.

    Parameters
    ----------
    family : {"logistic", "poisson"}
    d : int
        Design columns, the intercept included.
    b : float
        ``B / sqrt(d)`` (`curvature`).
    theta : ndarray of shape (d, 1) or None
        The estimate (intercept row first); None: theta = 0.
    intercept : bool
        Whether the design has an intercept to absorb the Poisson bias.

    Returns
    -------
    Response
    """
    return _response(get_family(family), d, b, theta, intercept)


@functools.singledispatch
def _response(fam: Family, d: int, b: float, theta, intercept: bool) -> Response:
    """A one-output family's `Response` (registered per family below; one registered from outside with none:
    its curvature, constant in the noise; several outputs: the linear model)."""
    if fam.classes:
        raise ValueError(f"family {fam.name!r} has several outputs: its forecast is the linear model")
    return Response("constant", float(curvature(fam.name, 1, theta, b)[0][0]), d, intercept)


@_response.register
def _(fam: Poisson, d: int, b: float, theta, intercept: bool) -> Response:
    """The mean count at the estimate, its intercept pulled down by the noise (at most ``1 + b`` times)."""
    base = float(curvature(fam.name, 1, theta, b)[0][0])
    return Response("poisson", base, d, intercept, cap=1.0 + (b if math.isfinite(b) else 1e300))


@_response.register
def _(fam: Logistic, d: int, b: float, theta, intercept: bool) -> Response:
    """``E[sigma'(s)]`` over ``s ~ N(S, d V)`` tabulated on ``_LOG_V`` (Stein's lemma)."""
    S = np.zeros(1) if theta is None or not np.any(theta) else _predictors(theta, 1)[:, 0]
    table = np.empty(len(_LOG_V))
    for j, sd in enumerate(np.sqrt(d * np.exp(_LOG_V))):
        p = 1.0 / (1.0 + np.exp(-np.clip(S[:, None] + sd * _U, -700.0, 700.0)))    # (draws, u)
        table[j] = float(np.mean(p * (1.0 - p) @ _PU))
    return Response("logistic", float(table[0]), d, intercept, log_v=_LOG_V, table=table)


def _predictors(theta: np.ndarray, k: int) -> np.ndarray:
    """The linear predictors (draws, k) at ``theta`` over the public draws of standardised features."""
    theta = np.asarray(theta, float).reshape(-1, k)
    z = np.random.default_rng(_DRAW_SEED).standard_normal((_DRAWS, theta.shape[0] - 1))
    return theta[0] + z @ theta[1:]


def propagate(name: str, s: Any, sigmas, w: np.ndarray, resp: Response, *, tau1: float,
              certified: bool) -> tuple[float, float]:
    """The noise variance per coefficient and the intercept's bias at the end of ``name``'s
    iteration, step by step, each client's local iterates with their own noise (module docstring).

    Parameters
    ----------
    name : str
        The method (a name of `CANDIDATES`, or ``fednewton_certified``).
    s : MethodSettings
        Its frozen settings (`fedgdp.methods.Method.settings`).
    sigmas : sequence of ndarray of shape (m,)
        The noise sds of its plan, one array per release spec.
    w : ndarray of shape (m,)
        The aggregation weights.
    resp : Response
        The pull-back.
    tau1 : float
        FedNewton's ridge / floor.
    certified : bool
        FedNewton's solve: the ridge (certified) or the eigenvalue floor (paper).

    Returns
    -------
    var, bias : float
    """
    sig2 = [np.asarray(sg, float) ** 2 for sg in sigmas]
    m = len(w)

    def local(G, Mg, K, eta, s2, drift=None):
        """K local steps of every client from the global (variance G, bias Mg): (A, N, M) per client.
        A drift (SCAFFOLD's ``c - c_i``, variance ``drift``) widens each client's iterates, so bends
        its curvature, but cancels in the weighted average: it is left out of N."""
        A, N, M = np.ones(m), np.zeros(m), np.full(m, float(Mg))
        S, Dv = np.zeros(m), np.zeros(m)
        for _ in range(int(K)):
            V = np.square(A) * G + N + Dv
            a, M = 1.0 - eta * resp.curvature(V, M), M - eta * resp.pull(V, M)
            A, N = a * A, np.square(a) * N + s2
            if drift is not None:                      # a constant drift eta D per step: sum_j a^j eta D
                S = a * S + eta
                Dv = np.square(S) * drift
        return A, N, M

    def server(G, M, K, eta, s2):
        for _ in range(int(K)):
            a, M = 1.0 - eta * resp.curvature(G, M), M - eta * resp.pull(G, M)
            G = np.square(a) * G + np.square(eta) * float(np.sum(w ** 2 * s2))
        return float(G), float(M)

    if name == "fedsgd":
        return server(0.0, 0.0, s.K, s.eta, sig2[0])
    if name in ("fedavg", "dp_scaffold"):
        G, Mg, g, drift = 0.0, 0.0, float(getattr(s, "eta_g", 1.0)), None    # FedAvg: no server step (1)
        for _ in range(s.R):
            A, N, M = local(G, Mg, s.K, s.eta, sig2[0], drift)
            G = np.square(1.0 - g + g * float(np.sum(w * A))) * G + g * g * float(np.sum(w ** 2 * N))
            Mg = (1.0 - g) * Mg + g * float(np.sum(w * M))
            if name == "dp_scaffold":                  # c - c_i: client i's deviation from the mean, over K eta
                drift = N * (1.0 - w) ** 2 / np.square(s.K * s.eta)
        return float(G), float(Mg)
    if name == "fedhybrid":
        G, Mg = 0.0, 0.0
        for _ in range(s.R1):
            A, N, M = local(G, Mg, s.K1, s.eta1, sig2[0])
            G, Mg = float(np.sum(w * A)) ** 2 * G + float(np.sum(w ** 2 * N)), float(np.sum(w * M))
        return server(G, Mg, s.K2, s.eta2, sig2[1])
    if name in ("fednewton", "fednewton_certified"):
        _, N, M = local(0.0, 0.0, s.K, s.eta, sig2[0])
        G, Mg = float(np.sum(w ** 2 * N)), float(np.sum(w * M))
        c = float(resp.curvature(G, Mg))
        h = c + tau1 if certified else max(c, tau1)   # the ridge solve, or the paper's eigenvalue floor
        bias = Mg - float(resp.pull(G, Mg)) / h       # the Newton step on the intercept's bias
        return float(np.square(1.0 - c / h) * G + np.sum(w ** 2 * sig2[1])), bias
    raise ValueError(f"no noise forecast for method {name!r}; choose from {', '.join(CANDIDATES)}")


def noise_variances(name: str, s: MethodSettings, sigmas, w: np.ndarray, c: np.ndarray, *, tau1: float,
                    certified: bool) -> np.ndarray:
    """The variance of the noise in one coefficient along directions of fixed curvature ``c``
    (`propagate` with a constant `Response`: the linear model, softmax's).

    Parameters
    ----------
    name : str
        The method (a name of `CANDIDATES`, or ``fednewton_certified``).
    s : MethodSettings
        Its frozen settings (`fedgdp.methods.Method.settings`).
    sigmas : sequence of ndarray of shape (m,)
        The noise sds of its plan, one array per release spec (`fedgdp.core.privacy.calibrate_with_clip`).
    w : ndarray of shape (m,)
        The aggregation weights.
    c : ndarray
        Curvatures (eigenvalues of the model's Hessian).
    tau1 : float
        FedNewton's ridge / floor.
    certified : bool
        FedNewton's solve: the ridge (certified) or the eigenvalue floor (paper).
    """
    return np.array([propagate(name, s, sigmas, w, Response("constant", float(cj)), tau1=tau1,
                               certified=certified)[0] for cj in np.asarray(c, float)])


def _check_finite(name: str, sd: np.ndarray, s: MethodSettings) -> None:
    """ValueError naming the step settings when the linearised iteration's noise overflows."""
    if not np.all(np.isfinite(sd)):
        steps = ", ".join(f"{k}={v:g}" for k, v in s.as_dict().items() if k.startswith("eta"))
        raise ValueError(f"the noise forecast of {name} is not finite: its linearised iteration diverges at these "
                         f"step sizes ({steps}); lower them")


@dataclass
class _PublicData:
    """What a method's plan reads (`fedgdp.methods.Method.plan`), from public inputs only."""

    sizes: np.ndarray
    B: float
    tau1: float
    privacy: dict
    newton: dict
    clip: dict = field(default_factory=dict)

    @property
    def plan_B(self) -> float:
        return self.B

    @property
    def plan_n(self) -> np.ndarray:
        return self.sizes.astype(float)[None, :]

    @property
    def solve_tol(self) -> float:
        return solve_tol(self.newton)

    def plan_halves(self):
        h1 = self.sizes // 2
        return h1[None, :].astype(float), (self.sizes - h1)[None, :].astype(float)


def _sizes(sizes) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(sizes))
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)) \
            or np.any(arr < 1) or np.any(arr != np.round(arr)):
        raise ValueError(f"sizes must list each client's rows, whole numbers >= 1, got sizes={sizes!r}")
    return arr.astype(np.int64)


def _plan_sigmas(name: str, s: MethodSettings, data: _PublicData, mu: float):
    """The method's noise sds, each (m,), by its own plan and the package's calibration."""
    from ..realdata import get_method

    plan = get_method(name).plan(data, s)
    cal = privacy.calibrate_with_clip(plan, mu=mu, clip=data.clip, n=data.plan_n)
    return [np.asarray(sg, float).reshape(-1)[-len(data.sizes):] for sg in cal.sigmas]


def _settings(family, mu, settings: dict) -> dict:
    """The public settings checked and completed (FederatedGLM's defaults)."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise ValueError(f"unknown forecast setting {unknown[0]!r}; choose from {', '.join(SETTINGS)}")
    fam = get_family(family)
    out = {"n_classes": None, "clip": None, "privacy_mode": "certified", "tau1": 0.5,
           "hessian_clip": privacy.HESSIAN_CLIP, "method_settings": None, "newton": None, "fit_intercept": True,
           "inference_share": 0.1, **settings}
    k = out["n_classes"]
    if fam.classes:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
            raise ValueError(f"family {family!r} needs n_classes, an int >= 2, got n_classes={k!r}")
    elif k is not None:
        raise ValueError(f"n_classes is for family 'multinomial', got n_classes={k!r} with family={family!r}")
    clip = out["clip"]
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float, np.floating))
                             or not 0 < clip <= privacy.CLIP_MAX):
        raise ValueError(f"the forecast needs a public clipping bound: clip must be None (the default rule) or a "
                         f"number in (0, {privacy.CLIP_MAX:g}], got clip={clip!r}")
    return out


def _resolve(name: str, family: str, mu: float, d: int, B: float, o: dict) -> RealdataSettings:
    """The method's real-data parameters as FederatedGLM resolves them (Poisson's step rule included)."""
    from .spec import resolve_method, with_steps

    p = resolve_method(name, mu=mu, clip=float(B), tau1=o["tau1"], privacy_mode=o["privacy_mode"],
                       hessian_clip=o["hessian_clip"], newton=o["newton"], method_settings=o["method_settings"])
    return p if name == IRLS else with_steps(p, family, name, o["method_settings"], d, B)


def method_noise(name: str, family: str, sizes: np.ndarray, d: int, k: int, mu: float, p: RealdataSettings, B: float,
                 theta: np.ndarray | None = None, intercept: bool = True) -> np.ndarray:
    """The noise's root-mean-square error in every coefficient (d, k) of ``name``'s fit under the curvature model.

    Parameters
    ----------
    name : str
        The method.
    family : str
    sizes : ndarray of shape (m,)
    d, k : int
        Design columns (intercept included) and outputs.
    mu : float
    p : RealdataSettings
        The resolved real-data parameters (``method_settings[name]``, ``tau1``, ``privacy``,
        ``newton``, ``clip``).
    B : float
        The clipping bound.
    theta : ndarray of shape (d, k) or None
        The estimate whose curvature to use (None: theta = 0).
    intercept : bool
        Whether row 0 is an intercept (it takes the Poisson noise's bias).

    Returns
    -------
    ndarray of shape (d, k)
        Root-mean-square errors: the noise's sd, and in the intercept its bias too (0 at mu = inf).
    """
    from ..realdata import get_method

    if not math.isfinite(mu):
        return np.zeros((d, k))
    if name == IRLS:      # the released curvature's noise (share nu of it) inflates H^-1's: by 1 / (1 - nu)
        T = get_method(name).settings(p.method_settings[name]).T
        nu = min(irls_curvature_noise(family, sizes, d, mu, T), IRLS_CURVATURE_NOISE)   # beyond: low, by design
        return np.full((d, k), irls_noise(family, sizes, mu, B, T, theta) / (1.0 - nu))
    mode = p.privacy["mode"]
    data = _PublicData(sizes, B, p.tau1, p.privacy, p.newton, clip=p.clip)
    s = get_method(name).settings(p.method_settings[name])
    sig = _plan_sigmas(name, s, data, mu)
    w = sizes / sizes.sum()
    certified = mode == "certified" or name == "fednewton_certified"
    if not get_family(family).classes:         # the scalar families: the noise the iterates carry bends their pull
        resp = response(family, d, B / math.sqrt(d), theta, intercept)
        with np.errstate(over="ignore", invalid="ignore"):
            var, bias = propagate(name, s, sig, w, resp, tau1=p.tau1, certified=certified)
        out = np.full((d, k), var)
        out[0] += bias ** 2 if intercept else 0.0    # the intercept's error: its noise and the noise's bias
        return np.sqrt(np.maximum(out, 0.0))
    values, vectors = curvature(family, k, theta, b=B / math.sqrt(d))
    with np.errstate(over="ignore", invalid="ignore"):
        variances = noise_variances(name, s, sig, w, values, tau1=p.tau1, certified=certified)
    cov = (vectors * variances) @ vectors.T          # (k, k): one design row's noise covariance across the outputs
    centre = np.eye(k) - np.ones((k, k)) / k   # centred across the classes: what the probabilities see
    cov = centre @ cov @ centre
    per_output = np.maximum(np.diag(cov), 0.0)  # each output's variance, the same for every design row
    return np.broadcast_to(np.sqrt(per_output), (d, k)).copy()


def noise_se(est) -> np.ndarray:
    """The privacy-noise standard error of each coefficient of a fitted `FederatedGLM`,
    from its public sds through its method's iteration at the released estimate (the
    curvature model at ``theta_``; costs no privacy), at the mu the estimation spent
    (``estimation_mu_``: mu less the inference share, `fedgdp.api.inference`).

    Parameters
    ----------
    est : FederatedGLM
        A fitted estimator.

    Returns
    -------
    ndarray of shape (d, k)
        In ``theta_``'s layout (intercept row first); root-mean-square errors (`method_noise`:
        a Poisson intercept's includes the noise's bias).
    """
    name = est.privacy_.method
    theta = est.theta_
    if getattr(est, "noise_cov_", None) is not None:          # FedIRLS: its own final step's covariance
        return np.sqrt(np.maximum(np.diag(est.noise_cov_), 0.0)).reshape(theta.shape)
    return method_noise(name, est.family, np.asarray(est.client_sizes_), theta.shape[0], theta.shape[1],
                        getattr(est, "estimation_mu_", est.privacy_.mu), est.settings_, est.clip_bound_, theta,
                        bool(getattr(est, "fit_intercept", True)))


def forecast(family, sizes, n_features, mu, method=None, *, outcome_mean=None, signal_sd=0.0, **settings):
    """The privacy noise each method would add, forecast from public inputs only.

    Parameters
    ----------
    family : {"logistic", "multinomial", "poisson"}
    sizes : array-like of shape (m,)
        Each client's rows (public: the client column).
    n_features : int
        Features p (the design has p + 1 columns with the intercept).
    mu : float
        Each client's mu-GDP budget (inf: no noise).
    method : str or None, default=None
        One method, or None for every method of `CANDIDATES`.
    outcome_mean : float or None, default=None
        A plan's public guess of the outcome's mean (logistic: the share of ones; Poisson: the mean
        count), where the curvature is read (`planned_theta`). None: theta = 0, for logistic the
        largest curvature, so the least noise the fit can carry (a strong signal or a rare outcome
        carries up to several times more: docs/methods-forecast.md).
    signal_sd : float, default=0.0
        With ``outcome_mean``: the guessed sd of the linear predictor over the rows.
    **settings
        `FederatedGLM`'s parameters of the same names (`SETTINGS`): ``n_classes``
        (multinomial), ``clip`` (None: the public rule `public_clip`, whose Poisson bound
        follows the lowest forecast noise among the methods asked for; a number: B),
        ``privacy_mode``, ``tau1``, ``hessian_clip``, ``method_settings`` (one method's),
        ``newton``, ``fit_intercept``.

    Returns
    -------
    pandas.DataFrame
        One row per method: ``method``, ``noise_rmse`` (root-mean-square per coefficient
        of the noise's error, module docstring), ``noise_max`` (the largest coefficient's
        root-mean-square error: its sd, and a Poisson intercept's bias), ``rounds``,
        ``floats_up``, ``floats_down``, ``floats_sent`` (up + down), ``clip_bound``,
        ``recommended`` (the lowest ``noise_rmse``; at mu = inf the
        fewest rounds). ``attrs["recommended"]`` names it, ``attrs["model"]`` states the
        curvature model.

    Raises
    ------
    ValueError
        A bad family, size, feature count, mu, method or setting (one line, naming it), or
        step sizes at which the forecast's linearised iteration overflows.
    """
    import pandas as pd

    from ..methods.base import comm_counts
    from ..realdata import get_method

    o = _settings(family, mu, settings)
    sizes = _sizes(sizes)
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
        raise ValueError(f"n_features must be an int >= 1, got n_features={n_features!r}")
    mu = privacy.parse_mu(mu)
    d = int(n_features) + (1 if o["fit_intercept"] else 0)
    plan = planned_theta(family, d, outcome_mean, signal_sd)
    fam = get_family(family)
    k = fam.outputs(o["n_classes"])
    known = (*CANDIDATES, "fednewton_certified") + ((IRLS,) if fam.irls else ())
    irls_auto = irls_default(family, sizes, d, mu)
    auto = [n for n in known if n != "fednewton_certified" and (n != IRLS or irls_auto)]
    names = auto if method is None else [method]
    if method is not None and method not in known:
        raise ValueError(f"no noise forecast for method {method!r} of family {family!r}; choose from "
                         f"{', '.join(known)}")
    share = float(o["inference_share"])
    if not 0 <= share < 1:
        raise ValueError(f"inference_share must be in [0, 1), got inference_share={share!r}")
    if privacy.adds_noise(mu) and share > 0 and d * k <= 400:      # the estimate's part of mu (api/inference)
        mu = mu * math.sqrt(1.0 - share)
    if method is not None and get_method(method).tags.halves and sizes.min() < 2:
        raise ValueError(f"method {method} needs at least 2 rows per client (its two halves), got sizes "
                         f"down to {sizes.min()}")
    names = [n for n in names if sizes.min() >= 2 or not get_method(n).tags.halves]

    @functools.cache
    def table(B: float) -> list[dict]:           # each method's row at bound B
        rows = []
        for name in names:
            Bm = B if name != IRLS else float(o["clip"]) if o["clip"] is not None else irls_clip(family, d)
            p = _resolve(name, family, mu, d, Bm, o)
            sd = method_noise(name, family, sizes, d, k, mu, p, Bm, plan, intercept=bool(o["fit_intercept"]))
            meth = get_method(name)
            s = meth.settings(p.method_settings[name])
            _check_finite(name, sd, s)
            comm = (meth.comm(s, len(sizes), d * k) if name == IRLS
                    else comm_counts(meth.rounds(s), len(sizes), d * k, meth.tags.per_round))
            rows.append({"method": name, "noise_rmse": float(np.sqrt(np.mean(sd ** 2))),
                         "noise_max": float(sd.max()), "rounds": comm["rounds"], "floats_up": comm["floats_up"],
                         "floats_down": comm["floats_down"], "floats_sent": comm["floats_up"] + comm["floats_down"],
                         "clip_bound": Bm})
        return rows

    least = (lambda b: min(r["noise_rmse"] for r in table(b))) if privacy.adds_noise(mu) else None
    B = public_clip(family, d, least) if o["clip"] is None else float(o["clip"])
    df = pd.DataFrame(table(B))
    df["_prefer"] = [_PREFER.index(n) if n in _PREFER else len(_PREFER) for n in df["method"]]
    key = ["noise_rmse", "rounds", "_prefer"] if math.isfinite(mu) else ["rounds", "_prefer"]
    # FedIRLS reaches the MLE; the others stop where their fixed steps do (the noise is not their whole error)
    best = IRLS if IRLS in names and irls_auto else df.sort_values(key, kind="stable").iloc[0]["method"]
    df = df.drop(columns="_prefer")
    df["recommended"] = df["method"] == best
    df.attrs["recommended"] = best
    at = ("theta = 0" if plan is None else
          f"the planned outcome mean {outcome_mean:g} and linear predictor sd {signal_sd:g}")
    df.attrs["model"] = (f"standardised features (E[x x'] = I), Hessian W (x) I with W the family's curvature at {at}, "
                         "bent by the noise each iterate carries (its own client's for local steps); "
                         "noise propagated step by step through each method's iteration (fedgdp.api.forecast)")
    return df
