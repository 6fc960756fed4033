"""The CNN backend of the algorithm core: a network's parameters, client sampling, torch.

`TorchBackend` implements `fedgdp.methods.Backend` for the methods that
train the CNNs (``registry("nn")``: FedSGD, FedAvg, FedHybrid and FedNewton-Iter), so
the CNNs run the same ``Method.run`` as the simulations and the real-data study. What
it adds (client sampling, ``server_lr``, the order of the noise draws, no amplification
by subsampling) is docs/methods.md §6, "The methods on the core"; what a client spent,
given how often it was drawn, is `TorchBackend.counts` through
`fedgdp.core.privacy.Ledger.spent_mu`.

Nothing here synchronises the host with the device inside a round: the clients are
drawn by numpy, the noise sds are numpy arrays decided before the round, and the
clipped counts stay on the device until `finish`.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..core import privacy
from ..methods import CNN, Fit
from .clipping import clip_factors, clip_margin, clipped_grad_sums, floats_per_image, head_grads
from .models import HEAD
from .settings import NNSettings, reduced_plan, update_is_release

__all__ = ["TorchBackend", "ScheduleDraw", "TorchNoise", "Locals", "TrainInfo", "sample_clients", "head_vector",
           "noise_for_mean",
           "set_head_vector", "newton_direction", "head_newton_step"]

#: numbers of working memory of one stacked clipped-gradient call
#: (`fedgdp.nn.clipping.floats_per_image` times the padded images); a round's
#: clients are split into stacks below it (1 GiB in float32)
MAX_STACK = 1 << 28
#: on a CPU, stack a round's clients only when a client's stack is at most this large:
#: small networks, where per-call overhead dominates (the grouped convolution of many
#: clients is slower than one client at a time for the MNIST network on a CPU)
CPU_STACK = 1 << 22


def minibatches(rng: np.random.Generator, n: int, batch: int) -> list[np.ndarray]:
    """One pass over a client's ``n`` images in minibatches: a permutation of ``range(n)`` cut
    into ``ceil(n / batch)`` near-equal index arrays (each of ``n // parts`` or one more).

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the permutation (a stream that never sees the data).
    n : int
        The client's images.
    batch : int
        The largest minibatch.
    """
    return np.array_split(rng.permutation(n), math.ceil(n / batch))


def sample_clients(rng: np.random.Generator, m: int, q: float) -> np.ndarray:
    """``max(1, min(m, round(q m)))`` distinct clients, sorted, drawn uniformly without replacement
    (``round`` is Python's, half to even: q m = 2.5 draws 2).

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the clients.
    m : int
        Number of clients.
    q : float
        Fraction of the clients drawn.
    """
    k = max(1, min(m, int(round(q * m))))
    return np.sort(rng.choice(m, size=k, replace=False))


class TorchNoise:
    """Standard normals from a ``torch.Generator`` (None-like when non-private):
    ``take`` returns this stream, `draw` one tensor."""

    def __init__(self, gen: torch.Generator | None):
        self.gen = gen

    def take(self, name: str, *index):
        """This stream, or None when non-private.

        Parameters
        ----------
        name, *index : str, int
            The draw's name and indices (unused: the stream draws in the computation's order).
        """
        return None if self.gen is None else self

    def draw(self, like: torch.Tensor) -> torch.Tensor:
        """Standard normals of ``like``'s shape, dtype and device.

        Parameters
        ----------
        like : torch.Tensor
            The tensor whose shape, dtype and device the draw takes.
        """
        return torch.randn(like.shape, generator=self.gen, device=like.device, dtype=like.dtype)


@dataclass
class TrainInfo:
    """What one method did (all clients, all rounds).

    Attributes
    ----------
    rounds : int
    grad_evals : int
        Per-sample gradient evaluations.
    clipped : int
        Per-sample gradients that were clipped.
    floats_up, floats_down : int
        Numbers sent by the drawn clients to the server, and back.
    """

    rounds: int = 0
    grad_evals: int = 0
    clipped: int = 0
    floats_up: int = 0
    floats_down: int = 0


@dataclass
class Locals:
    """The drawn clients' local results of one round: ``params`` ``name -> (S, *shape)``
    (a FedAvg round) or ``head`` ``(S, D)`` (a Newton round), from global ``start``."""

    clients: np.ndarray
    start: dict
    params: dict | None = None
    head: torch.Tensor | None = None
    step: torch.Tensor | None = None     # a Newton round's ``head - start head`` (S, D), noised first


def noise_for_mean(plan: tuple, mean_plan: tuple, mu: float) -> privacy.Calibration:
    """``noise_for: mean``: the noise sds of ``mean_plan`` (the summed releases' noise
    calibrated as if they were means), with the ledger of ``plan`` (their true
    sensitivities), which then composes to the mu really spent: ``n_i mu`` where every
    release is summed, ``sqrt((n_i^2 + 1) / 2) mu`` for FedNewton-Iter, whose Newton release
    (half its ``mu^2``) is a mean either way.

    Parameters
    ----------
    plan, mean_plan : tuple of fedgdp.core.privacy.ReleaseSpec
        The plan as released (``reduction: sum``) and as calibrated (``mean``).
    mu : float
        The target mu.
    """
    sigmas = privacy.calibrate(mean_plan, mu=mu).sigmas
    ledger = privacy.Ledger()
    if math.isfinite(mu):
        for spec, sd in zip(plan, sigmas):
            if spec.count > 0:
                ledger.add(spec.stage, spec.count, spec.sensitivity, sd, certified=spec.certified,
                           assumption=spec.assumption)
    return privacy.Calibration(sigmas, ledger)


# ----------------------------------------------------------------- Newton head
def head_vector(params: dict) -> torch.Tensor:
    """The head's parameters as one vector ``[weight.flatten(), bias]``, shape (D,),
    ``D = classes (hidden + 1)``, in the head's dtype.

    Parameters
    ----------
    params : dict name -> Tensor
        A ConvNet's parameters (``head.weight`` (classes, hidden), ``head.bias`` (classes,)).
    """
    return torch.cat([params[f"{HEAD}.weight"].flatten(), params[f"{HEAD}.bias"]])


def set_head_vector(params: dict, vec: torch.Tensor) -> dict:
    """A copy of ``params`` with the head replaced by ``vec`` (layout of `head_vector`);
    the other entries are ``params``' own tensors.

    Parameters
    ----------
    params : dict name -> Tensor
        A ConvNet's parameters (not modified).
    vec : torch.Tensor of shape (D,)
        The new head, ``[weight.flatten(), bias]``; cast to the head's dtype.
    """
    w = params[f"{HEAD}.weight"]
    out = dict(params)
    out[f"{HEAD}.weight"] = vec[:w.numel()].reshape(w.shape).to(w.dtype)
    out[f"{HEAD}.bias"] = vec[w.numel():].to(w.dtype)
    return out


def newton_direction(G: torch.Tensor, lam: float) -> torch.Tensor:
    """``(h + lam I)^{-1} gbar`` with ``h = G'G/n``, ``gbar = G'1/n``, in float64.

    ``G`` is ``(n, D)``. When ``n < D`` the Woodbury identity
    ``(lam I + G'G/n)^{-1} = (I - G'(n lam I + G G')^{-1} G) / lam`` solves an
    ``n x n`` system instead of the ``D x D`` one.

    Parameters
    ----------
    G : torch.Tensor of shape (n, D)
        Per-sample (clipped) head gradients.
    lam : float
        Ridge ``lambda > 0``.
    """
    G = G.to(torch.float64)
    n, D = G.shape
    gbar = G.mean(0)
    if n < D:
        inner = G @ G.T
        inner.diagonal().add_(n * lam)
        return (gbar - G.T @ torch.linalg.solve(inner, G @ gbar)) / lam
    h = G.T @ G / n
    h.diagonal().add_(lam)
    return torch.linalg.solve(h, gbar)


def head_newton_step(params: dict, x: torch.Tensor, y: torch.Tensor, *, B: float, lam: float,
                     alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm 5's local step on the head, ``alpha (h + lam I)^{-1} gbar`` (D,) in float64 (no noise), and the
    number of images whose head gradient was clipped (or zeroed, non-finite), an int64 tensor.

    The per-sample head gradients (`fedgdp.nn.clipping.head_grads`) are clipped at
    ``B`` in float64 (`fedgdp.nn.clipping`'s rule and margin) before the empirical
    Fisher ``h`` and the mean ``gbar`` are formed.

    Parameters
    ----------
    params : dict name -> Tensor
        The ConvNet's parameters (the body is held fixed).
    x : torch.Tensor of shape (n, C, H, W)
        The client's images.
    y : torch.Tensor of shape (n,)
        Its labels (int64).
    B : float
        Clipping bound of the per-sample head gradients (inf: no clipping).
    lam : float
        Ridge ``lambda``.
    alpha : float
        Damping ``alpha``.
    """
    G = head_grads(params, x, y).to(torch.float64)          # clipped in float64 (the clip margin)
    c = clip_factors(G.square().sum(1), B, margin=clip_margin(G.shape[1], torch.float64))
    G = torch.where((c > 0)[:, None], G * c[:, None], torch.zeros_like(G))
    return alpha * newton_direction(G, lam), (c < 1).sum()


# ---------------------------------------------------------------------- backend
@dataclass
class TorchBackend:
    """The data of one CNN fit: the network's initial parameters, the clients' training
    images, the run's settings and its two random streams.

    Parameters
    ----------
    params0 : dict name -> Tensor
        Initial weights (`fedgdp.nn.models.build_model`), on the training device.
    clients : fedgdp.nn.train.ClientData
    p : NNSettings
        Resolved run settings (`fedgdp.nn.settings.resolve`): ``mu``, ``clip``,
        ``q``, ``server_lr``.
    rng : numpy.random.Generator
        Draws the clients of every round.
    gen : torch.Generator, optional
        Draws the noise (None when non-private).
    stack : bool
        Run a round's clients as one stack (`fedgdp.nn.clipping.clipped_grad_sums`,
        a grouped convolution over clients; the default on CUDA and for small networks)
        or one client at a time.
    progress : callable, optional
        Called with the rounds done after every round (a drawn set of clients), e.g.
        [`Progress`][fedgdp.nn.train.Progress].
    """

    params0: dict
    clients: Any
    p: NNSettings
    rng: np.random.Generator
    gen: torch.Generator | None = None
    stack: bool | None = None
    progress: Callable[[int], None] | None = None
    info: TrainInfo = field(default_factory=TrainInfo)

    kind = CNN

    def __post_init__(self):
        self.m = self.clients.m
        self.dk = sum(v.numel() for v in self.params0.values())
        self.mu = float(self.p.mu)
        release = self.p.release
        self.private = privacy.adds_noise(self.mu, release)  # a non-finite private release is an error
        self.B = float(self.p.clip) if privacy.clips(self.mu, release) else float("inf")
        self.noise = TorchNoise(self.gen if self.private else None)
        self.schedule: dict | None = None        # the counts of a published schedule (accounting: schedule)
        self.counts = {}
        # the minibatches' permutations (local_batch): a stream of their own, spawned from the
        # client-sampling one without drawing from it (the same clients as full-batch runs)
        self._batch_rng = self.rng.spawn(1)[0] if self.p.local_batch else None
        self._clipped = torch.zeros((), dtype=torch.int64, device=self._device)
        self._tally: torch.Tensor | None = None   # per drawn client, during a round of clip_unit: update
        self._per_image = floats_per_image(self.params0, tuple(self.clients.x[0].shape[1:]))
        if self.stack is None:
            self.stack = self._device.type == "cuda" or self._per_image * int(self.clients.n.max()) <= CPU_STACK

    @property
    def _device(self) -> torch.device:
        return next(iter(self.params0.values())).device

    # -- what a method's plan reads
    @property
    def data(self):
        return self

    @property
    def plan_B(self) -> float:
        return float(self.p.clip)

    @property
    def plan_n(self) -> np.ndarray:
        return self.clients.n.astype(float)[None, :]

    # -- Backend operations
    def calibrate(self, method, s):
        """The noise sds of the method's plan (clients of sizes `plan_n`), one (m,) array per
        release spec, and its one ledger (arrays shaped (1, m)).

        Parameters
        ----------
        method : fedgdp.methods.Method
            The method (its `fedgdp.methods.Method.plan` is calibrated to ``mu``).
        s : MethodSettings
            The method's frozen settings (`fedgdp.methods.Method.settings`).
        """
        plan = reduced_plan(method.plan(self, s), self.p)
        mu = self.mu if self.noise.gen is not None else float("inf")   # clip_only: no noise, no private release
        if self.p.accounting == "schedule" and self.noise.gen is not None:
            self.schedule = self._schedule(method, s)
            cal = privacy.calibrate_schedule(plan, mu=mu, counts={k: v[None, :] for k, v in self.schedule.items()})
        elif self.p.noise_for == "mean":
            cal = noise_for_mean(plan, reduced_plan(method.plan(self, s), self.p.replace(reduction="mean")), mu)
        else:
            cal = privacy.calibrate(plan, mu=mu)
        privacy.check_noise_resolves(plan, cal.sigmas, self.plan_n, next(iter(self.params0.values())).dtype)
        return tuple(np.asarray(sig)[0] for sig in cal.sigmas), [cal.ledger]

    def _schedule(self, method, s) -> dict:
        """Every client's releases ``stage -> (m,)`` under the participation schedule: the
        method run on a `ScheduleDraw` with a copy of the client generator (no image read)."""
        dry = ScheduleDraw(self.params0, self.clients, self.p.replace(accounting="printed"), copy.deepcopy(self.rng))
        method.run(dry, s)
        return dry.counts

    def weights(self, releases):
        """Aggregation weights ``n_i / sum n`` over all m clients (a round renormalises
        them over its drawn clients).

        Parameters
        ----------
        releases : int
            Releases each client makes (unused).
        """
        return self.clients.n / self.clients.n.sum()

    def zeros(self):
        return {k: torch.zeros_like(v) for k, v in self.params0.items()}

    def start(self):
        return {k: v.detach().clone() for k, v in self.params0.items()}

    def _draw(self, stage: str, count: int) -> np.ndarray:
        if self.progress is not None and self.info.rounds:
            self.progress(self.info.rounds)                  # the round before this one has finished
        S = sample_clients(self.rng, self.m, float(self.p.q))
        self._batches: dict = {}
        self.counts.setdefault(stage, np.zeros(self.m, dtype=np.int64))[S] += count
        self.info.rounds += 1
        self.info.floats_down += len(S) * self.dk
        return S

    def _wS(self, S, like: torch.Tensor) -> torch.Tensor:
        n = self.clients.n[S]
        return torch.as_tensor(n / n.sum(), dtype=like.dtype, device=like.device)

    def _mean_grads(self, params: dict, S: np.ndarray, *, shared: bool, unit: str | None = None) -> dict:
        """Clipped mean gradients ``name -> (len(S), *shape)`` of the drawn clients (their
        sums under ``reduction: sum``; the client's vector clipped under ``clip_unit:
        client``; `fedgdp.nn.settings.reduced_plan`)."""
        n = self.clients.n[S]
        self.info.grad_evals += int(n.sum())
        if self.stack:
            groups = _stacks(n, self._per_image)
        else:
            groups = [np.array([j]) for j in range(len(S))]
        out = []
        for g in groups:
            X, Y, M = self._batch(S[g])
            P = params if shared else {k: v[g] for k, v in params.items()}
            out.append(self._release(P, X, Y, M, shared=shared, unit=unit, pos=torch.as_tensor(g)))
        return {k: torch.cat([o[k] for o in out]) for k in out[0]}

    def _unit(self, stage: str) -> str:
        """What a release of ``stage`` clips: ``sample``, ``client``, or ``none`` (the
        local steps under ``clip_unit: update``, whose update is clipped afterwards)."""
        if update_is_release(self.p):
            return "none" if stage == privacy.LOCAL_STEP else "client"
        return self.p.clip_unit

    def _release(self, P: dict, X, Y, M, *, shared: bool, unit: str | None = None,
                 pos: torch.Tensor | None = None) -> dict:
        """One gradient ``name -> (S, *shape)`` of a stack of clients: the mean
        (``reduction: sum``: the sum) of the clipped per-sample gradients (``unit``
        ``sample``), or of the unclipped ones, clipped as one vector per client
        (``client``, `clip_client_vectors`) or not at all (``none``); images whose gradient
        is not finite count as zero. ``unit`` defaults to the gradient stage's (`_unit`);
        ``pos`` are the stack's places among the round's clients (for the round's tally of
        clipped images under ``clip_unit: update``)."""
        unit = unit or self._unit("gradient")
        total, c = clipped_grad_sums(P, X, Y, M, self.B if unit == "sample" else math.inf, shared=shared)
        zeroed = (c < M).sum(1)                      # images whose gradient was not finite (or clipped)
        if self.p.reduction != "sum":
            div = M.sum(1)
            total = {k: v / div.view(-1, *[1] * (v.dim() - 1)) for k, v in total.items()}
        if unit == "client" and math.isfinite(self.B):
            total, clipped = clip_client_vectors(total, self.B)
            # a clipped client counts every image once; otherwise its zeroed images count
            zeroed = torch.where(clipped > 0, M.sum(1).to(zeroed.dtype), zeroed)
        if self._tally is not None and pos is not None:
            self._tally[pos.to(self._tally.device)] += zeroed
        else:
            self._clipped += zeroed.sum()
        return total

    def _batch(self, clients: np.ndarray):
        """The padded images of ``clients`` (`ClientData.batch`), kept for the rest
        of the round (its K local steps)."""
        key = tuple(int(i) for i in clients)
        if key not in self._batches:
            self._batches[key] = self.clients.batch(clients)
        return self._batches[key]

    def local_steps(self, start, *, K, eta, sigma, noise, part="full", drift=None):
        """One FedAvg round's local steps: draw the round's clients, then K full-batch
        clipped gradient steps of each, ``theta <- theta - eta mean_j clip(g_j(theta)) +
        sigma_i Z`` (noise after every step); `Locals` with ``params`` ``name -> (S, *shape)``.

        Parameters
        ----------
        start : dict name -> Tensor
            The global parameters.
        K : int
            Local steps.
        eta : float
            Step size.
        sigma : ndarray of shape (m,)
            Noise sds per client (the drawn clients' are used).
        noise : TorchNoise or None
            The noise stream, None when non-private.
        part : str
            Must be ``full``.
        drift : None
            Must be None (no drift correction on the CNN backend).
        """
        if part != "full" or drift is not None:
            raise ValueError("the CNN backend runs local steps on every image and without drift")
        unit = self._unit(privacy.LOCAL_STEP)
        if unit == "none" and K != self.p.local_epochs:
            raise ValueError(f"clip_unit update: a round of {K} local steps, but the plan counts rounds of "
                             f"local_epochs={self.p.local_epochs}")
        S = self._draw(privacy.LOCAL_STEP, 1 if unit == "none" else K)
        sd_np = np.asarray(sigma)[S]
        ref = next(iter(start.values()))
        sd = torch.as_tensor(sd_np, dtype=ref.dtype, device=ref.device)
        noisy = noise is not None and bool(np.any(sd_np > 0))
        step_sd = sd if noisy and unit != "none" else None            # under update: noise once, below
        local = {k: v.unsqueeze(0).repeat(len(S), *[1] * v.dim()) for k, v in start.items()}
        if unit == "none":
            self._tally = torch.zeros(len(S), dtype=torch.int64, device=self._device)
        try:
            for _ in range(K):
                if self._batch_rng is not None:
                    self._minibatch_pass(local, S, eta, step_sd, noise, unit)
                    continue
                g = self._mean_grads(local, S, shared=False, unit=unit)
                for k in local:
                    local[k] += self._noisy_step(g[k], eta, step_sd, noise)
        finally:
            tally, self._tally = self._tally, None
        if unit == "none":
            assert tally is not None
            if math.isfinite(self.B) or noisy:
                local = self._released_update(start, local, sd if noisy else None, noise, S, K, tally)
            else:
                self._clipped += tally.sum()
        self.info.floats_up += len(S) * self.dk
        return Locals(S, start, params=local)

    @staticmethod
    def _noisy_step(g: torch.Tensor, eta: float, sd: torch.Tensor | None, noise) -> torch.Tensor:
        """A local step's update ``-eta g + sd Z`` (S, *shape), noise added before it meets
        the parameters, whose coarser float grid could otherwise absorb it (docs/methods.md
        §2, "Noise before rounding")."""
        step = -eta * g
        if sd is not None:
            step = step + sd.view(-1, *[1] * (g.dim() - 1)) * noise.draw(step)
        return step

    def _released_update(self, start: dict, local: dict, sd: torch.Tensor | None, noise, S: np.ndarray,
                         K: int, tally: torch.Tensor) -> dict:
        """``clip_unit: update``: each drawn client's model update ``local - start`` after the
        round's K unclipped, noiseless local steps, clipped as one vector at B
        (`clip_client_vectors`; a non-finite update is released as zero), plus its noise
        once; returned as the client's parameters ``start + release``. A clipped update
        counts every gradient evaluation of its round as clipped; otherwise the round's
        images whose gradient was not finite count (``tally``, per drawn client)."""
        delta = self._clipped_update(start, local, S, K, tally)
        out = {}
        for k, v in delta.items():
            if sd is not None:
                v = v + sd.view(-1, *[1] * (v.dim() - 1)) * noise.draw(v)
            out[k] = start[k].unsqueeze(0) + v
        return out

    def _minibatch_pass(self, local: dict, S: np.ndarray, eta: float, sd: torch.Tensor | None, noise,
                        unit: str) -> None:
        """One local epoch as a pass of minibatches (``local_batch``, `minibatches`), in
        place: step t moves the drawn clients that have a t-th minibatch by ``-eta``
        times its clipped mean (sum under ``reduction: sum``) gradient, plus their noise."""
        batch = self.p.local_batch
        if batch is None:
            raise ValueError("a pass of minibatches needs local_batch, got local_batch=None")
        passes = [minibatches(self._batch_rng, int(self.clients.n[i]), batch) for i in S]
        for t in range(max(len(b) for b in passes)):
            sub = np.array([j for j, b in enumerate(passes) if t < len(b)])
            X, Y, M = self.clients.batch(S[sub], [passes[j][t] for j in sub])
            pos = torch.as_tensor(sub, device=X.device)
            g = self._release({k: v[pos] for k, v in local.items()}, X, Y, M, shared=False, unit=unit, pos=pos)
            self.info.grad_evals += int(M.sum())
            for k in local:
                local[k][pos] = local[k][pos] + self._noisy_step(g[k], eta, None if sd is None else sd[pos], noise)

    def _clipped_update(self, start: dict, local: dict, S: np.ndarray, K: int, tally: torch.Tensor) -> dict:
        """The pre-noise release of `_released_update`: each drawn client's update ``local -
        start``, clipped as one vector at B (when B is finite), with its clipped count."""
        delta = {k: v - start[k].unsqueeze(0) for k, v in local.items()}
        if math.isfinite(self.B):
            delta, clipped = clip_client_vectors(delta, self.B)
            n = torch.as_tensor(K * self.clients.n[S], device=tally.device)
            self._clipped += torch.where(clipped.to(tally.device) > 0, n, tally).sum()
        else:
            self._clipped += tally.sum()
        return delta

    # -- one client's releases, exposed for the audit (fedgdp.audit.nn)
    def pass_batches(self, i: int) -> list[np.ndarray] | None:
        """The minibatches of client ``i``'s next pass (``local_batch``), drawn from the pass
        stream as `_minibatch_pass` draws them; None for full-batch local steps.

        Parameters
        ----------
        i : int
            The client.
        """
        if self._batch_rng is None or self.p.local_batch is None:
            return None
        return minibatches(self._batch_rng, int(self.clients.n[i]), self.p.local_batch)

    def release_args(self, method, s) -> dict:
        """The arguments ``method``'s run passes to each stage's operation, from a dry run
        (`ScheduleDraw`; no image is read): ``stage -> list of distinct keyword dicts``
        (``local step``: ``K``, ``eta``; ``gradient``: ``eta``; ``newton``: ``ridge``,
        ``damping``), the keywords of `release`.

        Parameters
        ----------
        method : fedgdp.methods.Method
            A CNN method.
        s : MethodSettings
            The method's frozen settings (`fedgdp.methods.Method.settings`).
        """
        dry = ScheduleDraw(self.params0, self.clients, self.p.replace(accounting="printed"), copy.deepcopy(self.rng))
        method.run(dry, s)
        return dry.args

    def release(self, stage: str, theta: dict, i: int, *, eta: float = 1.0, K: int = 1, ridge: float = 1.0,
                damping: float = 1.0, batches: list | None = None) -> torch.Tensor:
        """Client ``i``'s releases of ``stage`` in one round from the public parameters
        ``theta``, before noise, as one float64 vector (what `calibrate` calibrates),
        computed by the training's own operations: ``gradient`` as `server_steps` releases
        it; ``local step`` ``-eta`` times it (with ``local_batch``, every minibatch's of a
        pass, concatenated; under ``clip_unit: update`` the round's clipped update after
        ``K`` steps); ``newton`` the head as `head_newton_release` releases it.

        Parameters
        ----------
        stage : str
            ``gradient``, ``local step`` or ``newton``.
        theta : dict name -> Tensor
            The public parameters the release is made at.
        i : int
            The client.
        eta, K, ridge, damping : float, int, float, float
            The method's arguments of the stage (`release_args`).
        batches : list of ndarray, optional
            A pass's minibatches of the client (``local_batch``, except under ``update``,
            whose passes draw from the stream).
        """
        S = np.array([int(i)])
        self._batches = {}                       # a round's cache of padded images (`_batch`)

        def flat(g: dict) -> torch.Tensor:
            return torch.cat([v.reshape(-1).to(torch.float64) for v in g.values()])

        if stage == "newton":
            step, _ = head_newton_step(theta, self.clients.x[i], self.clients.y[i], B=self.B, lam=ridge,
                                       alpha=damping)
            return head_vector(theta).to(torch.float64) - step
        if stage == "gradient":
            return flat(self._mean_grads(theta, S, shared=True))
        if stage != privacy.LOCAL_STEP:
            raise ValueError(f"no release of stage {stage!r} on the CNN backend")
        unit = self._unit(stage)
        local = {k: v.unsqueeze(0).repeat(1, *[1] * v.dim()) for k, v in theta.items()}
        if unit == "none":                                            # clip_unit: update
            self._tally = torch.zeros(1, dtype=torch.int64, device=self._device)
            try:
                for _ in range(int(K)):
                    if self._batch_rng is not None:
                        self._minibatch_pass(local, S, eta, None, None, unit)
                    else:
                        g = self._mean_grads(local, S, shared=False, unit=unit)
                        for k in local:
                            local[k] -= eta * g[k]
            finally:
                tally, self._tally = self._tally, None
            return flat(self._clipped_update(theta, local, S, int(K), tally))
        if self._batch_rng is None:
            return flat({k: -(eta * v) for k, v in self._mean_grads(local, S, shared=False, unit=unit).items()})
        pos = torch.as_tensor([0], device=self._device)
        out = []
        for rows in batches if batches is not None else self.pass_batches(i):  # type: ignore[union-attr]  # local_batch set
            X, Y, M = self.clients.batch(S, [rows])
            g = self._release({k: v[pos] for k, v in local.items()}, X, Y, M, shared=False, unit=unit, pos=pos)
            out.append(flat({k: -(eta * v) for k, v in g.items()}))
        return torch.cat(out)

    def average(self, w, local: Locals):
        """The new global parameters: ``theta + server_lr sum_{i in S} w_i (local_i - theta)``
        (FedAvg), or ``sum_{i in S} w_i head_i`` (Newton, Algorithm 5), ``w_i = n_i / sum_S n``.

        Parameters
        ----------
        w : ndarray
            The weights of `weights` (unused: renormalised over the drawn clients).
        local : Locals
            The round's local results (``params`` or ``head`` (S, D)).
        """
        theta = local.start
        if local.head is not None:                        # a Newton round: the plain weighted average
            wS = self.clients.n[local.clients] / self.clients.n[local.clients].sum()
            new = torch.zeros_like(local.head[0])
            for wi, h in zip(wS, local.head):
                new += float(wi) * h
            return set_head_vector(theta, new)
        wt = self._wS(local.clients, next(iter(theta.values())))
        slr = float(self.p.server_lr)
        return {k: theta[k] + slr * torch.tensordot(wt, local.params[k] - theta[k], dims=1) for k in theta}  # type: ignore[index]  # FedAvg locals carry params

    def server_steps(self, theta, w, *, K, eta, sigma, noise):
        """K FedSGD steps, each on newly drawn clients: ``theta <- theta - server_lr eta
        sum_{i in S} w_i (mean_j clip(g_j(theta)) + sigma_i Z_i)``.

        Parameters
        ----------
        theta : dict name -> Tensor
            The global parameters.
        w : ndarray
            The weights of `weights` (unused: renormalised over each step's clients).
        K : int
            Server steps (one round each).
        eta : float
            Step size.
        sigma : ndarray of shape (m,)
            Noise sds per client.
        noise : TorchNoise or None
            The noise stream, None when non-private.
        """
        slr = float(self.p.server_lr)
        for _ in range(K):
            S = self._draw("gradient", 1)
            sd_np = np.asarray(sigma)[S]
            wt = self._wS(S, next(iter(theta.values())))
            sd = torch.as_tensor(sd_np, dtype=wt.dtype, device=wt.device)
            g = self._mean_grads(theta, S, shared=True)
            noisy = noise is not None and bool(np.any(sd_np > 0))
            new = {}
            for k in theta:
                gk = g[k]
                if noisy:
                    gk = gk + sd.view(-1, *[1] * (gk.dim() - 1)) * noise.draw(gk)
                new[k] = theta[k] - slr * eta * torch.tensordot(wt, gk, dims=1)
            theta = new
            self.info.floats_up += len(S) * self.dk
        return theta

    def head_newton_release(self, theta, *, ridge: float, damping: float) -> Locals:
        """Every drawn client's pre-noise head release ``head - alpha (h + lambda I)^{-1}
        gbar`` (`Locals`, ``head`` float64 ``(S, D)``): one round of Algorithm 5's refinement.

        Parameters
        ----------
        theta : dict name -> Tensor
            The global parameters.
        ridge : float
            Ridge ``lambda``.
        damping : float
            Damping ``alpha``.
        """
        S = self._draw("newton", 1)
        head = head_vector(theta).to(torch.float64)
        steps = []
        for i in S:
            s, c = head_newton_step(theta, self.clients.x[i], self.clients.y[i], B=self.B, lam=ridge,
                                    alpha=damping)
            self._clipped += c
            steps.append(-s)
        self.info.grad_evals += int(self.clients.n[S].sum())
        self.info.floats_up += len(S) * head.numel()
        step = torch.stack(steps)
        return Locals(S, theta, head=head + step, step=step)

    def add_noise(self, local: Locals, sigma, noise):
        """``head_i + sigma_i Z_i`` for every drawn client (one draw each), or ``local``
        when noise is None.

        Parameters
        ----------
        local : Locals
            A Newton round's releases (``head`` (S, D)).
        sigma : ndarray of shape (m,)
            Noise sds per client (the drawn clients' are used).
        noise : TorchNoise or None
            The noise stream, None when non-private.
        """
        if noise is None:
            return local
        sd = np.asarray(sigma)[local.clients]
        assert local.head is not None and local.step is not None
        head = head_vector(local.start).to(local.step.dtype)
        # the noise joins the step before the step meets the (coarser-gridded) head
        rows = [head + (u + noise.draw(u) * float(s)) if s > 0 else h
                for h, u, s in zip(local.head, local.step, sd)]
        return Locals(local.clients, local.start, head=torch.stack(rows))

    def memo(self, key, inputs, compute):
        """``compute()``: the CNN backend keeps no results.

        Parameters
        ----------
        key, inputs : str, tuple
            The result's name and what it depends on (unused).
        compute : callable
            Computes the result.
        """
        return compute()

    def finish(self, theta, ledgers, comm):
        """The fit, its rounds and communication from `info` (which receives the clipped count).

        Parameters
        ----------
        theta : dict name -> Tensor
            The final global parameters.
        ledgers : list of fedgdp.core.privacy.Ledger
            The one ledger of `calibrate`.
        comm : dict
            The method's nominal communication (unused).
        """
        self.info.clipped = int(self._clipped)
        if self.schedule is not None:          # the releases made are those the noise was calibrated to
            made = {k: v for k, v in self.counts.items() if v.any()}
            if made.keys() != {k for k, v in self.schedule.items() if v.any()} or \
                    any(not np.array_equal(v, self.schedule[k]) for k, v in made.items()):
                raise RuntimeError("the releases made differ from the published schedule")
        if self.progress is not None:
            self.progress(self.info.rounds)
        return [Fit(theta, ledgers[0], rounds=self.info.rounds, floats_up=self.info.floats_up,
                    floats_down=self.info.floats_down)]


class ScheduleDraw(TorchBackend):
    """A CNN method's rounds without training: each round draws its clients (as
    `TorchBackend` does, from the same generator) and counts their releases; no
    image is read and no parameter moves. `TorchBackend.calibrate` runs a method on
    it to publish the schedule of ``accounting: schedule``; it also records the
    arguments of every stage (``args``, `TorchBackend.release_args`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.args: dict = {}

    def _record(self, stage: str, **kwargs) -> None:
        seen = self.args.setdefault(stage, [])
        if kwargs not in seen:
            seen.append(kwargs)

    def local_steps(self, start, *, K, eta, sigma, noise, part="full", drift=None):
        """Draw a FedAvg round's clients; they make K local-step releases (no training)."""
        self._record(privacy.LOCAL_STEP, K=int(K), eta=float(eta))
        per_round = self._unit(privacy.LOCAL_STEP) == "none"                # clip_unit update: one release a round
        return Locals(self._draw(privacy.LOCAL_STEP, 1 if per_round else K), start, params=start)

    def average(self, w, local: Locals):
        """``local.start`` (nothing moves)."""
        return local.start

    def server_steps(self, theta, w, *, K, eta, sigma, noise):
        """Draw the clients of K FedSGD steps, one gradient release each (no training)."""
        self._record("gradient", eta=float(eta))
        for _ in range(K):
            self._draw("gradient", 1)
        return theta

    def head_newton_release(self, theta, *, ridge: float, damping: float) -> Locals:
        """Draw a Newton round's clients, one release each (no training; ``head`` empty rows)."""
        self._record("newton", ridge=float(ridge), damping=float(damping))
        S = self._draw("newton", 1)
        return Locals(S, theta, head=torch.zeros((len(S), 0)))

    def add_noise(self, local: Locals, sigma, noise):
        """``local`` (no noise is drawn)."""
        return local


def clip_client_vectors(g: dict, B: float) -> tuple[dict, torch.Tensor]:
    """Each client's gradient ``name -> (S, *shape)``, all parameters as one vector, clipped at ``B``
    (``clip_unit: client``) by `fedgdp.nn.clipping`'s rule and margin (the squared norm summed in float64; a
    non-finite vector releases zero), and ``was_clipped`` (S,): 1 where the client's vector was scaled (or
    zeroed), else 0, in ``g``'s dtype.

    Parameters
    ----------
    g : dict name -> Tensor of shape (S, *shape)
        The clients' gradients (mean or sum of their images').
    B : float
        The clipping bound (finite).
    """
    ref = next(iter(g.values()))
    S = ref.shape[0]
    sq = sum(v.reshape(S, -1).square().sum(1, dtype=torch.float64) for v in g.values())
    D = sum(v[0].numel() for v in g.values())
    c = clip_factors(sq, B, margin=clip_margin(D, ref.dtype), dtype=ref.dtype)
    out = {}
    for k, v in g.items():
        shape = (-1, *[1] * (v.dim() - 1))
        out[k] = torch.where((c > 0).view(shape), v * c.view(shape), torch.zeros_like(v))
    return out, (c < 1).to(ref.dtype)


def _stacks(n: np.ndarray, per_image: int) -> list[np.ndarray]:
    """Consecutive groups of the drawn clients whose padded stack ``len(g) max(n_g)
    per_image`` stays within `MAX_STACK` numbers (at least one client per group)."""
    groups: list = []
    cur: list = []
    for j, nj in enumerate(n):
        if cur and (len(cur) + 1) * max(int(n[cur].max()), int(nj)) * per_image > MAX_STACK:
            groups.append(np.array(cur))
            cur = []
        cur.append(j)
    groups.append(np.array(cur))
    return groups
