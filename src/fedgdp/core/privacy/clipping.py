"""Per-sample clipping, ``g min(1, B/||g||)``, to norm <= B in float64 arithmetic (docs/methods.md §2)."""
from __future__ import annotations

import numpy as np

#: The unit roundoff of float64, ``2^-53``: the clip margin's unit.
U64 = 2.0 ** -53
#: The margin's slack beyond one ``U64`` per number (the norm's rounding, ``(D/2 + 8) U64``, and five more).
CLIP_SLACK = 16
#: Roundings of ``c_j g_j`` counted in a working precision other than float64 (the CNNs' torch port).
CLIP_WORK_ROUNDINGS = 3
#: The smallest normal float64; a smaller clip factor is rounded towards zero.
TINY64 = float(np.finfo(np.float64).tiny)


def row_norms(X: np.ndarray, plain: np.ndarray | None = None) -> np.ndarray:
    """L2 norm of each row of ``X``, overflow-free: the plain norm where finite and normal, else rescaled rows.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The rows (a non-finite entry gives norm inf or NaN).
    plain : ndarray of shape (n,) or None
        The caller's plain norms, used where finite and normal.
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


def clip_margin(D: int, unit: float = 0.0) -> float:
    """The clip margin ``kappa = (D + CLIP_SLACK) 2^-53 + CLIP_WORK_ROUNDINGS unit``, every rounding of a clip.

    Parameters
    ----------
    D : int
        Numbers per record's gradient: ``d`` for ``r_j x_j``, ``d k`` for ``x_j r_j'``.
    unit : float, default=0.0
        Unit roundoff of a coarser working precision of ``c_j g_j`` (torch ports).
    """
    return CLIP_WORK_ROUNDINGS * unit + (int(D) + CLIP_SLACK) * U64


def round_down_subnormal(q):
    """``q``, its subnormal entries one step towards zero (so ``RN(s / N) <= s / N`` there).

    Parameters
    ----------
    q : ndarray
    """
    return np.where(q < TINY64, np.nextafter(q, 0.0), q)


def clip_scale(B, D: int, unit: float = 0.0):
    """The norm clipped gradients are scaled to, ``(1 - clip_margin(D, unit)) B``, shaped as ``B``.

    Parameters
    ----------
    B : float or ndarray
    D, unit : int, float
        `clip_margin`'s arguments.
    """
    return (1.0 - clip_margin(D, unit)) * B


def clip_factors(norms: np.ndarray, B: float, D: int, *, unit: float = 0.0) -> np.ndarray:
    """The reference clip factors ``min(1, clip_scale(B, D)/||g_j||)``, shaped as ``norms``; 0 for a non-finite norm.

    The one clipping rule; its ports are held to it by ``tests/core/test_clip_ports.py``.

    Parameters
    ----------
    norms : ndarray
        Per-sample gradient norms (`row_norms`, or a product of two).
    B : float
    D, unit : int, float
        `clip_margin`'s arguments.
    """
    scale = clip_scale(B, D, unit)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        factor = round_down_subnormal(np.where(norms > scale, scale / norms, 1.0))
    return np.where(np.isfinite(norms), factor, 0.0)


def clip_rows(G: np.ndarray, B: float) -> np.ndarray:
    """Clip each row of ``G`` to norm at most ``B`` by `clip_factors` (a non-finite row becomes zero).

    Parameters
    ----------
    G : ndarray of shape (n, d)
        Per-sample gradients.
    B : float
    """
    if not np.isfinite(B):
        return G
    factor = clip_factors(row_norms(G), B, G.shape[-1])[..., None]
    with np.errstate(invalid="ignore"):
        return np.where(factor > 0, G * factor, 0.0)
