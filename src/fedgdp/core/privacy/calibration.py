"""The calibration core: every method's releases as a plan of `ReleaseSpec`, and `calibrate` (docs/methods.md §2)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from .ledger import Ledger

#: The release stages of the plans (a `ReleaseSpec`'s ``stage``, a ledger row's).
GRADIENT = "gradient"
LOCAL_STEP = "local step"
LOCAL_STEP_HALF1 = LOCAL_STEP + " (half 1)"
NEWTON = "newton"
CURVATURE = "curvature"
CLIP_HISTOGRAM = "clip histogram"

#: A release's noise sd must be at least this many ulps of its signal's largest value.
NOISE_ULPS = 256


@dataclass(frozen=True, eq=False)
class ReleaseSpec:
    """``count`` identical Gaussian releases by every client, as a method declares them.

    Attributes
    ----------
    stage : str
    count : int
    scale, n : float or ndarray broadcastable to (n_rep, m)
        One release's L2 sensitivity (replace-one neighbours) is ``scale / n``.
    share : Fraction
        Share of mu^2 spent by the ``count`` releases together.
    certified : bool
        Whether the sensitivity holds for every input, else it rests on ``assumption``.
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
        """
        return replace(self, share=Fraction(self.share) * Fraction(factor))


@dataclass(frozen=True)
class Calibration:
    """Output of `calibrate`: one noise sd array per spec of the plan, and the ledger."""

    sigmas: tuple
    ledger: Ledger


def calibrate(plan, *, mu: float, unaccounted=()) -> Calibration:
    """Noise sds and ledger of a plan: ``sigma_j = scale_j sqrt(count_j / share_j) / (mu n_j)``.

    Shares summing to one compose to mu; ``mu = inf``: sd 0 and sensitivity inf.

    Parameters
    ----------
    plan : sequence of ReleaseSpec
        The method's releases.
    mu : float
        The target mu per client.
    unaccounted : sequence of str
        Data-dependent choices the ledger does not account (they make it uncertified).

    Returns
    -------
    Calibration
        The sds (one array per spec, shaped as its sensitivity) and the ledger.
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
    """Noise sds and ledger under a published participation schedule: each client drawn spends exactly mu.

    Client i's specs with ``c_ij > 0`` share its mu^2 in the plan's proportions; a client never
    drawn keeps `calibrate`'s sd, never used (docs/methods.md §6, "Schedule-aware accounting").

    Parameters
    ----------
    plan : sequence of ReleaseSpec
        One spec per stage.
    mu : float
    counts : dict stage -> ndarray of int, broadcastable to (n_rep, m)
        Each client's releases of each stage; a stage absent counts 0.
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


def check_noise_resolves(plan, sigmas, n, dtype) -> None:
    """Refuse a plan whose noise the working precision could absorb: ``sd >= NOISE_ULPS eps A``.

    ``A = scale n_i / (2 n)`` bounds the signal (docs/methods.md §2, "Noise before rounding").

    Parameters
    ----------
    plan : sequence of ReleaseSpec
    sigmas : sequence of ndarray
        Their noise sds, broadcastable to (b, m); sd 0 is not checked.
    n : array_like
        The clients' sizes, broadcastable to (b, m).
    dtype : numpy or torch dtype
        The precision the release is formed in.
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
