"""The CNN oracle: the per-sample clipping and the training loop that ``fedgdp.nn`` had
before its methods moved onto the algorithm core (``fedgdp.methods`` on
``fedgdp.nn.backend.TorchBackend``) and its clipping to book-keeping
(``fedgdp.nn.clipping``).

Per-sample gradients are materialised with ``torch.func.vmap(grad(...))`` and clipped
one by one; the four methods are phases of rounds run by one loop, with their noise
sds from the formulas the old calibration wrote out (each release kind ``1/k`` of
mu^2). No module of ``fedgdp`` imports this file; the tests compare the package with it
(``tests/nn/test_nn_clipping.py``, ``tests/nn/test_nn.py``).

The clip margin ``kappa`` (``fedgdp.nn.clipping.clip_margin``) is part of the clipping
rule, ``c = min(1, (1 - kappa) B / ||g||)``, so the oracle applies the same rule to its
materialised gradients (``kappa`` is below 2e-10 in float64; the book-keeping
computation, not the constant, is what the comparisons test).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F

from fedgdp.nn.backend import head_vector, newton_direction, set_head_vector  # unchanged by the move
from fedgdp.nn.clipping import clip_margin  # the rule's constant: c = min(1, (1 - kappa) B / ||g||)
from fedgdp.nn.models import HEAD

MAX_FLOATS = 1 << 25


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


def _fedavg(p) -> list[Phase]:
    return [Phase("avg", int(p.rounds), int(p.local_epochs))]


def _fedsgd(p) -> list[Phase]:
    return [Phase("sgd", int(p.rounds) * int(p.local_epochs), 1)]


def _fedhybrid(p) -> list[Phase]:
    R, K = int(p.rounds), int(p.local_epochs)
    r1 = int(round(p.hybrid_local_share * R))
    phases = [Phase("avg", r1, K), Phase("sgd", (R - r1) * K, 1)]
    return [ph for ph in phases if ph.rounds > 0]


def _fednewton_iter(p) -> list[Phase]:
    R, K, C = int(p.rounds), int(p.local_epochs), int(p.newton_cycles)
    if R % C:
        raise ValueError(f"rounds must be a multiple of newton_cycles, got rounds={R}, newton_cycles={C}")
    return [Phase("avg", R // C, K), Phase("newton", 1, 1)] * C


# ------------------------------------------------------------- gradients
def _loss_one(model, params, x, y):
    out = functional_call(model, params, (x.unsqueeze(0),))
    return F.nll_loss(out, y.unsqueeze(0))


def per_sample_grads(model, params: dict, x: torch.Tensor, y: torch.Tensor) -> dict:
    """Gradients of the one-image NLL loss, ``name -> (n, *shape)``."""
    fn = vmap(grad(lambda p, xi, yi: _loss_one(model, p, xi, yi)), in_dims=(None, 0, 0))
    return fn(params, x, y)


def _batch_grad(model, params, x, y):
    def loss(p):
        return F.nll_loss(functional_call(model, p, (x,)), y)
    return grad(loss)(params)


def clipped_mean_grad(model, params: dict, x: torch.Tensor, y: torch.Tensor, B: float,
                      *, max_floats: int = MAX_FLOATS) -> tuple[dict, int]:
    """``mean_j clip_B(g_j)`` over the client's images, and how many were clipped.

    ``B = inf``: the plain mean gradient (one batched backward pass). Otherwise the
    per-sample gradients are computed in chunks of at most ``max_floats`` numbers.
    """
    n = int(y.shape[0])
    if not np.isfinite(B):
        return _batch_grad(model, params, x, y), 0
    size = sum(v.numel() for v in params.values())
    chunk = max(1, min(n, max_floats // max(size, 1)))
    total = {k: torch.zeros_like(v) for k, v in params.items()}
    clipped = 0
    for s in range(0, n, chunk):
        g = per_sample_grads(model, params, x[s:s + chunk], y[s:s + chunk])
        sq = sum(v.flatten(1).pow(2).sum(1) for v in g.values())
        factor = torch.clamp((1 - clip_margin(size, sq.dtype)) * B / sq.sqrt().clamp_min(1e-30), max=1.0)
        clipped += int((factor < 1).sum())
        for k, v in g.items():
            total[k] += torch.tensordot(factor, v, dims=1)
    return {k: v / n for k, v in total.items()}, clipped


def batched_clipped_mean_grads(model, params: dict, X: torch.Tensor, Y: torch.Tensor, mask: torch.Tensor,
                               B: float, *, shared: bool = False, max_floats: int = MAX_FLOATS) -> tuple[dict, int]:
    """:func:`clipped_mean_grad` of S clients at once (vmap over clients, then samples).

    Parameters
    ----------
    params : dict name -> Tensor
        ``(S, *shape)`` (one model per client), or ``(*shape)`` with ``shared=True``.
    X, Y, mask : Tensor
        ``(S, L, C, H, W)``, ``(S, L)``, ``(S, L)`` (:meth:`ClientData.batch`); rows with
        mask 0 are padding and do not count.
    B : float
        Clipping bound; ``inf``: plain mean gradients.

    Returns
    -------
    grads : dict name -> Tensor, shape (S, *shape)
    clipped : int
    """
    S, L = Y.shape
    n = mask.sum(1)
    pin = None if shared else 0
    if not np.isfinite(B):
        def loss(p, x, y, w):
            out = functional_call(model, p, (x,))
            return (F.nll_loss(out, y, reduction="none") * w).sum() / w.sum()
        return vmap(grad(loss), in_dims=(pin, 0, 0, 0))(params, X, Y, mask), 0
    inner = vmap(grad(lambda p, xi, yi: _loss_one(model, p, xi, yi)), in_dims=(None, 0, 0))
    outer = vmap(inner, in_dims=(pin, 0, 0))
    size = sum(v[0].numel() if not shared else v.numel() for v in params.values())
    chunk = max(1, min(L, max_floats // max(S * size, 1)))
    total = {k: torch.zeros((S, *(v.shape[1:] if not shared else v.shape)), dtype=v.dtype, device=v.device)
             for k, v in params.items()}
    clipped = 0
    for s in range(0, L, chunk):
        g = outer(params, X[:, s:s + chunk], Y[:, s:s + chunk])
        norm = sum(v.flatten(2).pow(2).sum(2) for v in g.values()).sqrt()       # (S, c)
        w = mask[:, s:s + chunk]
        factor = torch.clamp((1 - clip_margin(size, norm.dtype)) * B / norm.clamp_min(1e-30), max=1.0) * w
        clipped += int(((factor < w) & (w > 0)).sum())
        for k, v in g.items():
            total[k] += (factor[:, :, None] * v.flatten(2)).sum(1).view_as(total[k])
    return {k: v / n.view(S, *[1] * (v.dim() - 1)) for k, v in total.items()}, clipped


def round_grads(model, params: dict, clients, S, B: float, *, shared: bool = False,
                max_floats: int = MAX_FLOATS) -> tuple[dict, int]:
    """Clipped mean gradients ``(S, *shape)`` of the drawn clients ``S``.

    Batched over clients (:func:`batched_clipped_mean_grads`) when all their
    per-sample gradients fit in one chunk of ``max_floats`` numbers (small networks,
    where per-call overhead dominates); otherwise client by client
    (:func:`clipped_mean_grad`), which is faster for large networks on a CPU.
    """
    size = sum(v.numel() for v in params.values()) // (1 if shared else len(S))
    if size * int(clients.n[S].max()) * len(S) <= max_floats:
        X, Y, M = clients.batch(S)
        return batched_clipped_mean_grads(model, params, X, Y, M, B, shared=shared, max_floats=max_floats)
    out, clipped = [], 0
    for j, i in enumerate(S):
        pj = params if shared else {k: v[j] for k, v in params.items()}
        g, c = clipped_mean_grad(model, pj, clients.x[i], clients.y[i], B, max_floats=max_floats)
        out.append(g)
        clipped += c
    return {k: torch.stack([g[k] for g in out]) for k in out[0]}, clipped


# ----------------------------------------------------------- Newton head
class _Features(torch.nn.Module):
    """``net.features`` as a module's forward, for functional_call."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net.features(x)


def _features(model, params, x):
    body = {f"net.{k}": v for k, v in params.items() if not k.startswith(HEAD + ".")}
    with torch.no_grad():
        return functional_call(_Features(model), body, (x,))


def head_per_sample_grads(model, params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample gradients of the NLL loss in the head's parameters, shape ``(n, D)``.

    The body is held at ``params``; the gradient is ``(p_j - e_{y_j}) [z_j, 1]`` for
    penultimate activations ``z_j``, computed here with torch.func.
    """
    z = _features(model, params, x)
    hp = {"weight": params[f"{HEAD}.weight"], "bias": params[f"{HEAD}.bias"]}

    def loss(h, zi, yi):
        logits = functional_call(model.head, h, (zi.unsqueeze(0),))
        return F.nll_loss(F.log_softmax(logits, dim=-1), yi.unsqueeze(0))

    g = vmap(grad(loss), in_dims=(None, 0, 0))(hp, z, y)
    return torch.cat([g["weight"].flatten(1), g["bias"]], dim=1)


def head_newton_step(model, params: dict, x: torch.Tensor, y: torch.Tensor, *, B: float,
                     lam: float, alpha: float) -> tuple[torch.Tensor, int]:
    """Algorithm 5's local step on the head, ``alpha (h + lam I)^{-1} gbar`` (no noise).

    The per-sample head gradients are clipped at ``B`` before the empirical Fisher
    ``h`` and the mean ``gbar`` are formed (``B = inf``: no clipping). Returns the
    step (float64, shape (D,)) and the number of clipped images.
    """
    G = head_per_sample_grads(model, params, x, y)
    clipped = 0
    if np.isfinite(B):
        norms = G.norm(dim=1)
        factor = torch.clamp((1 - clip_margin(G.shape[1], torch.float64)) * B / norms.clamp_min(1e-30), max=1.0)
        clipped = int((factor < 1).sum())
        G = G * factor[:, None]
    return alpha * newton_direction(G, lam), clipped


# ------------------------------------------------------------- sampling
def sample_clients(rng: np.random.Generator, m: int, q: float) -> np.ndarray:
    """``max(1, round(q m))`` distinct clients, sorted, drawn uniformly without replacement.

    ``round`` is Python's (half to even: q m = 2.5 draws 2). Each client is drawn in a
    round with probability ``round(q m) / m``.
    """
    k = max(1, min(m, int(round(q * m))))
    return np.sort(rng.choice(m, size=k, replace=False))


# ------------------------------------------------------------- training
@dataclass
class TrainInfo:
    """What one method did.

    Attributes
    ----------
    rounds : int
        Communication rounds.
    releases : dict kind -> ndarray (m,)
        Releases each client actually made.
    grad_evals : int
        Per-sample gradient evaluations (all clients, all rounds).
    clipped : int
        Per-sample gradients that were clipped.
    floats_up, floats_down : int
        Numbers sent by the sampled clients to the server, and back.
    """

    rounds: int = 0
    releases: dict = field(default_factory=dict)
    grad_evals: int = 0
    clipped: int = 0
    floats_up: int = 0
    floats_down: int = 0


def _noise_like(t: torch.Tensor, sd: float, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(t.shape, generator=gen, device=t.device, dtype=t.dtype) * sd


def train(method: str, model, params0: dict, clients, p, cal,
          rng: np.random.Generator, gen: torch.Generator) -> tuple[dict, TrainInfo]:
    """Train ``model`` from ``params0`` with one of the four methods.

    Parameters
    ----------
    method : str
        ``fedsgd | fedhybrid | fedavg | fednewton_iter``.
    model : fedgdp.nn.models.ConvNet
        Only its structure is used; parameters come from ``params0``.
    params0 : dict name -> Tensor
    clients : ClientData
    p : NNSettings
        Resolved settings (:func:`fedgdp.nn.settings.resolve`).
    cal : Calibration
        Noise sds of ``method`` (:func:`fedgdp.nn.calibration.calibrate`).
    rng : numpy.random.Generator
        Draws the clients of every round.
    gen : torch.Generator
        Draws the noise (on the training device).

    Returns
    -------
    params : dict name -> Tensor
    info : TrainInfo
    """
    theta = {k: v.detach().clone() for k, v in params0.items()}
    size = sum(v.numel() for v in theta.values())
    eta, slr, B = p.lr, p.server_lr, p.clip
    B = B if math.isfinite(p.mu) else float("inf")
    m = clients.m
    n = clients.n
    info = TrainInfo(releases={k: np.zeros(m, dtype=np.int64) for k in cal.releases})
    for phase in schedule(method, p):
        for _ in range(phase.rounds):
            S = sample_clients(rng, m, p.q)
            w = n[S] / n[S].sum()
            info.rounds += 1
            info.releases[phase.kind][S] += phase.steps
            info.floats_down += len(S) * size
            if phase.kind in ("avg", "sgd"):
                ref = next(iter(theta.values()))
                wt = torch.as_tensor(w, dtype=ref.dtype, device=ref.device)
                sd = torch.as_tensor(cal.sigma[phase.kind][S], dtype=ref.dtype, device=ref.device)
                noisy = bool(torch.any(sd > 0))
                info.grad_evals += phase.steps * int(n[S].sum())
                info.floats_up += len(S) * size
            if phase.kind == "avg":
                local = {k: v.unsqueeze(0).repeat(len(S), *[1] * v.dim()) for k, v in theta.items()}
                for _ in range(phase.steps):
                    g, c = round_grads(model, local, clients, S, B)
                    info.clipped += c
                    for k in local:
                        local[k] -= eta * g[k]
                        if noisy:
                            local[k] += sd.view(-1, *[1] * (local[k].dim() - 1)) * _noise_like(local[k], 1.0, gen)
                for k in theta:
                    theta[k] = theta[k] + slr * torch.tensordot(wt, local[k] - theta[k], dims=1)
            elif phase.kind == "sgd":
                g, c = round_grads(model, theta, clients, S, B, shared=True)
                info.clipped += c
                for k in theta:
                    gk = g[k]
                    if noisy:
                        gk = gk + sd.view(-1, *[1] * (gk.dim() - 1)) * _noise_like(gk, 1.0, gen)
                    theta[k] = theta[k] - slr * eta * torch.tensordot(wt, gk, dims=1)
            elif phase.kind == "newton":
                head = head_vector(theta).to(torch.float64)
                new_head = torch.zeros_like(head)
                for wi, i in zip(w, S):
                    sd = float(cal.sigma["newton"][i])
                    s, c = head_newton_step(model, theta, clients.x[i], clients.y[i], B=B,
                                            lam=p.ridge, alpha=p.damping)
                    info.clipped += c
                    info.grad_evals += int(n[i])
                    local = head - s
                    if sd > 0:
                        local = local + _noise_like(local, sd, gen)
                    new_head += float(wi) * local
                info.floats_up += len(S) * head.numel()
                theta = set_head_vector(theta, new_head)
            else:  # pragma: no cover - schedule() only makes the three kinds
                raise ValueError(f"unknown phase kind {phase.kind!r}")
    return theta, info




def schedule(method: str, p) -> list:
    return SCHEDULES[method](p)


SCHEDULES = {"fedsgd": _fedsgd, "fedhybrid": _fedhybrid, "fedavg": _fedavg, "fednewton_iter": _fednewton_iter}


@dataclass
class OracleCalibration:
    """Noise sd per release kind and client, from the old closed forms."""

    sigma: dict
    releases: dict


def calibrate(method: str, p, n) -> OracleCalibration:
    """``sigma = sensitivity sqrt(k T) / mu`` with k release kinds and T releases of a
    kind: local step ``2 B eta / n``, gradient ``2 B / n``, newton ``alpha B (2 +
    B^2/lambda) / (lambda n)``."""
    n = np.asarray(n, float)
    releases = {}
    for ph in schedule(method, p):
        releases[ph.kind] = releases.get(ph.kind, 0) + ph.rounds * ph.steps
    B, eta, lam, alpha, mu = p.clip, p.lr, p.ridge, p.damping, p.mu
    scale = {"avg": 2 * B * eta, "sgd": 2 * B, "newton": alpha * B / lam * (2 + B * B / lam)}
    k = len(releases)
    sigma = {kind: (scale[kind] / n * math.sqrt(k * T) / mu if math.isfinite(mu) else np.zeros_like(n))
             for kind, T in releases.items()}
    return OracleCalibration(sigma, releases)
