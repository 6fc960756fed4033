"""mu-GDP privacy: clipping, the clipping-bound rules, the calibration core, the ledger.

Following the paper's sections 2.2-3:

- Per-sample clipping ``clip_B(g) = g min(1, B/||g||)``. For a canonical GLM the
  per-sample gradient is ``r_j x_j``, so clipping it is clipping the scalar residual
  ``r_j`` to ``[-B/||x_j||, B/||x_j||]`` (what the fast estimators do).
- A client's average of n clipped gradients has L2 sensitivity ``2B/n``
  (replace-one neighbours); a Gaussian release with sensitivity Delta and noise sd
  sigma is ``Delta/sigma``-GDP and k releases compose to ``sqrt(sum mu_j^2)``-GDP
  (Dong, Roth & Su 2022, Corollary 2).
- ``mu = inf`` means non-private: no clipping and no noise.

Calibration core: each method declares its releases once as a *plan*, a tuple of
`ReleaseSpec` (stage, count, sensitivity, share of mu^2, certified or the
assumption it rests on); `calibrate` turns a plan and mu into the noise sds and
the `Ledger`. The simulations, the real-data methods and the CNN methods all
use it, so a method's privacy is written in one place.

Clipping-bound rules: ``quantile`` (paper section 4.1: the q-th quantile of each
client's per-sample gradient norms at theta = 0, maximised over clients) uses the
data and is outside the ledger, so a ledger that uses it is not certified (its mu is
nominal); ``fixed`` is a public bound; ``private_quantile`` releases a noisy
histogram per client on a public grid, spends a stated share of mu^2 and is recorded
in the ledger (`private_clip_bound`).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import numpy as np

from .settings import as_float, is_bool, number

__all__ = [
    "DEFAULT_CLIP", "HESSIAN_CLIP", "DEFAULT_PRIVACY", "GRADIENT", "LOCAL_STEP", "LOCAL_STEP_HALF1", "NEWTON",
    "CLIP_HISTOGRAM",
    "PRIVACY_MODES", "MU_FLOOR", "MU_MAX", "CLIP_MIN", "CLIP_MAX", "HESSIAN_CLIP_RANGE", "RELEASE_MAX",
    "NOISE_BOUND", "iterate_bound", "check_release_bound", "parse_mu", "parse_fraction", "check_clip",
    "check_clip_bound", "check_privacy", "RELEASES",
    "adds_noise", "clips",
    "clip_rows", "row_norms", "U64", "CLIP_SLACK", "CLIP_WORK_ROUNDINGS", "TINY64", "round_down_subnormal",
    "clip_margin", "clip_scale", "clip_factors", "clip_bound", "bound_of_rule", "Release",
    "Ledger", "ReleaseSpec",
    "Calibration",
    "calibrate", "calibrate_schedule", "NOISE_ULPS", "check_noise_resolves",
    "calibrate_with_clip", "plan_fedsgd", "plan_fedavg", "plan_fedhybrid",
    "plan_fednewton", "plan_fednewton_iter", "plan_clip_histogram",
    "NEWTON_ASSUMPTION", "GUARANTEE", "private_clip_bound", "clip_histogram", "histogram_grid", "clip_share",
    "clip_unaccounted",
    "sigma_fedsgd", "sigma_fedavg", "sigma_fedhybrid", "sigma_fednewton",
    "newton_sensitivity", "gdp_delta", "gdp_epsilon", "gdp_mu",
]

#: The release stages of the plans (a `ReleaseSpec`'s ``stage``, a ledger row's): written here
#: once, read by the methods, the backends and the audit.
GRADIENT = "gradient"
LOCAL_STEP = "local step"
LOCAL_STEP_HALF1 = LOCAL_STEP + " (half 1)"
NEWTON = "newton"
CLIP_HISTOGRAM = "clip histogram"

#: The default clipping rule (paper section 4.1): the max over clients of each client's
#: 0.9-quantile of its per-sample gradient norms at zero (`bound_of_rule`). Read-only: copy it.
DEFAULT_CLIP: Mapping[str, Any] = MappingProxyType({"rule": "quantile", "q": 0.9})

#: Certified FedNewton's default per-sample Hessian clip, ``H_c = HESSIAN_CLIP tau1``.
HESSIAN_CLIP = 4.0

#: The default privacy setting (`check_privacy`). Read-only: copy it.
DEFAULT_PRIVACY: Mapping[str, Any] = MappingProxyType({"mode": "paper", "hessian_clip": HESSIAN_CLIP})

#: What a fit releases (a cell's ``release`` parameter): the private algorithm, the same with
#: its noise left out (clipped to the same bound), or neither clipped nor noisy (docs/methods.md §9).
RELEASES = ("private", "clip_only", "plain")


def adds_noise(mu: float, release: str = "private") -> bool:
    """Whether a fit's releases carry privacy noise: a finite target ``mu`` and release
    ``private`` (``clip_only`` and ``plain`` add none; docs/methods.md §9).

    The one rule behind every noise draw (`fedgdp.simulation.run.draw_noises`,
    `fedgdp.simulation.backend.FitData.private`, the real-data fold data).

    Parameters
    ----------
    mu : float
        The target mu (inf: non-private).
    release : str
        ``private``, ``clip_only`` or ``plain``.

    Returns
    -------
    bool
        Whether noise is drawn.
    """
    return bool(np.isfinite(mu)) and release == "private"


def clips(mu: float, release: str = "private") -> bool:
    """Whether per-sample gradients are clipped to a bound B: a finite target ``mu`` and
    release not ``plain`` (``clip_only`` clips to the bound of ``private``; docs/methods.md §9).

    The one rule behind every clipping bound (`fedgdp.simulation.run.clip_bounds`,
    `fedgdp.simulation.backend.FitData.clipped`, the real-data fold data).

    Parameters
    ----------
    mu : float
        The target mu (inf: non-private).
    release : str
        ``private``, ``clip_only`` or ``plain``.

    Returns
    -------
    bool
        Whether gradients are clipped.
    """
    return bool(np.isfinite(mu)) and release != "plain"


def row_norms(X: np.ndarray, plain: np.ndarray | None = None) -> np.ndarray:
    """L2 norm of each row of ``X`` (shape ``(n, d)`` -> ``(n,)``) without overflow.

    The plain norm (``np.linalg.norm(X, axis=-1)``, or ``plain`` when the caller has
    computed it its own way) wherever it is finite and normal, bit for bit; rows whose
    squares overflow or underflow are scaled by their largest entry before squaring
    (``a sqrt(sum (x/a)^2)``), so a row of entries near the float maximum gets a finite
    norm when that norm is representable (inf otherwise). A row holding a non-finite
    entry has norm inf or NaN (the clipping rule, `clip_factors`, zeroes it).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The rows.
    plain : ndarray or None of shape (n,)
        The caller's plain norms, used where finite and normal.

    Returns
    -------
    ndarray of shape (n,)
        The norms.
    """
    X = np.asarray(X, dtype=float)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out = np.array(np.linalg.norm(X, axis=-1) if plain is None else plain, dtype=float)
        redo = ~np.isfinite(out) | (out < 1e-150)
        if redo.any():
            Y = X[redo]
            a = np.max(np.abs(Y), axis=-1)
            safe = np.where((a > 0) & np.isfinite(a), a, 1.0)[:, None]
            scaled = a * np.sqrt(np.einsum("nd,nd->n", Y / safe, Y / safe))
            out[redo] = np.where(np.isfinite(a) & (a > 0), scaled, a)
    return out


#: The unit roundoff of float64, ``2^-53``: the clip margin's unit (`clip_margin`).
U64 = 2.0 ** -53

#: The clip margin's slack beyond one ``U64`` per number (`clip_margin`): the margin is
#: ``(D + CLIP_SLACK) U64``, which covers the norm's rounding, ``(D/2 + 8) U64``, and the five
#: roundings of the factor and of ``c_j g_j``, with room (docs/methods.md §2, "The clip margin").
CLIP_SLACK = 16

#: Roundings of ``c_j g_j`` counted in the working precision when it is not the float64
#: of the norms (the CNNs' torch port: the factor rounded down, times ``delta_j``, times ``a_j``).
CLIP_WORK_ROUNDINGS = 3


def clip_margin(D: int, unit: float = 0.0) -> float:
    """The clip margin ``kappa = (D + CLIP_SLACK) 2^-53 + CLIP_WORK_ROUNDINGS unit``: the
    rounding margin of every clip of the package, defined here once.

    Why: a computed norm of ``D`` numbers errs by at most ``(D/2 + 8) 2^-53`` relative, and
    the factor ``(1 - kappa) B / N`` and the product ``c_j g_j`` take five more roundings;
    clipping to ``(1 - kappa) B`` instead of ``B`` absorbs all of them, so the *computed*
    clipped gradient has norm ``<= B`` exactly, not just up to rounding (docs/methods.md
    §2, "The clip margin", the proof). A port that forms ``c_j g_j`` in a coarser working
    precision (the CNNs' float32, `fedgdp.nn.clipping.clip_margin`) adds its own three
    roundings of ``unit`` (in float64 that is conservative by ``3 2^-53``).

    Parameters
    ----------
    D : int
        Numbers per record's gradient: ``d`` for ``r_j x_j``, ``d k`` for ``x_j r_j'``.
    unit : float, default=0.0
        The unit roundoff of the working precision ``c_j g_j`` is formed in, when it is
        counted apart (torch ports); 0 for the float64 GLM paths.

    Returns
    -------
    float
        ``kappa``.
    """
    return CLIP_WORK_ROUNDINGS * unit + (int(D) + CLIP_SLACK) * U64


#: The smallest normal float64. A clip factor below it is subnormal: it carries fewer than 53
#: bits, and its rounding (up to ``2^-1075`` absolute) times a huge gradient is not covered by
#: the margin, so it is rounded towards zero instead (`round_down_subnormal`).
TINY64 = float(np.finfo(np.float64).tiny)


def round_down_subnormal(q):
    """``q`` where it is normal (or 0, inf, NaN), else the next float towards zero: a
    subnormal quotient ``RN(s / N)`` rounded down is at most ``s / N`` exactly, so a
    gradient of norm about ``N`` times it stays within ``s`` (`clip_factors`).

    Parameters
    ----------
    q : ndarray
        Quotients ``s / N >= 0``.

    Returns
    -------
    ndarray
        ``q``, the subnormal entries one step towards zero.
    """
    return np.where(q < TINY64, np.nextafter(q, 0.0), q)


def clip_scale(B, D: int, unit: float = 0.0):
    """The norm the clipped gradients are scaled to: ``(1 - kappa) B`` (`clip_margin`;
    inf stays inf). *The* clipping bound as computed: `clip_factors` and
    the simulations' compiled kernels (``lim_j = clip_scale(B, d) / ||x_j||``) read it.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound(s) (the ledger's: sensitivities and noise use B).
    D : int
        Numbers per record's gradient.
    unit : float, default=0.0
        `clip_margin`'s working-precision unit.

    Returns
    -------
    float or ndarray
        ``(1 - clip_margin(D, unit)) B``.
    """
    return (1.0 - clip_margin(D, unit)) * B


def clip_factors(norms: np.ndarray, B: float, D: int, *, unit: float = 0.0) -> np.ndarray:
    """The reference clip factor ``min(1, (1 - kappa) B/||g_j||)`` of gradients with
    norms ``norms`` (``kappa``: `clip_margin`, rounding's margin), and 0 where the norm
    is not finite (NaN or inf): *the* rule for a non-finite per-sample gradient, which
    is clipped to zero. So every computed clipped per-sample gradient has norm <= B and
    the sensitivity 2B/n holds for every input (docs/methods.md §2, "Finite arithmetic"
    and "The clip margin"). Its ports, held to it by ``tests/test_clip_ports.py``: the
    simulations' compiled kernels (`fedgdp.simulation.kernels`, the residual clipped to
    ``clip_scale(B, d) / ||x_j||``) and the CNNs' torch factors
    (`fedgdp.nn.clipping.clip_factors`).

    Parameters
    ----------
    norms : ndarray
        Per-sample gradient norms (`row_norms`, or a product of two of them).
    B : float
        The clipping bound.
    D : int
        Numbers per record's gradient (the margin's size).
    unit : float, default=0.0
        `clip_margin`'s working-precision unit.

    Returns
    -------
    ndarray
        The factors, shaped as ``norms``.
    """
    scale = clip_scale(B, D, unit)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        factor = round_down_subnormal(np.where(norms > scale, scale / norms, 1.0))
    return np.where(np.isfinite(norms), factor, 0.0)


def clip_rows(G: np.ndarray, B: float) -> np.ndarray:
    """Clip each row of ``G`` (shape ``(n, d)``) to L2 norm at most ``B`` (to ``(1 -
    kappa) B``, `clip_factors`, so the computed rows' norms are at most B); a row that
    is not finite becomes zero.

    Parameters
    ----------
    G : ndarray of shape (n, d)
        Per-sample gradients.
    B : float
        The clipping bound.

    Returns
    -------
    ndarray of shape (n, d)
        The clipped rows.
    """
    if not np.isfinite(B):
        return G
    factor = clip_factors(row_norms(G), B, G.shape[-1])[..., None]
    with np.errstate(invalid="ignore"):
        return np.where(factor > 0, G * factor, 0.0)


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
    """The clipping bound of ``rule``: the one dispatch of the rules, for every experiment.

    Parameters
    ----------
    rule : dict
        ``{"rule": "fixed", "value": B}``: B; ``{"rule": "private_quantile", ...}``:
        `private_clip_bound` of the norms; otherwise (``quantile``, ``q``) the max
        over clients of the q-quantile of their per-sample gradient norms.
    norms : callable
        ``norms()`` -> list of ndarray, one per client: the per-sample gradient norms at
        zero (called only when the rule needs them).
    mu, rng : float, numpy.random.Generator
        The privacy level and noise generator of ``private_quantile``.
    max_quantile : callable or None
        ``max_quantile(q)`` -> the quantile rule's bound computed by the caller (the
        simulation's vectorised client quantiles); None: ``np.quantile`` per client.

    Returns
    -------
    float
        The bound B.
    """
    if rule["rule"] == "fixed":
        return float(rule["value"])
    if rule["rule"] == "private_quantile":
        return private_clip_bound(norms(), rule, mu=mu, rng=rng)
    if max_quantile is not None:
        return float(max_quantile(rule["q"]))
    return float(max(np.quantile(v, rule["q"]) for v in norms()))


def clip_bound(glm, rep, rule: dict, *, mu: float = math.inf, rng=None) -> float:
    """The clipping bound B of one replicate (`bound_of_rule`).

    Parameters
    ----------
    glm : fedgdp.core.glm.GLM
    rep : fedgdp.simulation.data.Replicate
    rule : dict
        ``{"rule": "quantile", "q": 0.9}``: max over clients of the q-quantile of the
        per-sample gradient norms at theta = 0; ``{"rule": "fixed", "value": B}``;
        ``{"rule": "private_quantile", ...}``: `private_clip_bound`.
    mu, rng : the privacy level and noise generator of ``private_quantile``.

    Returns
    -------
    float
        The bound B.
    """
    def flat():
        return np.abs(glm.mean(np.zeros(1))[0] - rep.y) * row_norms(rep.X)

    return bound_of_rule(rule, lambda: np.split(flat(), np.cumsum(rep.sizes)[:-1]), mu=mu, rng=rng,
                         max_quantile=lambda q: _client_quantiles(flat(), rep.sizes, q).max())


# ------------------------------------------------------------------ calibration core
# Every private method of the package (simulations, real data, CNNs) declares its
# releases as a tuple of ReleaseSpec (a *plan*); `calibrate` is the one place
# that turns a plan and mu into noise sds and a Ledger.

#: The condition under which the paper's Newton calibration (Lemma 3.8) holds.
NEWTON_ASSUMPTION = "per-sample Hessian operator norm <= 4 tau1"


@dataclass(frozen=True, eq=False)
class ReleaseSpec:
    """``count`` identical Gaussian releases by every client, as a method declares them.

    The L2 sensitivity of one release under replace-one neighbours is
    ``scale / n`` (a client average over n records has a sensitivity proportional
    to 1/n; a release that is not one sets ``n = 1``).

    Attributes
    ----------
    stage : str
        What is released (`GRADIENT`, `LOCAL_STEP`, `NEWTON`, ...).
    count : int
        Releases per client.
    scale, n : float or ndarray broadcastable to (n_rep, m)
    share : Fraction
        Share of mu^2 spent by the ``count`` releases together.
    certified : bool
        True when the sensitivity holds for every input; False when it rests on an
        assumption about the data, stated in ``assumption``.
    """

    stage: str
    count: int
    scale: object
    n: object = 1.0
    share: Fraction = Fraction(1)
    certified: bool = True
    assumption: str = ""

    @property
    def sensitivity(self) -> np.ndarray:
        """L2 sensitivity of one release, ``scale / n``."""
        return np.asarray(self.scale, float) / self.n

    def rescaled(self, factor) -> ReleaseSpec:
        """The same releases with ``share * factor`` of mu^2.

        Parameters
        ----------
        factor : int, float or Fraction
            Multiplies the share (e.g. ``1 - share`` of the clipping rule's histogram).

        Returns
        -------
        ReleaseSpec
            A copy with the new share.
        """
        return replace(self, share=Fraction(self.share) * Fraction(factor))


@dataclass(frozen=True)
class Calibration:
    """Output of `calibrate`: one noise sd array per spec of the plan, and the ledger."""

    sigmas: tuple
    ledger: Ledger


def calibrate(plan, *, mu: float, unaccounted=()) -> Calibration:
    """Noise sds and ledger of a plan (a sequence of `ReleaseSpec`).

    Spec j spends ``share_j mu^2`` over its ``count_j`` releases, so one release is
    ``mu sqrt(share_j / count_j)``-GDP and its sd is
    ``sigma_j = scale_j sqrt(count_j / share_j) / (mu n_j)`` (Gaussian mechanism;
    releases compose by root sum of squares, so shares summing to one give mu).
    ``mu = inf``: sd 0 and sensitivity inf (no clipping, no noise). ``unaccounted``
    lists data-dependent choices that the ledger does not account (e.g. a clipping
    bound computed from the data); they make the ledger uncertified.

    Parameters
    ----------
    plan : sequence of ReleaseSpec
        The method's releases.
    mu : float
        The target mu per client.
    unaccounted : sequence of str
        Releases noted as not accounted.

    Returns
    -------
    Calibration
        The sds (one array per spec) and the ledger.
    """
    ledger = Ledger(unaccounted=list(unaccounted))
    sigmas = []
    private = math.isfinite(mu)
    for spec in plan:
        sens = spec.sensitivity
        if private and spec.count > 0:
            root = math.sqrt(float(Fraction(spec.count) / Fraction(spec.share)))
            sigma = spec.scale * root / (mu * spec.n)
        else:
            sigma = np.zeros_like(sens)
        sigma = np.broadcast_to(np.asarray(sigma, float), np.broadcast(sens, sigma).shape)
        sigmas.append(sigma)
        if spec.count > 0:
            ledger.add(spec.stage, spec.count, sens if private else np.inf, sigma,
                       certified=spec.certified, assumption=spec.assumption)
    return Calibration(tuple(sigmas), ledger)


def calibrate_schedule(plan, *, mu: float, counts: dict) -> Calibration:
    """Noise sds and ledger of a plan under a published participation schedule: each
    client calibrated to the releases it will make, so each client drawn at least once
    spends exactly ``mu``.

    ``counts[stage]`` is client i's number ``c_ij`` of releases of spec j, fixed before
    any data are read (client sampling drawn from a stream that never sees the data).
    Client i's specs with ``c_ij > 0`` share its mu^2 in the plan's proportions,
    ``share_ij = share_j / S_i`` with ``S_i = sum_{j: c_ij > 0} share_j``, so one release
    is ``mu sqrt(share_ij / c_ij)``-GDP and ``sigma_ij = scale_j sqrt(c_ij / share_ij) /
    (mu n_ij)``; its releases compose to ``sqrt(sum_j c_ij share_ij mu^2) = mu``. Under
    `calibrate` the same client is calibrated for ``count_j >= c_ij`` releases (every
    round). A client never drawn makes no release and spends nothing (its count is 0; its
    sd is `calibrate`'s, never used). The schedule does not depend on the data, so
    the guarantee holds given any schedule, and hence unconditionally (docs/methods.md §6,
    "Schedule-aware accounting").

    Parameters
    ----------
    plan : sequence of ReleaseSpec
        The method's releases, one spec per stage.
    mu : float
        The target mu per client (inf: `calibrate`'s non-private ledger).
    counts : dict stage -> ndarray of int, broadcastable to (n_rep, m)
        Each client's releases of each stage under the schedule; a stage absent counts 0.

    Returns
    -------
    Calibration
        The sds (one array per spec, each client's own) and the ledger (each client's counts).
    """
    stages = [spec.stage for spec in plan]
    if len(set(stages)) != len(stages):
        raise ValueError(f"a schedule's plan needs one spec per stage, got stages {stages}")
    printed = calibrate(plan, mu=mu)
    if not math.isfinite(mu):
        return printed
    c = {spec.stage: np.asarray(counts.get(spec.stage, 0), np.int64) for spec in plan}
    if any(np.any(v < 0) or np.any(v > spec.count) for spec, v in zip(plan, c.values())):
        raise ValueError("a schedule's counts lie between 0 and each spec's count")
    total_share = sum(np.where(c[spec.stage] > 0, float(spec.share), 0.0) for spec in plan)
    ledger = Ledger()
    sigmas = []
    for spec, sig0 in zip(plan, printed.sigmas):
        cj = c[spec.stage]
        with np.errstate(divide="ignore", invalid="ignore"):
            root = np.sqrt(cj * total_share / float(spec.share))
        sigma = np.where(cj > 0, spec.scale * root / (mu * np.asarray(spec.n, float)), sig0)
        sigma = np.broadcast_to(sigma, np.broadcast(spec.sensitivity, sigma).shape).astype(float)
        sigmas.append(sigma)
        ledger.add(spec.stage, cj, spec.sensitivity, sigma, certified=spec.certified, assumption=spec.assumption)
    return Calibration(tuple(sigmas), ledger)


# The plans of the four algorithms (paper section 3), used by the simulations and the
# real-data methods. B: clipping bound, n: client sample sizes.

#: The noise of a release must be at least this many units in the last place (ulps) of
#: the largest value its signal can take, in the precision it is added in
#: (`check_noise_resolves`, docs/methods.md §2 "Noise before rounding").
NOISE_ULPS = 256


def check_noise_resolves(plan, sigmas, n, dtype) -> None:
    """Refuse a plan whose noise the working precision could absorb (public inputs only).

    Every noisy release forms ``signal + sd Z`` before it touches the stored parameters,
    so the only rounding the noise meets is that of the signal. A release's signal has
    norm at most ``A = scale n_i / (2 n)`` (``scale / 2`` for a client mean, ``n_i`` times
    it under a sum, larger for minibatches and whole-update clipping), so it is rounded
    to a grid no coarser than ``ulp(A)``. Requiring ``sd >= NOISE_ULPS ulp(A)`` keeps the
    grid below ``sd / 256`` and the rounding's extra sensitivity ``2 u A <= 2 ulp(A)``
    below ``sd / 128``.

    Parameters
    ----------
    plan : sequence of ReleaseSpec
        The releases, arrays broadcastable to (b, m).
    sigmas : sequence of ndarray
        Their noise sds (`calibrate`), broadcastable to (b, m); 0 or inf-mu releases are
        not checked.
    n : array_like
        The clients' sizes, broadcastable to (b, m).
    dtype : numpy or torch dtype
        The precision the release is formed in (its ``eps`` is read). The float64 studies
        check their gradient and local-step releases (`calibrate_with_clip`); a GLM
        Newton release adds its noise to the whole parameter, in float64.
    """
    np_dtype = np.dtype(str(dtype)[len("torch."):] if str(dtype).startswith("torch.") else dtype)
    eps = float(np.finfo(np_dtype).eps)
    sizes = np.asarray(n, float)
    for spec, sd in zip(plan, sigmas):
        sd = np.asarray(sd, float)
        A = np.broadcast_to(np.asarray(spec.scale, float) * sizes / (2.0 * np.asarray(spec.n, float)),
                            np.broadcast_shapes(sd.shape, sizes.shape))
        # ulp(A) <= 2 u A = eps A: a bound on the grid of A's binade, as np.spacing gives
        need = NOISE_ULPS * eps * A
        bad = (sd > 0) & (sd < need)
        if np.any(bad):
            k = np.flatnonzero(bad.ravel())[0]
            raise ValueError(
                f"the noise sd {sd.ravel()[k]:.3g} of the {spec.stage!r} release is below {NOISE_ULPS} ulps "
                f"of its largest value {A.ravel()[k]:.3g} in {np_dtype} "
                f"(needs sd >= {need.ravel()[k]:.3g}): the rounding could absorb the noise; "
                "lower mu (a larger clip bound scales the signal and the noise alike; docs/methods.md, "
                "'Noise before rounding')")


def plan_fedsgd(*, B, n, K) -> tuple:
    """FedSGD (Algorithm 1): K noisy gradients of sensitivity ``2B/n``.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes, broadcastable to (b, m).
    K : int
        Server steps.

    Returns
    -------
    tuple of ReleaseSpec
        The plan.
    """
    return (ReleaseSpec(GRADIENT, K, 2.0 * B, n),)


def plan_fedavg(*, B, n, eta, R, K) -> tuple:
    """FedAvg (Algorithm 3): R K noisy local steps of sensitivity ``2 B eta / n``.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes, broadcastable to (b, m).
    eta : float
        Local step size.
    R, K : int
        Rounds and local steps per round.

    Returns
    -------
    tuple of ReleaseSpec
        The plan.
    """
    return (ReleaseSpec(LOCAL_STEP, R * K, 2.0 * B * eta, n),)


def plan_fedhybrid(*, B, n, eta1, K1, K2) -> tuple:
    """FedHybrid (Algorithm 2): K1 local steps and K2 gradients, each half of mu^2 (all
    of it to the one stage that makes releases when the other is empty).

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes, broadcastable to (b, m).
    eta1 : float
        Stage-1 step size.
    K1, K2 : int
        Stage-1 local steps and stage-2 server steps.

    Returns
    -------
    tuple of ReleaseSpec
        The plan.
    """
    half = Fraction(1, 2) if K1 > 0 and K2 > 0 else Fraction(1)
    return (ReleaseSpec(LOCAL_STEP, K1, 2.0 * B * eta1, n, half),
            ReleaseSpec(GRADIENT, K2, 2.0 * B, n, half))


def plan_fednewton(*, B, n1, n2, eta, K, tau1, hessian_bound=None, solve_tol=0.0) -> tuple:
    """FedNewton (Algorithm 4): K local steps on half 1, then one Newton release.

    Half 1 (``n1`` records) feeds the local steps and the Hessian, half 2 (``n2``)
    the clipped gradient; each stage spends half of mu^2.

    ``hessian_bound=None`` (the paper): the Newton release is calibrated on
    ``8 B / (tau1 n_eff)``, ``n_eff = 2 n1`` (Lemma 3.8), which holds only when every
    per-sample Hessian has operator norm at most ``4 tau1``; recorded uncertified.

    ``hessian_bound = H_c`` (certified): every per-sample Hessian is clipped to
    operator norm H_c and the step solves ``(H + tau1 I) s = g``. The release
    ``theta1 - s`` has sensitivity ``max(2B/(tau1 n2), H_c B/(tau1^2 n1))``:
    theta1 is public (post-processing of released values); a record of half 2 moves
    g by at most 2B/n2 and ``||(H + tau1 I)^{-1}|| <= 1/tau1``; a record of half 1
    moves H by at most H_c/n1 (two PSD matrices of norm <= H_c differ by at most
    H_c), and ``||A^{-1} - A'^{-1}|| <= ||A - A'|| / tau1^2`` with ``||g|| <= B``.
    With ``H_c = 4 tau1`` and even n this is the paper's ``8 B / (tau1 n)``.

    ``solve_tol`` (certified, an iterative solve): the solve stops at a residual
    ``||g - A s|| <= solve_tol ||g||`` (checked), so s is within
    ``solve_tol ||g|| / tau1 <= solve_tol B / tau1`` of the exact solve on either data
    set and the recorded sensitivity adds ``2 solve_tol B / tau1``. 0 (exact solves)
    adds nothing.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n1, n2 : ndarray
        Half sizes, broadcastable to (b, m).
    eta : float
        Stage-1 step size.
    K : int
        Stage-1 local steps.
    tau1 : float
        The eigenvalue floor / ridge.
    hessian_bound : float or None
        The per-sample Hessian clip (certified), None: the paper's calibration.
    solve_tol : float
        The Newton solve's relative residual bound (certified CG).

    Returns
    -------
    tuple of ReleaseSpec
        The plan.
    """
    half = Fraction(1, 2)
    n_eff = 2.0 * np.asarray(n1, float)
    stage1 = ReleaseSpec(LOCAL_STEP_HALF1, K, 4.0 * B * eta, n_eff, half)
    if hessian_bound is None:
        newton = ReleaseSpec(NEWTON, 1, 8.0 * B / tau1, n_eff, half, certified=False,
                             assumption=NEWTON_ASSUMPTION)
    else:
        n1, n2 = np.asarray(n1, float), np.asarray(n2, float)
        with np.errstate(over="ignore", divide="ignore"):    # inf for a tiny tau1: refused by the release bound
            delta = np.maximum(2.0 * B / (tau1 * n2), hessian_bound * B / (tau1 ** 2 * n1))
        if solve_tol:
            delta = delta + 2.0 * solve_tol * B / tau1
        newton = ReleaseSpec(NEWTON, 1, delta, 1.0, half)
    return (stage1, newton)


def plan_fednewton_iter(*, B, n, eta, R, K, cycles, ridge, damping) -> tuple:
    """FedNewton-Iter (Algorithm 5, for a network's last layer ``head``): ``R K`` local
    steps (sensitivity ``2 B eta / n``) and ``cycles`` head-only Newton releases, each
    stage half of mu^2.

    The Newton release is ``alpha (h + lambda I)^{-1} gbar`` with ``gbar = mean_j c_j``,
    ``h = mean_j c_j c_j'`` and ``c_j`` the per-sample head gradient clipped to ``B``
    (``lambda = ridge``, ``alpha = damping``). With ``A = h + lambda I`` and a neighbour's
    ``A'``, ``gbar'``: ``A'^{-1} gbar' - A^{-1} gbar = A'^{-1}(gbar' - gbar) + A'^{-1}(h -
    h') A^{-1} gbar``; ``||A^{-1}|| <= 1/lambda`` (h is PSD), ``||gbar' - gbar|| <= 2B/n``,
    ``||gbar|| <= B`` and ``h - h' = (c c' - c* c*')/n`` is a difference of two PSD
    matrices of norm at most ``B^2``, so ``||h - h'|| <= B^2/n``. Hence the sensitivity
    ``alpha B (2 + B^2/lambda) / (lambda n)``, for every input (certified). The paper's
    Algorithm 5 prints Algorithm 4's calibration (with ``tau1``); ``lambda`` plays
    ``tau1``'s part here and the Fisher term is accounted for explicitly.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes, broadcastable to (b, m).
    eta : float
        Local step size.
    R, K : int
        FedAvg rounds and local steps per round.
    cycles : int
        Head-only Newton releases.
    ridge : float
        ``lambda``.
    damping : float
        ``alpha``.

    Returns
    -------
    tuple of ReleaseSpec
        The plan: the local steps, then the Newton releases.
    """
    half = Fraction(1, 2)
    return (ReleaseSpec(LOCAL_STEP, R * K, 2.0 * B * eta, n, half),
            ReleaseSpec(NEWTON, cycles, damping * B / ridge * (2.0 + B * B / ridge), n, half))


def plan_clip_histogram(*, n, share) -> tuple:
    """The private clipping rule's release: one noisy normalised histogram per client,
    sensitivity ``sqrt(2)/n`` (replacing a record moves one count out of a bin and
    into another).

    Parameters
    ----------
    n : ndarray
        Client sizes, broadcastable to (b, m).
    share : Fraction or float
        Share of mu^2 the histogram spends.

    Returns
    -------
    tuple of ReleaseSpec
        The plan (one release per client).
    """
    return (ReleaseSpec(CLIP_HISTOGRAM, 1, math.sqrt(2.0), n, Fraction(share)),)


# Convenience: the sds of one method for given sizes (tests, the loop reference).
def sigma_fedsgd(*, B, n, mu, K):
    """FedSGD (Algorithm 1): ``2 B sqrt(K) / (mu n)`` per noisy gradient.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes.
    mu : float
        The target mu per client.
    K : int
        Server steps.

    Returns
    -------
    ndarray
        The sd, the broadcast shape of ``B`` and ``n``.
    """
    return calibrate(plan_fedsgd(B=B, n=n, K=K), mu=mu).sigmas[0]


def sigma_fedavg(*, B, n, mu, eta, R, K):
    """FedAvg (Algorithm 3): ``2 B eta sqrt(R K) / (mu n)`` per noisy local step.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes.
    mu : float
        The target mu per client.
    eta : float
        Local step size.
    R, K : int
        Rounds and local steps per round.

    Returns
    -------
    ndarray
        The sd, the broadcast shape of ``B`` and ``n``.
    """
    return calibrate(plan_fedavg(B=B, n=n, eta=eta, R=R, K=K), mu=mu).sigmas[0]


def sigma_fedhybrid(*, B, n, mu, eta1, K1, K2):
    """FedHybrid (Algorithm 2): stage-1 and stage-2 sds, each spending mu/sqrt(2).

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes.
    mu : float
        The target mu per client.
    eta1 : float
        Stage-1 step size.
    K1, K2 : int
        Stage-1 local steps and stage-2 server steps.

    Returns
    -------
    tuple of ndarray
        The stage-1 and stage-2 sds.
    """
    return calibrate(plan_fedhybrid(B=B, n=n, eta1=eta1, K1=K1, K2=K2), mu=mu).sigmas


def sigma_fednewton(*, B, n, mu, eta, K, tau1, n2=None, hessian_bound=None):
    """FedNewton (Algorithm 4): stage-1 sd ``4 B eta sqrt(2K)/(mu n)`` and Newton sd
    ``8 sqrt(2) B/(tau1 mu n)`` (paper; ``n = 2 n1``), or the certified Newton sd
    (``hessian_bound`` given; ``n2`` the size of half 2).

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes (both halves: ``n1 = n / 2``).
    mu : float
        The target mu per client.
    eta : float
        Stage-1 step size.
    K : int
        Stage-1 local steps.
    tau1 : float
        The eigenvalue floor / ridge.
    n2 : ndarray or None
        Size of half 2 (None: ``n / 2``).
    hessian_bound : float or None
        The per-sample Hessian clip (certified), None: the paper's calibration.

    Returns
    -------
    tuple of ndarray
        The stage-1 and Newton sds.
    """
    n1 = np.asarray(n, float) / 2.0
    plan = plan_fednewton(B=B, n1=n1, n2=n1 if n2 is None else n2, eta=eta, K=K, tau1=tau1,
                          hessian_bound=hessian_bound)
    return calibrate(plan, mu=mu).sigmas


def newton_sensitivity(*, B, n, tau1):
    """Sensitivity the paper's Newton release is calibrated on: ``8 B / (tau1 n)``.

    Parameters
    ----------
    B : float or ndarray
        The clipping bound.
    n : ndarray
        Client sizes.
    tau1 : float
        The eigenvalue floor.

    Returns
    -------
    ndarray
        ``8 B / (tau1 n)``.
    """
    return plan_fednewton(B=B, n1=np.asarray(n, float) / 2.0, n2=1.0, eta=1.0, K=1,
                          tau1=tau1)[1].sensitivity


# ----------------------------------------------------------------------- ledger
@dataclass(frozen=True, eq=False)
class Release:
    """``count`` identical Gaussian releases by every client.

    Attributes
    ----------
    stage : str
        What is released (e.g. `GRADIENT`, `LOCAL_STEP`, `NEWTON`).
    count : int or ndarray of int of shape (n_rep, m)
        Releases per client: the same for every client, or each client's own count
        under a published participation schedule ([`calibrate_schedule`][fedgdp.core.privacy.calibrate_schedule]).
    sensitivity, sigma : ndarray of shape (n_rep, m)
        Per replicate and client. ``sigma = 0`` with ``sensitivity = inf`` is a
        non-private release (mu = inf).
    certified : bool
        Whether the sensitivity holds for every input.
    assumption : str
        The condition it rests on when not certified.
    """

    stage: str
    count: int | np.ndarray
    sensitivity: np.ndarray
    sigma: np.ndarray
    certified: bool = True
    assumption: str = ""

    @property
    def mu(self) -> np.ndarray:
        """mu of one release, ``sensitivity / sigma``, shape (n_rep, m)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.divide(self.sensitivity, self.sigma)
        return np.where(self.sigma == 0, np.inf, out)


#: What a ledger's mu means, printed with every client's report (docs/methods.md §2,
#: "What is guaranteed, exactly").
GUARANTEE = ("record-level mu-GDP at each client, against everything that client releases, in this one fit "
             "(one record of this client's data is protected, not its whole data set; mu_certified; mu is nominal when "
             "mu_certified is inf); not across fits: FedNewton and certified FedNewton share noise, fits at "
             "different mu reuse it, a real-data record enters several CV fits; test metrics are released "
             "without noise; float64 sampling (Mironov 2012) is not covered")


@dataclass
class Ledger:
    """Every Gaussian release of every client, with GDP composition.

    ``unaccounted`` lists data-dependent choices outside the ledger (e.g. a clipping
    bound computed from the clients' data): with any, or with an uncertified release,
    the composed mu is nominal only and `certified_mu` is inf.
    """

    releases: list[Release] = field(default_factory=list)
    unaccounted: list[str] = field(default_factory=list)

    def add(self, stage: str, count, sensitivity, sigma, *, certified: bool = True,
            assumption: str = "") -> None:
        """Record ``count`` releases of one stage (sensitivity and sigma broadcast together and copied).

        Parameters
        ----------
        stage : str
            What is released.
        count : int or ndarray of int
            Releases per client: one number for every client, or an array broadcastable
            to (n_rep, m) of each client's own count (a published schedule).
        sensitivity : float or ndarray
            L2 sensitivity of one release, broadcastable to (n_rep, m) (inf: non-private).
        sigma : float or ndarray
            Noise sd, broadcastable with ``sensitivity``.
        certified : bool
            Whether the sensitivity holds for every input.
        assumption : str
            The condition it rests on when not certified.
        """
        sens, sig = np.broadcast_arrays(np.asarray(sensitivity, float), np.asarray(sigma, float))
        if np.ndim(count):
            sens, sig, c = np.broadcast_arrays(sens, sig, np.asarray(count, np.int64))
            count = c.copy()
        else:
            count = int(count)
        self.releases.append(Release(stage, count, sens.copy(), sig.copy(), bool(certified),
                                     str(assumption)))

    def composed_mu(self) -> np.ndarray:
        """Composed (nominal) mu of each client, ``sqrt(sum_j mu_j^2)``, shape (n_rep, m)."""
        total = sum(rel.count * rel.mu ** 2 for rel in self.releases)
        return np.sqrt(total)

    @property
    def certified(self) -> bool:
        """True when every release is certified and nothing is unaccounted."""
        return all(r.certified for r in self.releases) and not self.unaccounted

    def spent_mu(self, counts: dict) -> np.ndarray:
        """Composed mu of the releases actually made: ``counts`` maps a stage to how many
        of its releases each client made (broadcastable to (n_rep, m)); a ledger allows
        for every release a client could make (e.g. every round under client sampling),
        so this is at most `composed_mu`.

        Parameters
        ----------
        counts : dict
            Stage -> releases made per client (int or ndarray broadcastable to (n_rep, m)); a stage absent
            counts 0.

        Returns
        -------
        ndarray
            The composed mu of shape (n_rep, m) (or the broadcast shape of the counts).
        """
        total: float | np.ndarray = 0.0
        for rel in self.releases:
            c = np.asarray(counts.get(rel.stage, 0))
            total = total + np.where(c > 0, np.where(c > 0, c, 1) * rel.mu ** 2, 0.0)
        return np.sqrt(total)

    def certified_mu(self) -> np.ndarray:
        """`composed_mu` where the ledger is certified, inf otherwise, shape (n_rep, m)."""
        mu = self.composed_mu()
        return mu if self.certified else np.full_like(np.asarray(mu, float), np.inf)

    def client_report(self, replicate: int = 0) -> list[dict]:
        """JSON-ready list: for each client, its releases, composed mu and certified mu.

        Parameters
        ----------
        replicate : int
            The replicate (row of the (n_rep, m) arrays) reported.

        Returns
        -------
        list of dict
            Per client: ``client``, ``releases`` (one entry per release), ``mu``, ``mu_certified``,
            ``guarantee``.
        """
        mu = self.composed_mu()[replicate]
        mu_cert = self.certified_mu()[replicate]
        out = []
        for i in range(mu.shape[0]):
            rel = []
            for r in self.releases:
                entry = {"stage": r.stage, "sensitivity": float(r.sensitivity[replicate, i]),
                         "sigma": float(r.sigma[replicate, i]), "certified": r.certified,
                         "assumption": r.assumption}
                rel.extend([entry] * int(np.broadcast_to(r.count, r.sigma.shape)[replicate, i]))
            out.append({"client": i, "releases": rel, "mu": float(mu[i]), "mu_certified": float(mu_cert[i]),
                        "guarantee": GUARANTEE})
        return out


def calibrate_with_clip(plan, *, mu: float, clip: dict, n) -> Calibration:
    """`calibrate` for a method whose clipping bound came from rule ``clip``.

    A ``private_quantile`` rule's histogram release (sizes ``n``) comes first in the
    ledger, with its ``share`` of mu^2, and the method's releases share the rest; a
    data-driven ``quantile`` bound is noted as unaccounted (when private). The
    returned sigmas are those of ``plan`` only.

    Parameters
    ----------
    plan : sequence of ReleaseSpec
        The method's releases.
    mu : float
        The target mu per client.
    clip : dict
        The clipping rule.
    n : ndarray
        Client sizes (the histogram's).

    Returns
    -------
    Calibration
        The sds of ``plan`` and the ledger.
    """
    share = clip_share(clip)
    pre = plan_clip_histogram(n=n, share=share) if share else ()
    if share:
        plan = tuple(spec.rescaled(1 - share) for spec in plan)
    cal = calibrate(pre + tuple(plan), mu=mu, unaccounted=clip_unaccounted(clip) if math.isfinite(mu) else ())
    sigmas = cal.sigmas[len(pre):]
    steps = [(spec, sd) for spec, sd in zip(plan, sigmas) if spec.stage.startswith((GRADIENT, LOCAL_STEP))]
    check_noise_resolves([a for a, _ in steps], [b for _, b in steps], n, np.float64)
    return Calibration(sigmas, cal.ledger)


# ------------------------------------------------------------ private clipping bound
def histogram_grid(rule: dict) -> np.ndarray:
    """The public geometric bin edges of a ``private_quantile`` rule, shape (bins + 1,).

    Parameters
    ----------
    rule : dict
        The rule (its ``grid``: low, high, bins).

    Returns
    -------
    ndarray of shape (bins + 1,)
        The edges.
    """
    lo, hi, bins = rule["grid"]
    return np.geomspace(float(lo), float(hi), int(bins) + 1)


def clip_histogram(norms: np.ndarray, rule: dict) -> np.ndarray:
    """One client's pre-noise release of the ``private_quantile`` rule: the share of
    its per-sample gradient norms (n,) in each bin of the public grid, shape (bins,)
    (norms outside the grid count in the end bins).

    Parameters
    ----------
    norms : ndarray of shape (n,)
        The client's per-sample gradient norms.
    rule : dict
        The ``private_quantile`` rule (its ``grid``).

    Returns
    -------
    ndarray of shape (bins,)
        The normalised histogram (sums to one).
    """
    edges = histogram_grid(rule)
    bins = edges.shape[0] - 1
    idx = np.clip(np.searchsorted(edges, norms, side="right") - 1, 0, bins - 1)
    return np.bincount(idx, minlength=bins) / float(len(norms))


def private_clip_bound(norms: list, rule: dict, *, mu: float, rng: np.random.Generator) -> float:
    """The clipping bound of the ``private_quantile`` rule from each client's
    per-sample gradient norms at theta = 0 (a list of m arrays).

    Client i releases its normalised histogram over the public grid
    (`histogram_grid`; norms outside it fall into the end bins) plus Gaussian
    noise calibrated by `plan_clip_histogram` on ``share mu^2``; the server
    takes the upper edge of the first bin where the client's noisy cumulative
    histogram reaches q, and B is the largest over clients (post-processing).
    Noise: one ``rng.standard_normal((m, bins))`` draw.

    Parameters
    ----------
    norms : list of ndarray
        Per client, the per-sample gradient norms at zero.
    rule : dict
        The ``private_quantile`` rule.
    mu : float
        The target mu.
    rng : numpy.random.Generator
        The histogram's noise.

    Returns
    -------
    float
        The bound.
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
    """Share of mu^2 the clipping rule spends (``private_quantile``: its ``share``).

    Parameters
    ----------
    rule : dict
        The clipping rule.

    Returns
    -------
    Fraction
        The share (0 for the other rules).
    """
    return Fraction(rule["share"]) if rule.get("rule") == "private_quantile" else Fraction(0)


def clip_unaccounted(rule: dict) -> list[str]:
    """The ledger note of a data-driven, unaccounted clipping bound (empty otherwise).

    Parameters
    ----------
    rule : dict
        The clipping rule.

    Returns
    -------
    list of str
        One note for the ``quantile`` rule, else empty.
    """
    if rule.get("rule") == "quantile":
        return [f"clip bound B: data-driven q={rule['q']} quantile of the clients' gradient norms, "
                "not accounted (use clip rule private_quantile or fixed)"]
    return []


# -------------------------------------------------------------- GDP conversions
def _gdp_log_delta(mu: float, a: float) -> float:
    """log delta of a mu-GDP mechanism at ``epsilon = mu (mu/2 - a)``, in log space.

    Dong, Roth & Su (2022, Corollary 1) give ``delta = Phi(a) - e^epsilon Phi(a - mu)``
    with ``a = mu/2 - epsilon/mu``. Since ``phi(a - mu) = phi(a) exp(a mu - mu^2/2)``,
    the second term is ``phi(a) M(mu - a)``, with M the Mills ratio ``M(x) = Phi(-x) /
    phi(x) = sqrt(pi/2) erfcx(x / sqrt(2))``: no ``e^epsilon`` to overflow, so

        log delta = log Phi(a) + log(1 - exp(log phi(a) + log M(mu - a) - log Phi(a))).

    Parameters
    ----------
    mu : float
        The GDP parameter (finite, > 0).
    a : float
        ``mu/2 - epsilon/mu`` (at most mu/2, i.e. epsilon >= 0).

    Returns
    -------
    float
        log delta (``-inf`` where delta rounds to 0).
    """
    from scipy.special import erfcx, log_ndtr

    log_phi = -0.5 * a * a - 0.5 * math.log(2 * math.pi)
    log_mills = 0.5 * math.log(math.pi / 2) + math.log(float(erfcx((mu - a) / math.sqrt(2))))
    log_cdf = float(log_ndtr(a))
    x = log_phi + log_mills - log_cdf               # log of the second term over the first, < 0
    if not x < 0:
        return -math.inf
    log1mexp = math.log(-math.expm1(x)) if x > -math.log(2) else math.log1p(-math.exp(x))
    return log_cdf + log1mexp


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
        delta (computed in log space, `_gdp_log_delta`). The limits: 1 at ``mu = inf``
        (no privacy) and 0 at ``epsilon = inf``; both at once is a ValueError.
    """
    mu, epsilon = _gdp_mu_arg(mu), _gdp_epsilon_arg(epsilon)
    if math.isinf(mu) and math.isinf(epsilon):
        raise ValueError("delta is undefined at mu=inf and epsilon=inf together (give a finite one)")
    if math.isinf(mu):
        return 1.0
    if math.isinf(epsilon):
        return 0.0
    return math.exp(_gdp_log_delta(mu, mu / 2 - epsilon / mu))


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


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon >= 0 with ``gdp_delta(mu, epsilon) <= delta``.

    The root is found in ``a = mu/2 - epsilon/mu`` on the bracket ``[Phi^-1(delta),
    mu/2]`` (delta <= Phi(a), so delta(a) <= delta at its left end; epsilon = 0 at its
    right end) with delta in log space (`_gdp_log_delta`), then ``epsilon = mu
    (mu/2 - a)``: finite for every mu up to `MU_MAX` (about ``mu^2/2`` for large mu).

    Parameters
    ----------
    mu : float
        The GDP parameter (inf gives inf).
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
        mu (inf at ``epsilon = inf``, the limit). ValueError where mu would exceed
        `MU_MAX`.
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


# ----------------------------------------------------------------------------
# The privacy settings of every experiment, checked: mu, the clipping rule, the mode
# ----------------------------------------------------------------------------
#: ``paper``: the algorithms as printed; ``certified``: every sensitivity holds for all inputs
PRIVACY_MODES = ("paper", "certified")


#: The smallest mu accepted: below it the noise sds overflow towards inf (a mu of 5e-324
#: gives sigma = inf, a release that is not finite), and no study needs it.
MU_FLOOR = 1e-6

#: The largest finite mu accepted: its epsilon (about mu^2/2, `gdp_epsilon`) and the
#: composition's sum of squares stay finite in float64 (they overflow near mu = 1.3e154);
#: any mu above about 40 is already a guarantee of epsilon > 900 at delta = 1e-5.
MU_MAX = 1e100
#: The largest clipping bound B accepted (a fixed value, or a private quantile grid's top):
#: B^2, the scale of CG's inner products on a gradient of norm <= B, stays below 1e200,
#: far under the float64 maximum 1.8e308 (B = 1e200 overflowed inside CG on some data and
#: not on a neighbour; docs/methods.md §2, "The certified solve").
CLIP_MAX = 1e100
#: The smallest clipping bound B accepted on every path (a fixed value, a private quantile
#: grid's bottom, the CNN clip; docs/methods.md §2, "Public ranges"): far above the
#: subnormals, so that every sensitivity (``2B/n``, ``eta B``, ``B/tau1``) and noise sd
#: (about ``B / (n mu)``, at least 1e-119 for n <= 1e9 and mu <= `MU_MAX`) is a normal
#: float64 with its full 53 bits (at B = 1e-320 a ledger composed to 1.98 instead of 2),
#: and ``B^2`` (1e-20) a normal float32 (the CNN clip margin, `fedgdp.nn.clipping`).
CLIP_MIN = 1e-10

#: The range of a fraction q: a clipping quantile (``clip: {q: ...}``) and the CNN's share
#: of clients drawn per round, both in (0, 1] (a checker ``parse_fraction(key, value)``).
parse_fraction = number(0, 1, closed="high")

#: The accepted range of certified FedNewton's ``hessian_clip`` (a multiple of tau1): the
#: condition number ``kappa = 1 + hessian_clip`` of ``H + tau1 I`` gives CG's rate
#: ``rho = (sqrt(kappa) - 1) / (sqrt(kappa) + 1)`` strictly inside (0, 1) in float64 (1e-300
#: and 1e300 made it 0 and 1: a ZeroDivisionError), and ``2^-53 kappa <= 1.2e-8``.
HESSIAN_CLIP_RANGE = (1e-8, 1e8)

#: The largest entry a certified release may reach by its public bound
#: (`check_release_bound`): ``2^1000``, a margin of ``2^24`` below the float64
#: maximum for the rounding of the sums that make it.
RELEASE_MAX = 2.0 ** 1000

#: A bound on every standard normal the noise streams draw (numpy's ziggurat, which
#: `fedgdp.core.normals` reproduces): a draw is a layer point (``|z| <= r = 3.6542``) or a
#: tail point ``r + (-log(1 - U)) / r`` with U a 53-bit double below 1, so
#: ``|z| <= 3.6542 + 53 log(2) / 3.6542 < 13.71``.
NOISE_BOUND = 14.0


def iterate_bound(count, eta, B, sd, *, on_gradient: bool = False):
    """The most ``count`` noisy clipped steps can move an entry of an iterate, from public
    inputs only: ``K (eta B + z sd)`` with the noise on the iterate (local steps),
    ``K eta (B + z sd)`` with it on the gradient (server steps); a clipped gradient's
    entries are at most B, a noise draw at most ``z = NOISE_BOUND`` sds (docs/methods.md
    §2). The one overflow bound of the GLM methods' refusals (`check_release_bound`).

    Parameters
    ----------
    count : int
        Steps ``K``.
    eta : float
        Step size.
    B : float or ndarray
        The clipping bound (a drifted bound for DP-SCAFFOLD).
    sd : float or ndarray
        The noise sd of a step.
    on_gradient : bool, default=False
        The noise is added to the gradient (moved by ``eta``), not to the iterate.

    Returns
    -------
    float or ndarray
        The bound, shaped as ``B * sd``.
    """
    z = NOISE_BOUND
    return count * (eta * (B + z * sd) if on_gradient else eta * B + z * sd)


def check_release_bound(name: str, bound, fix: str) -> None:
    """Refuse a certified fit whose release could overflow: ValueError unless the
    public bound ``bound`` (an array or float: the largest entry any release can take,
    from public inputs only) is at most `RELEASE_MAX` (docs/methods.md §2).

    Parameters
    ----------
    name : str
        The method (for the message).
    bound : float or ndarray
        The bound (its maximum is checked).
    fix : str
        The settings that lower it, with their values (for the message).
    """
    top = float(np.max(bound))
    if not top <= RELEASE_MAX:
        raise ValueError(f"method {name}: a release could reach {top:.3g}, above {RELEASE_MAX:.3g} (float64 "
                         f"overflow); lower or raise the settings that set it: {fix}")


def parse_mu(value, key: str = "mu") -> float:
    """`MU_FLOOR` (1e-6) <= mu <= `MU_MAX` (1e100), or ``inf``; ValueError naming
    ``key`` and the bad value otherwise (a boolean is refused). The one range of mu on
    every path: the estimator, ``fedgdp fit``, the simulation, real-data and CNN settings.

    Parameters
    ----------
    value : float or str
        A number or ``inf``.
    key : str
        The setting's name (for the message).

    Returns
    -------
    float
        mu.
    """
    mu = as_float(key, value, "a positive number or 'inf'")
    if not mu > 0 or math.isnan(mu):
        raise ValueError(f"{key} must be > 0 (or 'inf' for no privacy), got {key}={value}")
    if mu < MU_FLOOR:
        raise ValueError(f"{key} must be at least {MU_FLOOR:g} (smaller values make the noise sd overflow), "
                         f"got {key}={value}")
    if math.isfinite(mu) and mu > MU_MAX:
        raise ValueError(f"{key} must be at most {MU_MAX:g} or 'inf' (larger values make epsilon overflow), "
                         f"got {key}={value}")
    return mu


def check_clip(clip) -> dict:
    """The clipping rule as a dict: a number means ``{"rule": "fixed", "value": B}``;
    ValueError naming the bad value otherwise.

    Rules: ``quantile`` (``q`` in (0, 1]; data-driven, not accounted), ``fixed``
    (``value`` >= `CLIP_MIN`; public), ``private_quantile`` (``q``, ``share`` of mu^2 in
    (0, 1), public geometric ``grid: [lo, hi, bins]`` with ``lo >= CLIP_MIN``; defaults
    share 0.1, grid [0.01, 100, 64]). A boolean is never a number here.

    Parameters
    ----------
    clip : dict or float
        The rule, or a fixed bound.

    Returns
    -------
    dict
        The checked rule.
    """
    if isinstance(clip, numbers.Real) and not is_bool(clip):
        clip = {"rule": "fixed", "value": float(clip)}
    if not isinstance(clip, dict):
        raise ValueError(f"clip must be a mapping with a rule or a number, got clip={clip!r}")
    rule = clip.get("rule")
    if rule not in ("quantile", "fixed", "private_quantile"):
        raise ValueError(f"clip rule must be 'quantile', 'fixed' or 'private_quantile', got {rule!r}")
    if rule in ("quantile", "private_quantile"):
        parse_fraction("clip q", clip.get("q"))
    if rule == "fixed":                  # (the value is kept as given: it enters the seeds' parameters)
        what = f"a number >= {CLIP_MIN:g} (CLIP_MIN)"
        if not as_float("fixed clip value", clip.get("value"), what) >= CLIP_MIN:
            raise ValueError(f"fixed clip value must be {what}, got value={clip.get('value')!r}")
    if rule == "private_quantile":
        clip = {"share": 0.1, "grid": [0.01, 100.0, 64]} | dict(clip)
        clip["q"], clip["share"] = float(clip["q"]), number(0, 1)("clip share", clip["share"])
        grid = clip["grid"]
        ok = isinstance(grid, (list, tuple)) and len(grid) == 3
        if ok:
            lo, hi, bins = grid
            try:
                ok = (CLIP_MIN <= as_float("clip grid", lo) < as_float("clip grid", hi)
                      and isinstance(bins, int) and not is_bool(bins) and bins >= 1)
            except ValueError:
                ok = False
        if not ok:
            raise ValueError(f"clip grid must be [lo, hi, bins] with {CLIP_MIN:g} (CLIP_MIN) <= lo < hi and an "
                             f"integer bins >= 1, got grid={grid!r}")
        clip["grid"] = [float(grid[0]), float(grid[1]), int(grid[2])]
    return clip


def check_clip_bound(clip: dict) -> None:
    """Refuse a clipping bound a private fit cannot use in finite arithmetic: a fixed
    value, or a private quantile grid's top, above `CLIP_MAX` (or ``inf``, or NaN).
    (The ``clip_only`` decomposition, which adds no noise, may use ``inf``.)

    Parameters
    ----------
    clip : dict
        A rule checked by `check_clip`.
    """
    if clip["rule"] == "fixed" and not float(clip["value"]) <= CLIP_MAX:
        raise ValueError(f"fixed clip value must be a number in (0, {CLIP_MAX:g}] (docs/methods.md §2), "
                         f"got clip={clip['value']!r}")
    if clip["rule"] == "private_quantile" and not float(clip["grid"][1]) <= CLIP_MAX:
        raise ValueError(f"clip grid's top must be at most {CLIP_MAX:g} (docs/methods.md §2), "
                         f"got grid={clip['grid']!r}")


def check_privacy(privacy, clip: dict, release: str = "private") -> dict:
    """The privacy setting ``{"mode": "paper" | "certified", "hessian_clip": c}``.

    ``paper``: the algorithms as printed; releases whose sensitivity rests on an
    assumption are recorded uncertified. ``certified``: every release has a
    sensitivity that holds for all inputs (FedNewton clips per-sample Hessians to
    operator norm ``c * tau1``), and the clipping bound must be public (``fixed``) or
    private (``private_quantile``): a data-driven ``quantile`` rule is an error.

    Parameters
    ----------
    privacy : dict
        ``mode`` and ``hessian_clip``.
    clip : dict
        The clipping rule (certified mode needs a public or private bound; a private
        fit's bound must lie in ``(0, CLIP_MAX]``: `check_clip_bound`).
    release : str
        What the fits release (`RELEASES`); ``private`` checks the bound's range.

    Returns
    -------
    dict
        The checked setting.
    """
    if not isinstance(privacy, dict):
        raise ValueError(f"privacy must be a mapping with mode and hessian_clip, got privacy={privacy!r}")
    unknown = set(privacy) - {"mode", "hessian_clip"}
    if unknown:
        raise ValueError(f"unknown privacy key(s) {sorted(unknown)}; known: hessian_clip, mode")
    out: dict[str, Any] = dict(DEFAULT_PRIVACY) | privacy
    if out["mode"] not in PRIVACY_MODES:
        raise ValueError(f"privacy mode must be 'paper' or 'certified', got mode={out['mode']!r}")
    try:
        out["hessian_clip"] = as_float("privacy hessian_clip", out["hessian_clip"])
    except ValueError:
        out["hessian_clip"] = math.nan
    if release == "private":
        check_clip_bound(clip)
    low, high = HESSIAN_CLIP_RANGE
    if not low <= out["hessian_clip"] <= high:
        raise ValueError(f"privacy hessian_clip must be a number in [{low:g}, {high:g}] (docs/methods.md §2), got "
                         f"hessian_clip={privacy.get('hessian_clip')!r}")
    if out["mode"] == "certified" and clip["rule"] == "quantile":
        raise ValueError("privacy mode 'certified' needs a public or private clipping bound: set clip to "
                         "{rule: private_quantile, ...} or {rule: fixed, value: B}, got clip rule 'quantile'")
    return out
