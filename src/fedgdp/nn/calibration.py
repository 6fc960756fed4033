"""Schedules and noise calibration of the four CNN methods (numpy only, no torch).

Methods
-------
Settings: ``R`` base rounds, ``K`` local epochs (full-batch local steps) per round,
local learning rate ``eta``, clipping bound ``B``, privacy ``mu``.

``fedavg``          DP-FedAvg (Algorithm 3): ``R`` rounds; every sampled client
                    runs ``K`` noisy clipped gradient steps from the global model and
                    sends its model; the server moves by ``server_lr`` times the
                    weighted mean update.
``fedsgd``          compute-matched DP-FedSGD (Algorithm 1): ``R K`` rounds; every
                    sampled client sends one noisy clipped average gradient; the
                    server steps by ``server_lr * eta``. A client sampled in a round
                    computes one full-batch gradient, so the expected number of
                    gradient evaluations per client equals DP-FedAvg's.
``fedhybrid``       compute-matched DP-FedHybrid (Algorithm 2): ``R1 =
                    round(hybrid_local_share * R)`` DP-FedAvg rounds, then ``K2 = (R -
                    R1) K`` DP-FedSGD rounds (default share 0.6, docs/methods.md §3: K1 = 30 of 50).
``fednewton_iter``  DP-FedNewton-Iter (Algorithm 5, paper section 3.7): ``C`` cycles
                    (default 2), each ``R / C`` DP-FedAvg rounds followed by one
                    round of head-only Newton refinement.

What is released, sensitivity, sigma
------------------------------------
Every release is a Gaussian mechanism on a quantity whose L2 sensitivity (one of
the client's ``n`` training images replaced) is bounded through per-sample
clipping ``clip_B(g) = g min(1, B/||g||)``:

=============  ==========================================  ==============================
release        what the client sends (per release)         sensitivity
=============  ==========================================  ==============================
local step     the step ``-eta * mean_j clip_B(g_j)``;      ``2 B eta / n``
               noise is added to the parameters after
               every local step, so the model sent after
               K steps is a post-processing of K releases
gradient       ``mean_j clip_B(g_j)``                       ``2 B / n``
newton         the head step ``alpha (h + lambda I)^{-1}    ``(alpha B / (lambda n))
               gbar`` with ``gbar = mean_j c_j``,            (2 + B^2 / lambda)``
               ``h = mean_j c_j c_j'`` and ``c_j =
               clip_B(per-sample head gradient)``
=============  ==========================================  ==============================

Newton sensitivity: with ``A = h + lambda I`` and the neighbour's ``A'``, ``gbar'``,
``A'^{-1} gbar' - A^{-1} gbar = A'^{-1}(gbar' - gbar) + A'^{-1}(h - h') A^{-1} gbar``.
``||A^{-1}|| <= 1/lambda`` (``h`` is positive semi-definite), ``||gbar' - gbar|| <=
2B/n``, ``||gbar|| <= B`` and ``h - h'`` is ``(c c' - c* c*')/n``, a difference of two
PSD matrices of norm at most ``B^2``, so ``||h - h'|| <= B^2 / n``. Hence the bound
``alpha (2B/(lambda n) + B^3/(lambda^2 n))``. The paper's Algorithm 5 prints
Algorithm 4's calibration (with ``tau1``); here ``lambda`` plays ``tau1``'s part
(it bounds the inverse) and the Fisher term is accounted for explicitly instead of
by Algorithm 4's factor-two allowance. Clipping the per-sample head gradients also
makes Algorithm 5's clip of the average gradient a no-op (``||gbar|| <= B``).

Budget: the releases of a method fall into kinds (local step, gradient, newton);
with ``k`` kinds present, each kind gets ``mu^2 / k`` of the squared budget, spread
evenly over its ``T`` releases: one release is ``mu / sqrt(k T)``-GDP, so
``sigma = sensitivity * sqrt(k T) / mu`` (computed by the package's one calibration
core, :func:`fedgdp.privacy.calibrate`, from the plan of :func:`release_plan`). This gives Algorithm 3's
``2 B eta sqrt(R K) / (mu n)``, Algorithm 2's ``sqrt(2 K1)`` and ``sqrt(2 K2)``
halves, and Algorithm 5's ``2 B eta sqrt(2 R K) / (mu n)`` for its FedAvg stage.

Client sampling: a fraction ``q`` of the clients is drawn each round. The
calibration does not use amplification by subsampling: ``T`` counts every round
of the method, as if the client were drawn in all of them (the paper's Algorithm 5
scales its noise with the full ``R``). Each client's ledger therefore composes to
exactly ``mu`` (the worst case over sampling schedules); the ``mu`` a client
actually spends, given how often it was drawn, is reported beside it and is at
most ``mu``. ``mu = inf`` means no clipping and no noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from fractions import Fraction

from ..privacy import Ledger, ReleaseSpec
from ..privacy import calibrate as calibrate_plan

__all__ = ["Phase", "NNMethod", "REGISTRY", "schedule", "Calibration", "calibrate", "release_plan", "METHODS",
           "LABELS", "SENSITIVITY_KINDS"]

#: phase kind -> ledger stage name
SENSITIVITY_KINDS = {"avg": "local step", "sgd": "gradient", "newton": "newton"}


@dataclass(frozen=True)
class Phase:
    """A run of identical communication rounds.

    Attributes
    ----------
    kind : {"avg", "sgd", "newton"}
        ``avg``: each sampled client runs ``steps`` noisy local steps and sends its
        model; ``sgd``: one noisy gradient; ``newton``: one noisy head-only Newton step.
    rounds : int
    steps : int
        Releases per client per round (``K`` for ``avg``, 1 otherwise).
    """

    kind: str
    rounds: int
    steps: int


def _fedavg(p: dict) -> list[Phase]:
    return [Phase("avg", int(p["rounds"]), int(p["local_epochs"]))]


def _fedsgd(p: dict) -> list[Phase]:
    return [Phase("sgd", int(p["rounds"]) * int(p["local_epochs"]), 1)]


def _fedhybrid(p: dict) -> list[Phase]:
    R, K = int(p["rounds"]), int(p["local_epochs"])
    r1 = int(round(p["hybrid_local_share"] * R))
    phases = [Phase("avg", r1, K), Phase("sgd", (R - r1) * K, 1)]
    return [ph for ph in phases if ph.rounds > 0]


def _fednewton_iter(p: dict) -> list[Phase]:
    R, K, C = int(p["rounds"]), int(p["local_epochs"]), int(p["newton_cycles"])
    if R % C:
        raise ValueError(f"rounds must be a multiple of newton_cycles, got rounds={R}, newton_cycles={C}")
    return [Phase("avg", R // C, K), Phase("newton", 1, 1)] * C


@dataclass(frozen=True)
class NNMethod:
    """A CNN method: its name, legend label and schedule of phases.

    ``phases(p)`` gives the method's rounds under settings ``p`` (keys ``rounds``,
    ``local_epochs``, ``hybrid_local_share``, ``newton_cycles``); the training loop
    (:func:`fedgdp.nn.train.train`) runs each phase by its kind, and the calibration
    (:func:`calibrate`) counts its releases. Adding a CNN method built from these
    phase kinds is one entry of :data:`REGISTRY`.
    """

    name: str
    label: str
    phases: Callable[[dict], list[Phase]]


#: the CNN methods in legend order (module docstring)
REGISTRY: dict[str, NNMethod] = {m.name: m for m in (
    NNMethod("fedsgd", "DP-FedSGD", _fedsgd),
    NNMethod("fedhybrid", "DP-FedHybrid", _fedhybrid),
    NNMethod("fedavg", "DP-FedAvg", _fedavg),
    NNMethod("fednewton_iter", "DP-FedNewton-Iter", _fednewton_iter),
)}
METHODS = tuple(REGISTRY)
LABELS = {name: m.label for name, m in REGISTRY.items()}


def schedule(method: str, p: dict) -> list[Phase]:
    """The phases of ``method`` (a :data:`REGISTRY` name) under settings ``p``."""
    try:
        entry = REGISTRY[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}") from None
    return entry.phases(p)


@dataclass(frozen=True)
class Calibration:
    """Noise of one method for every client.

    Attributes
    ----------
    sensitivity, sigma : dict kind -> ndarray, shape (m,)
        Per release kind (``avg`` is per local step, on the parameters).
    releases : dict kind -> int
        Releases per client that the calibration allows for (all rounds).
    ledger : fedgdp.privacy.Ledger
        Arrays shaped ``(1, m)`` (one run, m clients).
    """

    sensitivity: dict
    sigma: dict
    releases: dict
    ledger: Ledger

    def mu_spent(self, counts: dict) -> np.ndarray:
        """Composed mu of the releases actually made, ``counts``: kind -> (m,) ints."""
        total = np.zeros_like(next(iter(self.sigma.values())))
        for kind, c in counts.items():
            with np.errstate(divide="ignore", invalid="ignore"):
                mu_j = np.where(self.sigma[kind] == 0, np.inf, self.sensitivity[kind] / self.sigma[kind])
            c = np.asarray(c)
            total = total + np.where(c > 0, np.where(c > 0, c, 1) * mu_j ** 2, 0.0)
        return np.sqrt(total)


def calibrate(method: str, p: dict, n: np.ndarray) -> Calibration:
    """Sensitivities, noise sds and ledger of ``method`` for clients of training sizes ``n``.

    Parameters
    ----------
    method : str
    p : dict
        Settings: ``mu``, ``clip`` (B), ``lr`` (eta), ``ridge`` (lambda), ``damping``
        (alpha) and the schedule keys of :func:`schedule`.
    n : ndarray, shape (m,)
        Training images per client.
    """
    n = np.asarray(n, dtype=float)
    if np.any(n < 1):
        raise ValueError(f"every client needs at least one training image, got min n={n.min()}")
    phases = schedule(method, p)
    releases: dict[str, int] = {}
    for ph in phases:
        releases[ph.kind] = releases.get(ph.kind, 0) + ph.rounds * ph.steps
    mu = float(p["mu"])
    plan = release_plan(p, n, releases)
    cal = calibrate_plan(plan, mu=mu)
    private = math.isfinite(mu)
    sens = {kind: (spec.sensitivity[0] if private else np.full_like(n, np.inf))
            for kind, spec in zip(releases, plan)}
    sig = {kind: np.asarray(s)[0] for kind, s in zip(releases, cal.sigmas)}
    return Calibration(sens, sig, releases, cal.ledger)


def release_plan(p: dict, n: np.ndarray, releases: dict) -> tuple:
    """The releases of a CNN method as a plan of :class:`fedgdp.privacy.ReleaseSpec`
    (one spec per kind, each kind ``1/k`` of mu^2; the sensitivities of the table in
    the module docstring), arrays shaped (1, m)."""
    B, eta = float(p["clip"]), float(p["lr"])
    lam, alpha = float(p["ridge"]), float(p["damping"])
    scale = {"avg": 2 * B * eta, "sgd": 2 * B, "newton": alpha * B / lam * (2 + B * B / lam)}
    share = Fraction(1, len(releases))
    return tuple(ReleaseSpec(SENSITIVITY_KINDS[kind], T, scale[kind], n[None, :], share)
                 for kind, T in releases.items())
