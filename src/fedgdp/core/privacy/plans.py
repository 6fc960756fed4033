"""The plans of the algorithms (paper §3; docs/methods.md §2, "Calibration"), and `calibrate_with_clip`.

B: the clipping bound; n: the client sizes, broadcastable to (b, m); a plan is a tuple of `ReleaseSpec`.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .calibration import (
    CURVATURE,
    GRADIENT,
    LOCAL_STEP,
    LOCAL_STEP_HALF1,
    NEWTON,
    Calibration,
    ReleaseSpec,
    calibrate,
    check_noise_resolves,
)
from .rules import clip_share, clip_unaccounted, plan_clip_histogram

#: The condition under which the paper's Newton calibration (Lemma 3.8) holds.
NEWTON_ASSUMPTION = "per-sample Hessian operator norm <= 4 tau1"


def plan_fedsgd(*, B, n, K) -> tuple:
    """FedSGD (Algorithm 1): K noisy gradients of sensitivity ``2B/n``.

    Parameters
    ----------
    B, n : float or ndarray
    K : int
        Server steps.
    """
    return (ReleaseSpec(GRADIENT, K, 2.0 * B, n),)


def plan_fedavg(*, B, n, eta, R, K) -> tuple:
    """FedAvg (Algorithm 3): R K noisy local steps of sensitivity ``2 B eta / n``.

    Parameters
    ----------
    B, n : float or ndarray
    eta : float
        Local step size.
    R, K : int
        Rounds and local steps per round.
    """
    return (ReleaseSpec(LOCAL_STEP, R * K, 2.0 * B * eta, n),)


def plan_fedhybrid(*, B, n, eta1, K1, K2) -> tuple:
    """FedHybrid (Algorithm 2): K1 local steps and K2 gradients, half of mu^2 each (all to a lone stage).

    Parameters
    ----------
    B, n : float or ndarray
    eta1 : float
        Stage-1 step size.
    K1, K2 : int
        Stage-1 local steps and stage-2 server steps.
    """
    half = Fraction(1, 2) if K1 > 0 and K2 > 0 else Fraction(1)
    return (ReleaseSpec(LOCAL_STEP, K1, 2.0 * B * eta1, n, half),
            ReleaseSpec(GRADIENT, K2, 2.0 * B, n, half))


def plan_fednewton(*, B, n1, n2, eta, K, tau1, hessian_bound=None, solve_tol=0.0) -> tuple:
    """FedNewton (Algorithm 4): K local steps on half 1, then one Newton release, half of mu^2 each.

    Paper (Lemma 3.8): the Newton release on ``8 B / (tau1 n_eff)``, ``n_eff = 2 n1``, uncertified.
    Certified (``hessian_bound = H_c``): ``max(2B/(tau1 n2), H_c B/(tau1^2 n1)) + 2 solve_tol B / tau1``
    (docs/methods.md §2, "Certified FedNewton" and "The certified solve").

    Parameters
    ----------
    B : float or ndarray
    n1, n2 : ndarray
        Half sizes (Hessian, gradient), broadcastable to (b, m).
    eta : float
        Stage-1 step size.
    K : int
        Stage-1 local steps.
    tau1 : float
        The eigenvalue floor / ridge.
    hessian_bound : float or None
        The per-sample Hessian clip (certified); None: the paper's calibration.
    solve_tol : float
        The Newton solve's relative residual bound (certified CG; 0: exact solves).
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
    """FedNewton-Iter (Algorithm 5): ``R K`` local steps and ``cycles`` head-only Newton releases, half of mu^2 each.

    The Newton release ``alpha (h + lambda I)^{-1} gbar`` (mean and mean outer product of the head
    gradients clipped to B) has sensitivity ``alpha B (2 + B^2/lambda) / (lambda n)`` for every
    input: ``||(h + lambda I)^{-1}|| <= 1/lambda``, ``||gbar|| <= B``, and a record moves gbar by
    ``2B/n`` and h by ``B^2/n``.

    Parameters
    ----------
    B, n : float or ndarray
    eta : float
        Local step size.
    R, K : int
        FedAvg rounds and local steps per round.
    cycles : int
    ridge, damping : float
        ``lambda`` and ``alpha``.
    """
    half = Fraction(1, 2)
    return (ReleaseSpec(LOCAL_STEP, R * K, 2.0 * B * eta, n, half),
            ReleaseSpec(NEWTON, cycles, damping * B / ridge * (2.0 + B * B / ridge), n, half))


#: The ledger's stage of FedIRLS's whitening release (`plan_fedirls`)
SECOND_MOMENTS = "second moments"
#: The ledger's stage of FedIRLS's count-scale release for counts (`plan_fedirls`)
COUNT_SCALE = "count scale"


def irls_shares(T: int, counts: bool = False) -> tuple[Fraction, list[Fraction], list[Fraction]]:
    """FedIRLS's public split of mu^2 (docs/methods.md §2, "FedIRLS"): 1/20 to the second
    moments; rounds 1..T-1's gradients 1/5 together and rounds 2..T-1's curvatures 1/5
    together, each in proportion to 1.5^t (later rounds, nearer the MLE, get more); the last
    round's gradient, whose noise is the estimate's, the rest (11/20 at T >= 3; for counts,
    whose count scale takes `count_share`, 1/2).

    Parameters
    ----------
    T : int
        Newton rounds (>= 2).
    counts : bool
        Whether the plan has the count-scale release (Poisson).

    Returns
    -------
    moments : Fraction
    gradients : list of Fraction, length T
    curvatures : list of Fraction, length T - 2 (rounds 2..T-1)
    """
    moments = Fraction(1, 20)
    early = [Fraction(3, 2) ** t for t in range(T - 1)]
    grads = [Fraction(1, 5) * w / sum(early) for w in early]
    later = [Fraction(3, 2) ** t for t in range(1, T - 1)]
    curvs = [Fraction(1, 5) * w / sum(later) for w in later] if later else []
    final = 1 - moments - sum(grads, Fraction(0)) - sum(curvs, Fraction(0)) - count_share(counts)
    return moments, grads + [final], curvs


def count_share(counts: bool) -> Fraction:
    """The count-scale release's share of mu^2: 1/20 for counts (taken from the last gradient's), else 0.

    Parameters
    ----------
    counts : bool
        Whether the plan has the count-scale release (Poisson).
    """
    return Fraction(1, 20) if counts else Fraction(0)


def plan_fedirls(*, B, n, T, moment_bound, hessian_bound, count_clip=None) -> tuple:
    """FedIRLS: for counts the count scale, then the second moments, T clipped gradients and
    T - 2 clipped curvatures per client (`irls_shares`), every sensitivity for all inputs.

    A mean of rows clipped to ``||x||^2 <= C`` moves by ``sqrt(2) C / n`` in Frobenius norm when
    one record is replaced (``||a a' - b b'||_F^2 <= ||a||^4 + ||b||^4`` for the two records'
    rank-one terms), and so does its upper triangle, the vector released; per-sample Hessians
    clipped to operator norm ``H_c`` (rank one for one output) likewise give ``sqrt(2) H_c / n``;
    a gradient clipped to B gives ``2 B / n``; the count scale, the means of ``min(y, c)`` and
    ``min(y, c)^2`` with y clipped to ``[0, c]``, moves by at most ``c / n`` and ``c^2 / n``:
    ``c sqrt(1 + c^2) / n`` together. For counts the gradient and curvature releases are divided
    by the released count scale (public), so B and ``H_c`` bound them in those units.

    Parameters
    ----------
    B, n : float or ndarray
        The gradient clip (on the whitened design, in count-scale units) and the client sizes,
        broadcastable to (b, m).
    T : int
        Newton rounds.
    moment_bound, hessian_bound : float
        ``C`` (on ``||x||^2`` of the raw design) and ``H_c`` (on the whitened design).
    count_clip : float or None
        ``c`` of the count-scale release (counts only); None: no such release.
    """
    counts = count_clip is not None
    mom, grads, curvs = irls_shares(T, counts)
    root2 = math.sqrt(2.0)
    plan = [ReleaseSpec(COUNT_SCALE, 1, count_clip * math.sqrt(1.0 + count_clip ** 2), n, count_share(True))] \
        if counts else []
    plan.append(ReleaseSpec(SECOND_MOMENTS, 1, root2 * moment_bound, n, mom))
    for t, share in enumerate(grads, start=1):
        plan.append(ReleaseSpec(f"{GRADIENT} (round {t})", 1, 2.0 * B, n, share))
        if 2 <= t <= T - 1:
            plan.append(ReleaseSpec(f"{CURVATURE} (round {t})", 1, root2 * hessian_bound, n, curvs[t - 2]))
    return tuple(plan)


def calibrate_with_clip(plan, *, mu: float, clip, n) -> Calibration:
    """`calibrate` for a method whose clipping bound came from rule ``clip``.

    A ``private_quantile`` histogram comes first in the ledger with its ``share`` of mu^2 (the plan
    shares the rest); a ``quantile`` bound is noted unaccounted; the gradient and local-step
    releases must pass `check_noise_resolves`.

    Parameters
    ----------
    plan : sequence of ReleaseSpec
        The method's releases.
    mu : float
        The target mu per client.
    clip : Fixed, Quantile or PrivateQuantile, or its dict form
        The clipping rule.
    n : ndarray
        Client sizes (the histogram's), broadcastable to (b, m).

    Returns
    -------
    Calibration
        The sds of ``plan`` only, and the ledger.
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
