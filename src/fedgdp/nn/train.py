"""Private federated training of a CNN: per-sample clipping, noise, the four methods.

Conventions
-----------
A model's parameters travel as a dict ``name -> tensor`` (``dict(model.named_parameters())``
detached) and are evaluated with ``torch.func.functional_call``; per-sample gradients
are ``torch.func.vmap`` over ``torch.func.grad`` of the one-image loss, so a client's
per-sample gradients have shapes ``(n, *param.shape)``. The head-only Newton step
works on the flattened last layer, ``D = classes * (hidden + 1)`` numbers laid out as
``[head.weight.flatten(), head.bias]``; its per-sample gradients are ``(n, D)``.

Speed: for small networks the clients drawn in a round are trained together. Their
images are padded to ``(S, L, C, H, W)`` with a 0/1 mask (:meth:`ClientData.batch`),
their models stacked to ``(S, *shape)``, and :func:`batched_clipped_mean_grads` vmaps
over clients and then over images; it equals :func:`clipped_mean_grad` client by
client (tested). :func:`round_grads` picks the batched path when the round's
per-sample gradients fit in ``MAX_FLOATS`` numbers (digits: 4.5x faster), else loops
over clients (MNIST-sized networks: the nested vmap is 2x slower there on a CPU).

Randomness comes in as arguments: a ``numpy.random.Generator`` draws the clients of
every round and a ``torch.Generator`` (on the training device) the Gaussian noise.
The schedules and noise sds come from :mod:`fedgdp.nn.calibration`, where the
privacy calibration is explained.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F

from .. import privacy
from .calibration import Calibration, schedule
from .models import HEAD

__all__ = ["resolve_device", "ClientData", "per_sample_grads", "clipped_mean_grad", "batched_clipped_mean_grads",
           "round_grads",
           "head_per_sample_grads", "newton_direction", "head_newton_step", "sample_clients",
           "train", "evaluate", "TrainInfo", "head_vector", "set_head_vector"]

MAX_FLOATS = 1 << 25       # per-sample gradient floats held at once (128 MiB in float32)


def resolve_device(spec: str | None = "auto") -> torch.device:
    """``auto``: CUDA when available, else CPU; anything else is passed to torch.device."""
    if spec in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(spec)
    except RuntimeError:
        raise ValueError(f"bad device {spec!r}: use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {spec!r} requested but CUDA is not available")
    return dev


@dataclass
class ClientData:
    """Training images of the m clients, on the training device.

    Attributes
    ----------
    x : list of Tensor, each (n_i, C, H, W)
    y : list of Tensor, each (n_i,)
    n : ndarray, shape (m,)
    """

    x: list
    y: list
    n: np.ndarray = field(init=False)

    def __post_init__(self):
        self.n = np.array([int(t.shape[0]) for t in self.y], dtype=np.int64)

    @property
    def m(self) -> int:
        return len(self.y)

    def batch(self, clients) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Padded images ``(S, L, C, H, W)``, labels ``(S, L)`` and a 0/1 mask ``(S, L)``
        of the given clients; ``L`` is their largest size (padding rows are zeros)."""
        from torch.nn.utils.rnn import pad_sequence

        xs = [self.x[i] for i in clients]
        ys = [self.y[i] for i in clients]
        X = pad_sequence(xs, batch_first=True)
        Y = pad_sequence(ys, batch_first=True)
        mask = pad_sequence([torch.ones(len(t), dtype=X.dtype, device=X.device) for t in ys], batch_first=True)
        return X, Y, mask


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
        factor = torch.clamp(B / sq.sqrt().clamp_min(1e-30), max=1.0)
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
        factor = torch.clamp(B / norm.clamp_min(1e-30), max=1.0) * w
        clipped += int(((norm > B) & (w > 0)).sum())
        for k, v in g.items():
            total[k] += (factor[:, :, None] * v.flatten(2)).sum(1).view_as(total[k])
    return {k: v / n.view(S, *[1] * (v.dim() - 1)) for k, v in total.items()}, clipped


def round_grads(model, params: dict, clients: "ClientData", S, B: float, *, shared: bool = False,
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
def head_vector(params: dict) -> torch.Tensor:
    """The head's parameters as one vector ``[weight.flatten(), bias]``, shape (D,)."""
    return torch.cat([params[f"{HEAD}.weight"].flatten(), params[f"{HEAD}.bias"]])


def set_head_vector(params: dict, vec: torch.Tensor) -> dict:
    """A copy of ``params`` with the head replaced by ``vec`` (layout of :func:`head_vector`)."""
    w = params[f"{HEAD}.weight"]
    out = dict(params)
    out[f"{HEAD}.weight"] = vec[:w.numel()].reshape(w.shape).to(w.dtype)
    out[f"{HEAD}.bias"] = vec[w.numel():].to(w.dtype)
    return out


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


def newton_direction(G: torch.Tensor, lam: float) -> torch.Tensor:
    """``(h + lam I)^{-1} gbar`` with ``h = G'G/n``, ``gbar = G'1/n``, in float64.

    ``G`` is ``(n, D)``. When ``n < D`` the Woodbury identity
    ``(lam I + G'G/n)^{-1} = (I - G'(n lam I + G G')^{-1} G) / lam`` solves an
    ``n x n`` system instead of the ``D x D`` one.
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
        factor = torch.clamp(B / norms.clamp_min(1e-30), max=1.0)
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


def train(method: str, model, params0: dict, clients: ClientData, p: dict, cal: Calibration,
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
    p : dict
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
    eta, slr, B = p["lr"], p["server_lr"], p["clip"]
    B = B if privacy.clips(p["mu"]) else float("inf")
    m = clients.m
    n = clients.n
    info = TrainInfo(releases={k: np.zeros(m, dtype=np.int64) for k in cal.releases})
    for phase in schedule(method, p):
        for _ in range(phase.rounds):
            S = sample_clients(rng, m, p["q"])
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
                                            lam=p["ridge"], alpha=p["damping"])
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


@torch.no_grad()
def evaluate(model, params: dict, x: torch.Tensor, y: torch.Tensor, *, batch: int = 2000) -> tuple[float, float]:
    """Accuracy and mean NLL loss of ``params`` on ``(x, y)``."""
    if y.shape[0] == 0:
        return float("nan"), float("nan")
    correct, loss = 0, 0.0
    for s in range(0, int(y.shape[0]), batch):
        out = functional_call(model, params, (x[s:s + batch],))
        loss += float(F.nll_loss(out, y[s:s + batch], reduction="sum"))
        correct += int((out.argmax(1) == y[s:s + batch]).sum())
    return correct / int(y.shape[0]), loss / int(y.shape[0])
