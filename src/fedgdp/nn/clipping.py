"""Exact per-sample clipping of a CNN's gradient for a stack of clients, without
per-sample gradients of the fully connected layers (book-keeping clipping).

Conventions
-----------
``S`` clients are processed together, each with its own parameters (``name -> (S,
*shape)``; the clients of one FedAvg round) or one shared copy (``shared=True``;
FedSGD). Their images are padded to ``X (S, L, C, H, W)`` with a 0/1 ``mask (S, L)``
(`fedgdp.nn.train.ClientData.batch`). Inside, the conv activations are laid out
``(L, S C, H, W)``: client ``s``'s channels are a group of a grouped convolution
(``groups = S``), so one convolution serves every client; the fully connected layers
are batched matrix products ``(S, L, in) @ (S, in, out)``. With ``S = 1`` these are the
ordinary layers.

Method (docs/methods.md §6, "Exact per-sample clipping, fast"; why not opacus, likewise):
a Linear layer's per-sample gradient ``delta_j a_j'`` has squared norm ``||delta_j||^2
(||a_j||^2 + 1)`` and is never formed; a 3x3 conv's is formed for all images at once by a
grouped convolution. The clipped sum is each layer's gradient formula with ``delta_j``
scaled by ``c_j``: one forward and one backward pass (``tests/nn/test_nn_clipping.py``).

Non-finite rule: an image whose per-sample gradient has a non-finite squared norm (a
NaN or inf anywhere, or an entry whose square overflows the working precision) gets
``c_j = 0`` and contributes exactly zero (its rows are masked with ``torch.where``, so
``0 * inf`` never appears). Every image's contribution has norm at most ``B`` whatever
its pixels, which is all the sensitivity bound ``2B/n`` uses. Images do not interact in
these networks (no batch statistics), so a bad image cannot spoil another's gradient.

Clip margin (`clip_margin`): rounding must not lift a contribution above ``B``.
The squared norms are summed in float64 (each square rounded once in the working
precision, relative error at most ``u``), so the computed norm is within ``u/2 + (D +
16) u64`` of the norm of the working-precision entries (``D`` numbers per image,
``u64 = 2^-53``: a sum of ``D`` terms in any order is within ``(D - 1) u64`` of exact;
a square that underflows errs by at most ``2^-150``, negligible for ``B >=``
``fedgdp.nn.settings.CLIP_MIN``). The factor is ``c_j = min(1, (1 - kappa) B /
||g_j||)`` with ``kappa = 3 u + (D + 16) u64``, rounded *down* to the working
precision, and ``c_j g_j`` is formed with at most two roundings of ``u`` each (the
factor times ``delta_j``, then times ``a_j``), so ``||c_j g_j|| <= B`` exactly. In
float32 ``kappa`` is about ``1.8e-7`` (the float32 clip without it left a norm up to
``B (1 + 2.5e-7)``); in float64 it is below ``2e-10`` for the MNIST network.
"""
from __future__ import annotations

import torch
from torch.nn.grad import conv2d_weight

from ..core import privacy
from .models import convnet_forward, layer_names

__all__ = ["layer_names", "clip_margin", "clip_factors", "clipped_grad_sums", "head_grads", "floats_per_image"]


def floats_per_image(params: dict, image_shape: tuple) -> int:
    """Working memory of `clipped_grad_sums` per image, in numbers: every conv
    layer's output, its ReLU and gradient (3 C_out H W), its per-sample weight gradient
    (C_out C_in 9), and the Linear layers' inputs and outputs.

    Parameters
    ----------
    params : dict name -> Tensor
        The ConvNet's parameters, ``(*shape)`` or stacked ``(S, *shape)``.
    image_shape : tuple (C, H, W)
        The shape of one image.
    """
    _, H, W = image_shape
    total = 0
    for name in layer_names(params):
        w = params[f"{name}.weight"].shape[-4:] if name.startswith("convs.") else params[f"{name}.weight"].shape[-2:]
        if name.startswith("convs."):
            total += 3 * w[0] * H * W + w[0] * w[1] * 9
            H, W = H // 2, W // 2
        else:
            total += w[0] + w[1]
    return int(total)


def clip_margin(D: int, dtype: torch.dtype) -> float:
    """The clip margin ``kappa = 3 u + (D + 16) u64`` of the module docstring:
    `fedgdp.core.privacy.clip_margin` (the one definition) with ``u`` the unit roundoff
    of ``dtype`` (the precision ``c_j g_j`` is formed in), ``u64 = 2^-53``.

    Parameters
    ----------
    D : int
        Numbers per image (the parameters of one client's network, or the head's).
    dtype : torch.dtype
        The working precision of the per-sample gradients and of ``c_j g_j``.
    """
    return privacy.clip_margin(D, torch.finfo(dtype).eps / 2)


def clip_factors(sq: torch.Tensor, B: float, *, margin: float = 0.0,
                 dtype: torch.dtype | None = None) -> torch.Tensor:
    """Torch port of `fedgdp.core.privacy.clip_factors`: ``c_j = min(1, (1 - margin) B / sqrt(sq))`` in [0, 1],
    rounded down (never above its float64 value).

    0 where ``sq`` is not finite (the module's non-finite rule); 1 (or 0) when ``B`` is inf.

    Parameters
    ----------
    sq : torch.Tensor, any shape
        Squared per-sample gradient norms ``||g_j||^2`` (float64 for the clip margin's proof).
    B : float
        Clipping bound (may be inf).
    margin : float, default=0.0
        ``kappa`` of `clip_margin`.
    dtype : torch.dtype, optional
        The factors' dtype (default ``sq``'s).
    """
    dtype = sq.dtype if dtype is None else dtype
    finite = torch.isfinite(sq)
    if B == float("inf"):
        return finite.to(dtype)
    sq = sq.to(torch.float64)
    norm = torch.where(finite, sq, torch.zeros_like(sq)).sqrt()
    c64 = torch.clamp((1.0 - margin) * B / norm.clamp_min(1e-300), max=1.0)
    c = c64.to(dtype)
    if dtype != torch.float64:                      # round down: c never exceeds its float64 value
        c = torch.where(c.to(torch.float64) > c64, torch.nextafter(c, torch.zeros_like(c)), c)
    return torch.where(finite, c, torch.zeros_like(c))


def _stacked(params: dict, S: int, shared: bool) -> dict:
    """Every parameter as ``(S, *shape)`` (a broadcast view when shared)."""
    return {k: (v.detach().expand(S, *v.shape) if shared else v.detach()) for k, v in params.items()}


def _forward(P: dict, X: torch.Tensor):
    """Masked-loss inputs of a stack (`fedgdp.nn.models.convnet_forward`): the
    log-probabilities ``(S, L, classes)``, each layer's input ``a`` and output ``z``
    (conv: ``(L, S C, H, W)``; Linear: ``(S, L, features)``)."""
    record: list = []
    out = convnet_forward(P, X, stacked=True, record=record)
    return out, [a for a, _ in record], [z for _, z in record]


def _conv_per_sample(a: torch.Tensor, d: torch.Tensor, S: int, w_shape) -> torch.Tensor:
    """Per-image weight gradients of a grouped conv, ``(L, S, C_out, C_in 9)``."""
    L, _, H, W = a.shape
    c_out, c_in = w_shape[1], w_shape[2]
    g = conv2d_weight(a.reshape(1, -1, H, W), (L * S * c_out, c_in, 3, 3), d.reshape(1, -1, *d.shape[2:]),
                      padding=1, groups=L * S)
    return g.view(L, S, c_out, c_in * 9)


def clipped_grad_sums(params: dict, X: torch.Tensor, Y: torch.Tensor, mask: torch.Tensor, B: float,
                      *, shared: bool = False) -> tuple[dict, torch.Tensor]:
    """``sum_j mask_j c_j g_j`` ``name -> (S, *shape)`` of every client of a stack (divided by ``mask.sum(1)``:
    the clipped mean gradients), and the factors ``mask c`` (S, L) (with the clip margin, `clip_margin`; an
    image is clipped where ``factors < mask``).

    Parameters
    ----------
    params : dict name -> Tensor
        The ConvNet's parameters (``convs.i.*``, ``fc.*``, ``head.*``), ``(S, *shape)``,
        or ``(*shape)`` with ``shared=True``.
    X : Tensor of shape (S, L, C, H, W)
    Y : Tensor of shape (S, L)
        Labels (int64).
    mask : Tensor of shape (S, L)
        1 for an image, 0 for a padding row (which contributes nothing).
    B : float
        Clipping bound; ``inf``: the plain sums (still with the non-finite rule).
    shared : bool
        One copy of the parameters ``(*shape)`` for every client (FedSGD), not a stack.
    """
    S, L = Y.shape
    names = layer_names(params)
    P = _stacked(params, S, shared)
    with torch.enable_grad():
        out, acts, outs = _forward(P, X.detach().requires_grad_(True))
        nll = -out.gather(2, Y[:, :, None]).squeeze(2)
        loss = torch.where(mask > 0, nll, torch.zeros_like(nll)).sum()
        deltas = torch.autograd.grad(loss, outs)
    f64 = torch.float64                     # squared norms summed in float64 (the clip margin)
    sq = torch.zeros((S, L), dtype=f64, device=X.device)
    pieces = []
    for name, a, d in zip(names, acts, deltas):
        a = a.detach()
        if name.startswith("convs."):
            G = _conv_per_sample(a, d, S, P[f"{name}.weight"].shape)            # (L, S, C_out, 9 C_in)
            gb = d.sum((2, 3)).view(L, S, -1)                                   # (L, S, C_out)
            sq = sq + (G.square().sum((2, 3), dtype=f64) + gb.square().sum(2, dtype=f64)).T
            pieces.append((G, gb))
        else:
            sq = sq + d.square().sum(2, dtype=f64) * (a.square().sum(2, dtype=f64) + 1)
            pieces.append((a, d))
    D = sum(v[0].numel() for v in P.values())
    c = clip_factors(sq, B, margin=clip_margin(D, X.dtype), dtype=X.dtype) * mask
    ok = c > 0
    total = {}
    for name, (u, v) in zip(names, pieces):
        shape = P[f"{name}.weight"].shape
        if name.startswith("convs."):
            keep = ok.T[:, :, None, None]
            G = torch.where(keep, u, torch.zeros_like(u))
            total[f"{name}.weight"] = torch.einsum("sl,lsck->sck", c, G).reshape(shape)
            gb = torch.where(keep[..., 0], v, torch.zeros_like(v))
            total[f"{name}.bias"] = torch.einsum("sl,lsc->sc", c, gb)
        else:
            A = torch.where(ok[:, :, None], u, torch.zeros_like(u))
            cD = torch.where(ok[:, :, None], v * c[:, :, None], torch.zeros_like(v))
            total[f"{name}.weight"] = torch.bmm(cD.transpose(1, 2), A)
            total[f"{name}.bias"] = cD.sum(1)
    return total, c


def head_grads(params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample gradients of the NLL loss in the head's parameters, shape ``(n, D)``.

    ``D = classes (hidden + 1)`` laid out as ``[weight.flatten(), bias]``; the gradient
    of image ``j`` is ``(p_j - e_{y_j}) [z_j, 1]`` with penultimate activations ``z_j``
    and predicted probabilities ``p_j`` (the body is held at ``params``).

    Parameters
    ----------
    params : dict name -> Tensor
        The ConvNet's parameters, ``(*shape)`` (one copy).
    x : torch.Tensor of shape (n, C, H, W)
        Images.
    y : torch.Tensor of shape (n,)
        Labels (int64).
    """
    P = _stacked(params, 1, True)
    with torch.no_grad():
        out, acts, _ = _forward(P, x[None])
        r = out[0].exp()
        r[torch.arange(y.shape[0], device=y.device), y] -= 1.0                      # (n, classes)
        z = acts[-1][0]                                                         # (n, hidden)
        return torch.cat([(r[:, :, None] * z[:, None, :]).flatten(1), r], dim=1)
