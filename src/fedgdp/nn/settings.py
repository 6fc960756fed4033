"""Settings of one CNN run: defaults per dataset, validation (numpy only, no torch).

A *run* is one (figure, dataset, m, n, run index): the data are partitioned once
and every method trains on the same partition from the same initial weights.
The ``mnist`` and ``cifar10`` defaults are the paper's (section 5.2.2); the offline
``digits`` ones are scaled down to run in minutes (docs/methods.md §6, `DEFAULT_GRID`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from ..core import privacy
from ..core.privacy import RELEASES
from ..core.settings import Settings, choice, integer, name_list, number, setting, suggest
from ..methods import CNN, FedHybrid, Method, get_method, registry
from ..methods.settings import MethodSettings

__all__ = ["METHODS", "LABELS", "PRESETS", "cnn_preset", "cnn_settings", "ACCOUNTINGS", "REDUCTIONS", "NOISE_FOR",
           "SUMMED_STAGES", "CLIP_UNITS", "label",
           "release_plan", "reduced_plan", "smallest_batch", "CLIP_MIN", "CLIP_MAX", "FLOAT32_BOUND",
           "Z_MAX", "parameter_bound", "check_noise",
           "NNSettings", "COMMON", "DATASET_DEFAULTS", "DEFAULT_GRID", "PAPER_GRID", "resolve", "data_key"]

def _algorithm_number(name: str) -> float:
    """The paper's algorithm number of a method (``Algorithm 2`` -> 2; inf if none)."""
    words = registry(CNN)[name].algorithm.split()
    return float(words[1]) if len(words) > 1 and words[0] == "Algorithm" and words[1].isdigit() else float("inf")


#: how a run's noise is calibrated (docs/methods.md §6): ``printed`` for every release a
#: client could make (every round), ``schedule`` for the releases it will make under the
#: participation schedule drawn first
ACCOUNTINGS = ("printed", "schedule")

#: how a client's gradient release reduces its images' clipped gradients (docs/methods.md §6):
#: ``mean`` (the paper's reading: the gradient of the mean loss) or ``sum`` (the gradient of
#: the summed loss, ``n_i`` times the mean); the Newton release of FedNewton-Iter is a mean
#: either way (Algorithm 5's ``gbar`` and ``h``)
REDUCTIONS = ("mean", "sum")
#: the stages whose releases `reduced_plan` turns into sums under ``reduction: sum``
SUMMED_STAGES = (privacy.GRADIENT, privacy.LOCAL_STEP)

#: what a gradient release clips at B (docs/methods.md §6): ``sample``, each image's
#: gradient (the paper's Algorithms 1-4; sensitivity ``2 B / n_i``); ``client``, the
#: client's mean (or summed) gradient as one vector, as Algorithm 5 clips its Newton
#: release's gradient (sensitivity ``2 B`` whatever the client's size); or ``update``, the
#: client's model update after a round's local steps, taken without clipping or noise, as
#: one release per round (sensitivity ``2 B``; DP-FedAvg in the style of McMahan et al.,
#: each client adding its own noise; FedSGD's gradients, which have no local steps, are
#: clipped as under ``client``)
CLIP_UNITS = ("sample", "client", "update")
#: what a run's noise is calibrated for: its releases as made (``release``), or, under
#: ``reduction: sum``, the mean the sum would be (``mean``: the paper's likely reading; the
#: ledger then records the true mu, ``n_i`` times the target, docs/cnns.md)
NOISE_FOR = ("release", "mean")

#: the networks' initial weights (`fedgdp.nn.models.build_model`): ``default``, PyTorch's
#: (weights and biases uniform on +-1/sqrt(fan_in)); ``he``, Kaiming-uniform for ReLU
#: (weights on +-sqrt(6/fan_in), biases 0); ``xavier``, Glorot-uniform (weights on
#: +-sqrt(6/(fan_in + fan_out)), biases 0). With fan_in >= 9 in every layer, each starts
#: every parameter in [-1, 1], the starting magnitude `parameter_bound` assumes
INITS = ("default", "he", "xavier")

#: the CNN methods, the methods of the algorithm core that run on the CNN backend
#: (``fedgdp.methods.registry("nn")``), in the paper's order (by algorithm number:
#: FedSGD, FedHybrid, FedAvg, FedNewton-Iter), the legend order of Figures 9-10
METHODS = tuple(sorted(registry(CNN), key=_algorithm_number))
#: their legend labels (the core's label with "DP-"; "NP-" at mu = inf: `label`)
LABELS = {name: "DP-" + m.label for name, m in registry(CNN).items()}


def _fedhybrid_preset(p: NNSettings) -> dict:
    """FedHybrid: ``R1 = split(rounds, hybrid_local_share)`` rounds of ``local_epochs`` steps, then the rest."""
    R, K = p.rounds, p.local_epochs
    R1 = FedHybrid.split(R, p.hybrid_local_share)
    return {"R1": R1, "K1": K, "K2": (R - R1) * K, "eta1": p.lr, "eta2": p.lr}


#: Each CNN method's settings from a run's settings (`NNSettings`), compute-matched to
#: FedAvg's ``R K`` steps (docs/methods.md §6), in the resolved order: FedAvg ``R = rounds``
#: rounds of ``K = local_epochs`` local steps of size ``lr``; FedSGD the same number of server
#: steps; FedNewton-Iter FedAvg's rounds in ``newton_cycles`` cycles.
PRESETS = {
    "fedsgd": lambda p: {"K": p.rounds * p.local_epochs, "eta": p.lr},
    "fedavg": lambda p: {"R": p.rounds, "K": p.local_epochs, "eta": p.lr},
    "fedhybrid": _fedhybrid_preset,
    "fednewton_iter": lambda p: {"R": p.rounds, "K": p.local_epochs, "eta": p.lr,
                                 "cycles": p.newton_cycles, "ridge": p.ridge, "damping": p.damping},
}


def cnn_preset(meth: Method, p: NNSettings) -> dict:
    """A method's preset on a CNN run (`PRESETS`; NotImplementedError for a method without one).

    Parameters
    ----------
    meth : Method
        The method.
    p : NNSettings
        Resolved CNN run settings (`NNSettings`).
    """
    if meth.name not in PRESETS:
        raise NotImplementedError(f"method {meth.name} has no CNN preset")
    return PRESETS[meth.name](p)


def cnn_settings(meth: Method, p: NNSettings) -> MethodSettings:
    """A method's frozen settings on a CNN run: `cnn_preset`, checked (`fedgdp.methods.Method.resolve_settings`).

    Parameters
    ----------
    meth : Method
        The method.
    p : NNSettings
        Resolved CNN run settings (`NNSettings`).
    """
    return meth.settings(meth.resolve_settings(cnn_preset(meth, p), None))


def label(method: str, mu: float, release: str = "private") -> str:
    """The legend label of a CNN method: ``DP-``, ``NP-`` (mu = inf or ``plain``) or ``Clip-``.

    Parameters
    ----------
    method : str
        A CNN method (a name of `METHODS`).
    mu : float
        The privacy parameter (inf: non-private).
    release : str
        ``private``, ``clip_only`` or ``plain`` (`fedgdp.core.privacy.RELEASES`).
    """
    if mu == float("inf") or release == "plain":
        return LABELS[method].replace("DP-", "NP-", 1)
    return LABELS[method] if release == "private" else LABELS[method].replace("DP-", "Clip-", 1)


def release_plan(method: str, p: NNSettings, n) -> tuple:
    """The releases of CNN ``method`` under run settings ``p`` (its plan, `reduced_plan`).

    Parameters
    ----------
    method : str
        A CNN method (a name of `METHODS`).
    p : NNSettings
        Resolved run settings (`resolve`; ``clip`` and the method's settings are read).
    n : array_like of shape (m,)
        Training images per client.
    """
    meth = get_method(method, CNN)
    data = _PlanData(float(p.clip), np.asarray(n, float)[None, :])
    return reduced_plan(meth.plan(data, cnn_settings(meth, p)), p)


def reduced_plan(plan: tuple, p: NNSettings) -> tuple:
    """A method's plan as its releases are made under ``reduction``, ``local_batch`` and ``clip_unit``.

    A summed or client-clipped gradient or local-step release gets ``n = 1``; a pass of
    minibatches gets ``n = b_i`` (`smallest_batch`); under ``clip_unit: update`` the local
    steps of a round become one release of sensitivity ``2 B``. Why each is private:
    docs/methods.md §6 ("The loss's reduction", "A local epoch as a pass of minibatches",
    "The clipping unit").

    Parameters
    ----------
    plan : tuple of fedgdp.core.privacy.ReleaseSpec
        A CNN method's plan (arrays shaped (1, m)).
    p : NNSettings
        Run settings (``reduction``, ``local_batch``, ``clip_unit``, ``local_epochs``,
        ``clip``).
    """
    reduction, local_batch = p.reduction, p.local_batch
    clip_unit, K = p.clip_unit, int(p.local_epochs)
    out = []
    for spec in plan:
        if spec.stage == privacy.LOCAL_STEP and update_is_release(p):
            if spec.count % K:
                raise ValueError(f"clip_unit update: {spec.count} local steps are not whole rounds of "
                                 f"local_epochs={K}")
            spec = replace(spec, count=spec.count // K, scale=2.0 * float(p.clip),
                           n=np.ones_like(np.asarray(spec.n, float)))
        elif spec.stage in SUMMED_STAGES and (reduction == "sum" or clip_unit != "sample"):
            spec = replace(spec, n=np.ones_like(np.asarray(spec.n, float)))
        elif spec.stage == privacy.LOCAL_STEP and local_batch is not None:
            spec = replace(spec, n=smallest_batch(np.asarray(spec.n, float), local_batch))
        out.append(spec)
    return tuple(out)


def update_is_release(p: NNSettings) -> bool:
    """Whether a round's model update is one release (``clip_unit: update``).

    Parameters
    ----------
    p : NNSettings
        Run settings (``clip_unit``).
    """
    return p.clip_unit == "update"


def releases_per_round(p: NNSettings, stage: str) -> int:
    """Releases of ``stage`` a client makes in a round it is drawn in: one gradient or Newton release;
    ``local_epochs`` local steps, or one under ``clip_unit: update`` (`update_is_release`).

    Parameters
    ----------
    p : NNSettings
        Run settings (``local_epochs``, ``clip_unit``).
    stage : str
        ``gradient``, ``newton`` or ``local step``.
    """
    if stage != privacy.LOCAL_STEP or update_is_release(p):
        return 1
    return int(p.local_epochs)


def smallest_batch(n, batch: int):
    """The smallest of the ``ceil(n / batch)`` near-equal minibatches of ``n`` images: ``n // ceil(n / batch)``
    (``n`` itself when ``n <= batch``), float, the shape of ``n``.

    Parameters
    ----------
    n : array_like of int
        Images per client.
    batch : int
        The largest minibatch.
    """
    n = np.asarray(n, float)
    return np.floor(n / np.ceil(n / batch))


class _PlanData:
    """What a method's plan reads: the clipping bound and the client sizes (1, m)."""

    def __init__(self, B: float, n):
        self.plan_B, self.plan_n = B, n


#: per data set, the defaults that differ (below the overrides, above the common ones)
DATASET_DEFAULTS = {
    "mnist": {"lr": 0.01, "server_lr": 1.0, "clip": 1.0, "local_epochs": 10, "q": 0.1},
    "cifar10": {"lr": 0.005, "server_lr": 0.75, "clip": 0.75, "local_epochs": 30, "q": 0.1},
    "digits": {"lr": 0.3, "server_lr": 1.0, "clip": 1.0, "local_epochs": 10, "q": 0.5},
}


def _methods(key, value) -> list:
    names = name_list(key, value)
    bad = [s for s in names if s not in METHODS]
    if bad or not names:
        raise ValueError(f"unknown method(s) {bad or names}; known: {', '.join(METHODS)}")
    return names


def _n(key, value):
    return None if value in ("full", "None", "none") else value


def _batch(key, value):
    """``local_batch``: None (or full / none) for one full-batch step, else an integer >= 1."""
    value = _n(key, value)
    return None if value is None else integer(1, strict=False)(key, value)


_POSITIVE = number(0, finite=True)

#: The clipping bounds accepted (docs/methods-cnns.md, "Floors, the clip margin and the audit"). ``CLIP_MIN`` is the
#: floor of every path, `fedgdp.core.privacy.CLIP_MIN` (below it a square that underflows
#: float32 could matter to the clip margin, `fedgdp.nn.clipping.clip_margin`); ``CLIP_MAX``
#: narrows the core's 1e100 for float32 networks: above it FedNewton-Iter's ``B^3``
#: sensitivity could leave float64. `parameter_bound` then bounds what float32 training reaches.
CLIP_MIN, CLIP_MAX = privacy.CLIP_MIN, 1e30
#: The largest magnitude a network parameter may reach under the worst case of
#: `parameter_bound` (float32's maximum is 3.4e38: the rest is headroom for rounding).
FLOAT32_BOUND = 1e30
#: ``|Z|`` of one standard normal drawn by torch is below this: torch draws normals by the
#: Box-Muller transform, ``sqrt(-2 ln u) |cos(2 pi v)|`` with a uniform ``u`` no smaller than the
#: least positive double (4.9e-324), at most ``sqrt(2 * 744.4) = 38.6``.
Z_MAX = 40.0


def parameter_bound(method: str, p: NNSettings, *, z: float = Z_MAX) -> float:
    """A bound on every parameter a private network of ``method`` reaches, whatever the data and noise.

    A port of the GLM paths' step bound (`fedgdp.methods.Method.check_step_bound`: the sum over
    stages of the core's rule `fedgdp.core.privacy.iterate_bound`) to the CNN's releases: each
    release at client size 1 (sensitivity ``Delta``, noise sd ``sigma``) moves a parameter by at
    most ``f (Delta / 2 + sigma z)``, with ``f`` the server step it goes through, times the steps
    and images it adds up (`reduced_plan`), plus 1 for the start (every `INITS` starts in
    [-1, 1]). What differs from the GLM rule: ``z = Z_MAX`` (torch's normals, by Box-Muller,
    reach 38.6; the rule's `fedgdp.core.privacy.NOISE_BOUND` = 14 bounds numpy's ziggurat);
    ``Delta / 2`` in place of ``eta B`` (a local step's sensitivity carries its ``eta``); the
    server step ``f``; the summed and minibatch steps. At ``z = NOISE_BOUND``, server_lr 1, mean
    reduction and full-batch steps it is ``1 +`` the GLM rule for FedSGD, FedAvg and FedHybrid
    (tests/nn/test_nn_parameter_bound.py). The unclipped local steps under ``clip_unit: update``
    are not bounded (docs/cnns.md, "Floors, the clip margin and the audit").

    Parameters
    ----------
    method : str
        A CNN method (a name of `METHODS`).
    p : NNSettings
        Checked run settings (``mu`` finite; ``clip``, ``lr``, ``server_lr`` and the method's settings).
    z : float, default=Z_MAX
        A bound on every standard normal of the noise (the settings' check uses `Z_MAX`).
    """
    plan = release_plan(method, p, np.ones(1))
    cal = privacy.calibrate(plan, mu=float(p.mu))
    f = {privacy.LOCAL_STEP: max(1.0, p.server_lr), privacy.GRADIENT: p.server_lr * p.lr, privacy.NEWTON: 1.0}
    with np.errstate(over="ignore"):
        moves = [privacy.iterate_bound(spec.count, f[spec.stage] * _steps_and_size(spec.stage, p),
                                       float(np.max(spec.sensitivity)) / 2, float(np.max(sd)), on_gradient=True,
                                       z=z) for spec, sd in zip(plan, cal.sigmas)]
    return 1.0 + float(sum(moves))


def check_noise(p: NNSettings, n, dtype) -> None:
    """Refuse, before any image is read, a private run whose noise the float grid could absorb.

    `fedgdp.core.privacy.check_noise_resolves` for every method of ``p`` under the printed
    calibration (docs/methods.md §2, "Noise before rounding").

    Parameters
    ----------
    p : NNSettings
        Checked run settings.
    n : array_like of shape (m,)
        Training images per client (public: the partition is drawn from public seeds).
    dtype : torch.dtype
        The network's precision.
    """
    if p.release != "private" or not math.isfinite(p.mu):
        return
    for method in p.methods:
        plan = release_plan(method, p, n)
        noise_plan = release_plan(method, p.replace(reduction="mean"), n) if p.noise_for == "mean" else plan
        privacy.check_noise_resolves(plan, privacy.calibrate(noise_plan, mu=float(p.mu)).sigmas,
                                     np.asarray(n, float)[None, :], dtype)


#: more images than any client of a data set can hold (the whole data set), for `parameter_bound`
DATASET_IMAGES = {"digits": 1797, "mnist": 70000, "cifar10": 60000}


def _steps_and_size(stage: str, p: NNSettings) -> float:
    """How many client-size-1 steps a release of ``stage`` can add up (steps of a pass x images summed)."""
    if stage not in SUMMED_STAGES or (stage == privacy.LOCAL_STEP and update_is_release(p)):
        return 1.0                                   # (a clipped model update: within B whatever the steps)
    n = p.n if p.n is not None else math.ceil(DATASET_IMAGES.get(p.dataset, 10**6) / p.m)
    batch = p.local_batch if stage == privacy.LOCAL_STEP else None
    steps = math.ceil(n / batch) if batch else 1
    summed = p.reduction == "sum" and p.clip_unit == "sample"
    size = min(batch or n, n) if summed else 1     # a client-clipped release is within B whatever it adds up
    return float(steps * size)


@dataclass(frozen=True)
class NNSettings(Settings):
    """The settings of one CNN run (docs/methods.md §6 unless noted); `resolve`.

    The defaults of ``lr``, ``server_lr``, ``clip``, ``local_epochs`` and ``q`` depend on
    the data set (`DATASET_DEFAULTS`).
    """

    WHAT: ClassVar[str] = "nn setting"

    figure: str = setting("fig09", "fig09 (n per client, m fixed) | fig10 (full split over m clients)",
                          parse=choice("fig09", "fig10"), flag=str)
    dataset: str = setting("digits", " | ".join(DATASET_DEFAULTS), parse=choice(*DATASET_DEFAULTS), flag=str)
    m: int = setting(10, "number of clients", parse=integer(1, strict=False), flag=int)
    n: int | None = setting(None, "images per client (fig09), or full (fig10)", parse=_n, flag=str)
    run: int = setting(0, "run index (seeds the partition, init, sampling and noise)",
                       parse=integer(0, strict=False), flag=int)
    base_seed: int = setting(2026, "base seed", parse=integer(0, strict=False), flag=int)
    methods: list = setting(help="comma-separated: " + ",".join(METHODS), parse=_methods, flag=str,
                            factory=lambda: list(METHODS))
    mu: float = setting(2.0, f"privacy parameter mu in [{privacy.MU_FLOOR:g}, {privacy.MU_MAX:g}], or inf",
                        parse=lambda k, v: privacy.parse_mu(v, k), flag=float)
    release: str = setting("private", "private (clipped at B, noisy) | clip_only (clipped at B, no noise: not "
                           "private) | plain (neither; as mu = inf)", parse=choice(*RELEASES), flag=str)
    reduction: str = setting("mean", "a client's gradient release: the mean of its clipped per-sample gradients "
                             "(mean, the paper's reading) | their sum (sum: n_i times the step and its noise)",
                             parse=choice(*REDUCTIONS), flag=str)
    clip_unit: str = setting("sample", "what a gradient release clips at B: each image's gradient (sample, the "
                             "paper's Algorithms 1-4) | the client's mean gradient as one vector (client, as "
                             "Algorithm 5's Newton release; sensitivity 2B) | the client's model update after a "
                             "round's unclipped local steps, one noisy release per round (update; sensitivity 2B)",
                             parse=choice(*CLIP_UNITS), flag=str)
    noise_for: str = setting("release", "what the noise is calibrated for: the releases as made (release) | under "
                             "reduction sum, the mean (mean: the paper's likely reading; not private at mu: the "
                             "ledger's mu is n_i mu, about n_i mu / sqrt(2) for FedNewton-Iter, whose Newton release "
                             "stays a mean)", parse=choice(*NOISE_FOR), flag=str)
    accounting: str = setting("printed", "noise for every round a client could be drawn (printed) | for the rounds "
                              "it is drawn in a schedule drawn first (schedule; each drawn client spends mu)",
                              parse=choice(*ACCOUNTINGS), flag=str)
    init: str = setting("default", "initial weights: PyTorch's default (default) | Kaiming-uniform for ReLU with "
                        "zero biases (he) | Glorot-uniform with zero biases (xavier); seeded by run",
                        parse=choice(*INITS), flag=str)
    q: float = setting(0.1, "fraction of clients drawn per round, in (0, 1]", parse=privacy.parse_fraction,
                       flag=float)
    rounds: int = setting(10, "base global rounds R", parse=integer(1, strict=False), flag=int)
    local_epochs: int = setting(10, "full-batch local steps per round K", parse=integer(1, strict=False), flag=int)
    local_batch: int | None = setting(None, "images per local minibatch: a local epoch is one pass of minibatches, "
                                      "each a noisy step (none: one full-batch step, the paper's text)",
                                      parse=_batch, flag=str)
    lr: float = setting(0.01, "local learning rate", parse=_POSITIVE, flag=float)
    server_lr: float = setting(1.0, "server learning rate", parse=_POSITIVE, flag=float)
    clip: float = setting(1.0, f"per-sample clipping bound B in [{CLIP_MIN:g}, {CLIP_MAX:g}]",
                          parse=number(CLIP_MIN, CLIP_MAX, closed="both"), flag=float)
    val_frac: float = setting(0.1, "per-client validation share (held out, unused by training)",
                              parse=number(0, 0.5, closed="low"), flag=float)
    test_frac: float = setting(0.1, "per-client local test share", parse=number(0, 0.5, closed="low"), flag=float)
    hybrid_local_share: float = setting(FedHybrid.SHARE1,
                                        "FedHybrid: share of compute as FedAvg rounds (not in the paper)",
                                        parse=number(0, 1, closed="both"), flag=float)
    newton_cycles: int = setting(2, "FedNewton-Iter cycles of (R / cycles FedAvg rounds + 1 Newton round)",
                                 parse=integer(1, strict=False), flag=int)
    ridge: float = setting(1.0, "FedNewton-Iter ridge lambda (Algorithm 5; not in the paper)", parse=_POSITIVE,
                           flag=float)
    damping: float = setting(1.0, "FedNewton-Iter damping alpha (Algorithm 5; not in the paper)",
                             parse=number(0, 10, closed="high"), flag=float)

    @classmethod
    def preset(cls, mapping: dict) -> dict:
        """The defaults of ``mapping["dataset"]`` (`DATASET_DEFAULTS`; ``digits``; ValueError if unknown)."""
        dataset = mapping.get("dataset", "digits")
        if dataset not in DATASET_DEFAULTS:
            raise ValueError(f"unknown dataset {dataset!r}{suggest(dataset, DATASET_DEFAULTS)}; "
                             f"known: {', '.join(DATASET_DEFAULTS)}")
        return DATASET_DEFAULTS[dataset]

    @classmethod
    def finish(cls, values: dict) -> dict:
        """``n`` per figure, then the cross-field checks of `check` (ValueError)."""
        s = cls(**values)
        s = s.replace(n=s._figure_n())
        s.check()
        return {**values, "n": s.n}

    def _figure_n(self) -> int | None:
        """``n`` checked against the figure: an integer >= 3 for ``fig09``, None for ``fig10`` (ValueError)."""
        if self.figure == "fig09":
            if self.n is None:
                raise ValueError("fig09 needs n (images per client), got n=None")
            return integer(3, strict=False)("n", self.n)
        if self.n is not None:
            raise ValueError(f"fig10 splits the full training set: n must be full/None, got n={self.n!r}")
        return None

    def check(self) -> None:
        """Cross-field checks: ``noise_for``, the methods' settings, `parameter_bound` (ValueError)."""
        summed = (self.reduction, self.clip_unit, self.accounting) == ("sum", "sample", "printed")
        if self.noise_for == "mean" and not summed:
            raise ValueError(f"noise_for=mean calibrates a summed release's noise for the mean: it needs "
                             f"reduction=sum, clip_unit=sample, accounting=printed, got reduction={self.reduction}, "
                             f"clip_unit={self.clip_unit}, accounting={self.accounting}")
        for name in self.methods:            # each method's CNN settings resolve (and are checked)
            cnn_settings(get_method(name, CNN), self)
        if math.isfinite(self.mu):
            for name in self.methods:
                bound = parameter_bound(name, self)
                if not bound <= FLOAT32_BOUND:
                    raise ValueError(
                        f"nn settings clip={self.clip:g}, lr={self.lr:g}, server_lr={self.server_lr:g}, "
                        f"mu={self.mu:g}, ridge={self.ridge:g}, damping={self.damping:g}, rounds={self.rounds}, "
                        f"local_epochs={self.local_epochs}: {name} could move a float32 parameter to {bound:.3g}, "
                        f"above {FLOAT32_BOUND:g} (lower clip or lr, or raise mu or ridge)")


#: settings shared by every dataset, as a plain dict
COMMON: dict = NNSettings.defaults()

#: the default (offline) grid of Figures 9 and 10
DEFAULT_GRID = {
    "datasets": ["digits"],
    "fig09": {"m": 10, "n": [30, 60, 100, 140], "runs": 3},
    "fig10": {"m": [5, 10, 20, 40], "runs": 3},
}

#: the paper's grid (docs/methods.md §6)
PAPER_GRID = {
    "datasets": ["mnist", "cifar10"],
    "fig09": {"m": 100, "n": {"mnist": [50, 75, 100, 200, 300, 400, 600],
                              "cifar10": [50, 75, 100, 200, 300, 400, 500]}, "runs": 5},
    "fig10": {"m": [100, 200, 300, 500, 800, 1000], "runs": 4},
}


def resolve(overrides: dict | None = None) -> NNSettings:
    """The frozen settings of one CNN run (`NNSettings`): defaults, the dataset's, then ``overrides``.

    Parameters
    ----------
    overrides : dict or None
        Settings that override the defaults (ValueError naming a bad key or value).
    """
    return NNSettings.build(overrides)


def data_key(p: NNSettings) -> dict:
    """The settings that define a run's partition and initial weights (``dataset``, ``m``, ``n``, fractions).

    Parameters
    ----------
    p : NNSettings
        Resolved run settings.
    """
    return {"dataset": p.dataset, "m": p.m, "n": p.n, "val_frac": p.val_frac,
            "test_frac": p.test_frac}
