"""Fused compiled kernels (numba) for the clipped GLM gradient steps of the simulations.

Layout: rows-contiguous, features-first: ``XT`` (d, N), ``y`` and ``lim`` (N,) (``lim``:
the clip of row j's residual, ``B_c/||x_j||``), ``offsets`` (C + 1,): client
``c = r m + i`` owns columns ``offsets[c]:offsets[c + 1]``. Parameters are (C, d) per
client or (n_rep, d) global, sds (C,), noise (n_rep, K, m, d).

One pass per gradient step: chunks of `CHUNK` rows compute the linear predictor, the
residual ``b'(eta_j) - y_j`` clipped to ``[-lim_j, lim_j]`` (clipping ``r_j x_j`` to norm
B) and the sums of ``r_j x_j`` while in L1 cache; a chunk may span small clients and ends
where a client of `SPLIT_ROWS` rows or more ends. Local steps run on groups of at most
`GROUP_ROWS` rows (`client_groups`), all K steps of a group at once; server steps run
replicate by replicate. Chunks and groups depend only on a replicate's own sizes, so its
numbers do not depend on its block. Compilation: `fedgdp.core.compiled`.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.compiled import njit as _njit
from ..core.compiled import numba
from ..core.families import FAMILIES

_intrinsic = numba.extending.intrinsic

__all__ = ["CHUNK", "GROUP_ROWS", "MODEL_CODES", "client_groups", "gradients", "local_descent",
           "server_descent", "hessians"]

CHUNK = 256          # rows per pass (a few kB per array: stays in L1)
GROUP_ROWS = 4096    # rows of a group of clients in local steps (stays in L2)
SPLIT_ROWS = 64      # a chunk ends where a client with at least this many rows in it ends
#: The families' kernel codes (`fedgdp.core.families.Family.kernel`): the kernels compute the logistic
#: model's residuals and curvature where the code is ``LOGISTIC``, the Poisson model's otherwise
MODEL_CODES = {f.name: f.kernel for f in FAMILIES.values() if f.kernel is not None}
LOGISTIC = MODEL_CODES["logistic"]

# Cody-Waite reduction exp(x) = 2^n exp(r), |r| <= ln2/2, with ln2 split so that n*LN2_HI
# is exact; exp(r) by its Taylor polynomial of degree 13 (remainder < 1e-17 relative).
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10

_EXACT = {"contract"}                  # fused multiply-add only: elementwise loops
_SUMS = {"contract", "reassoc"}        # reductions may be reordered (vectorised sums)


# ----------------------------------------------------------------- chunk passes
# A chunk is the columns s:s+L of the block's arrays. Indices are cast to unsigned
# (``_u``): numba then drops its negative-index wraparound and the loops vectorise.
# Features are taken four at a time, so a pass reads and writes the chunk's buffer
# once per four features.
@_njit(_EXACT, inline="always")
def _u(i):
    return np.uint64(i)


@_intrinsic
def _as_float(typingctx, bits):
    """The float64 whose bit pattern is the int64 ``bits``."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@_njit(_EXACT, inline="always")
def _exp(x):
    """``exp(x)`` in a form the compiler vectorises: within a few ulp of the C library's
    exp for normal results (tested: 4 ulp), 0 below -745, inf above 709.78, NaN kept."""
    xc = min(max(x, -746.0), 710.0)
    n = math.floor(xc * _LOG2E + 0.5)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 + r * (1.0 + r * (1 / 2 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r * (
        1 / 720 + r * (1 / 5040 + r * (1 / 40320 + r * (1 / 362880 + r * (
            1 / 3628800 + r * (1 / 39916800 + r * (1 / 479001600 + r / 6227020800))))))))))))
    ni = np.int64(n)
    h = ni >> 1                            # 2^n as 2^h 2^(n-h): both factors normal
    v = p * _as_float((h + 1023) << 52) * _as_float((ni - h + 1023) << 52)
    return v if x == x else x


@_njit(_EXACT, inline="always")
def _clip(r, b):
    """r clipped to [-b, b], the compiled port of `fedgdp.core.privacy.clip_factors`
    (``tests/core/test_clip_ports.py``): ``_clip(r, b) x_j = min(1, clip_scale(B, d) / ||r x_j||) r x_j``.
    A non-finite residual becomes 0 (docs/methods.md §2); unclipped residuals keep NaN.
    """
    r = r if (r > -math.inf) and (r < math.inf) else 0.0
    r = b if r > b else r
    return -b if r < -b else r


@_njit(_EXACT)
def _eta_one(buf, XT, th, sign, s, L, ones):
    """``buf[:L] = sign * XT[:, s:s+L]' th``: the (signed) linear predictor, one parameter
    (``ones``: row 0 of XT is all ones, the intercept, and is not read: ``1.0 * t == t``)."""
    d = XT.shape[0]
    t = sign * th[0]
    if ones:
        for j in range(L):
            buf[_u(j)] = t
    else:
        for j in range(L):
            buf[_u(j)] = XT[0, _u(s + j)] * t
    k = 1
    while k + 4 <= d:
        t0, t1, t2, t3 = sign * th[k], sign * th[k + 1], sign * th[k + 2], sign * th[k + 3]
        for j in range(L):
            i = _u(s + j)
            buf[_u(j)] += (XT[k, i] * t0 + XT[k + 1, i] * t1) + (XT[k + 2, i] * t2 + XT[k + 3, i] * t3)
        k += 4
    while k < d:
        t = sign * th[k]
        for j in range(L):
            buf[_u(j)] += XT[k, _u(s + j)] * t
        k += 1


@_njit(_EXACT)
def _eta_rows(buf, XT, tb, s, L, ones):
    """``buf[j] = sum_k XT[k, s+j] tb[k, j]``: the linear predictor with each row's own
    (signed) parameter ``tb[:, j]`` (``ones``: as in `_eta_one`)."""
    d = XT.shape[0]
    if ones:
        for j in range(L):
            buf[_u(j)] = tb[0, _u(j)]
    else:
        for j in range(L):
            buf[_u(j)] = XT[0, _u(s + j)] * tb[0, _u(j)]
    k = 1
    while k + 4 <= d:
        for j in range(L):
            i, q = _u(s + j), _u(j)
            buf[q] += ((XT[k, i] * tb[k, q] + XT[k + 1, i] * tb[k + 1, q])
                       + (XT[k + 2, i] * tb[k + 2, q] + XT[k + 3, i] * tb[k + 3, q]))
        k += 4
    while k < d:
        for j in range(L):
            buf[_u(j)] += XT[k, _u(s + j)] * tb[k, _u(j)]
        k += 1


@_njit(_EXACT)
def _fill(tb, th, sign, a, b):
    """``tb[:, a:b] = sign * th``."""
    for k in range(tb.shape[0]):
        t = sign * th[k]
        for j in range(a, b):
            tb[k, _u(j)] = t


@_njit(_EXACT, inline="always")
def _predictor_sign(model):
    """The sign of the linear predictor `_residuals` takes: -1 (``-eta``) for the logistic model, 1 for Poisson."""
    return -1.0 if model == LOGISTIC else 1.0


@_njit(_EXACT)
def _residuals(buf, y, lim, s, L, model, clip):
    """``buf[:L]``: the signed linear predictor in, the (clipped) residual
    ``b'(eta) - y`` out. Logistic: buf holds ``-eta`` and ``b'(eta) = 1/(1 + exp(-eta))``;
    Poisson: buf holds ``eta`` and ``b'(eta) = exp(eta)``."""
    if model == LOGISTIC:
        if clip:
            for j in range(L):
                i = _u(s + j)
                buf[_u(j)] = _clip(1.0 / (1.0 + _exp(buf[_u(j)])) - y[i], lim[i])
        else:
            for j in range(L):
                buf[_u(j)] = 1.0 / (1.0 + _exp(buf[_u(j)])) - y[_u(s + j)]
    elif clip:
        for j in range(L):
            i = _u(s + j)
            buf[_u(j)] = _clip(_exp(buf[_u(j)]) - y[i], lim[i])
    else:
        for j in range(L):
            buf[_u(j)] = _exp(buf[_u(j)]) - y[_u(s + j)]


@_njit(_SUMS)
def _segment_sum(g, buf, XT, s, a, b, ones):
    """``g += XT[:, s+a:s+b] @ buf[a:b]`` (``ones``: as in `_eta_one`; the sums keep
    their four-feature blocks, so they add the same terms in the same order)."""
    d = XT.shape[0]
    k = 0
    if ones and d >= 4:
        a0 = a1 = a2 = a3 = 0.0
        for j in range(a, b):
            i, r = _u(s + j), buf[_u(j)]
            a0 += r
            a1 += r * XT[1, i]
            a2 += r * XT[2, i]
            a3 += r * XT[3, i]
        g[0] += a0
        g[1] += a1
        g[2] += a2
        g[3] += a3
        k = 4
    while k + 4 <= d:
        a0 = a1 = a2 = a3 = 0.0
        for j in range(a, b):
            i, r = _u(s + j), buf[_u(j)]
            a0 += r * XT[k, i]
            a1 += r * XT[k + 1, i]
            a2 += r * XT[k + 2, i]
            a3 += r * XT[k + 3, i]
        g[k] += a0
        g[k + 1] += a1
        g[k + 2] += a2
        g[k + 3] += a3
        k += 4
    while k < d:
        acc = 0.0
        for j in range(a, b):
            acc += buf[_u(j)] * XT[k, _u(s + j)]
        g[k] += acc
        k += 1


@_njit(_EXACT)
def _chunk_residuals(buf, tb, XT, y, lim, offsets, first, c1, theta, s, e, model, clip, ones):
    """The clipped residuals of rows ``s:e`` into ``buf``; client c has ``theta[c]``
    and ``first`` is the first client with rows in ``s:e``."""
    sign = _predictor_sign(model)
    if offsets[first + 1] >= e:                   # one client: one parameter
        _eta_one(buf, XT, theta[first], sign, s, e - s, ones)
    else:
        c = first
        while c < c1 and offsets[c] < e:
            _fill(tb, theta[c], sign, max(offsets[c], s) - s, min(offsets[c + 1], e) - s)
            c += 1
        _eta_rows(buf, XT, tb, s, e - s, ones)
    _residuals(buf, y, lim, s, e - s, model, clip)


@_njit(_EXACT)
def _group_gradients(g, XT, y, lim, offsets, c0, c1, theta, model, clip, buf, tb, ones):
    """``g[c] = mean_j clip(r_j x_j)`` at ``theta[c]`` for the clients ``c0 <= c < c1``
    (consecutive rows ``offsets[c0]:offsets[c1]``), chunk by chunk."""
    for c in range(c0, c1):
        for k in range(g.shape[1]):
            g[c, k] = 0.0
    S1 = offsets[c1]
    first = c0
    s = offsets[c0]
    while s < S1:
        while offsets[first + 1] <= s:            # first client with rows in [s, e)
            first += 1
        e = min(s + CHUNK, S1)
        if offsets[first + 1] < e and offsets[first + 1] - s >= SPLIT_ROWS:
            e = offsets[first + 1]                # end at the client's end: one parameter
        _chunk_residuals(buf, tb, XT, y, lim, offsets, first, c1, theta, s, e, model, clip, ones)
        c = first
        while c < c1 and offsets[c] < e:
            _segment_sum(g[c], buf, XT, s, max(offsets[c], s) - s, min(offsets[c + 1], e) - s, ones)
            c += 1
        s = e
    for c in range(c0, c1):
        n = offsets[c + 1] - offsets[c]
        for k in range(g.shape[1]):
            g[c, k] = g[c, k] / n


@_njit(_EXACT)
def _scratch(d):
    return np.empty(CHUNK), np.empty((d, CHUNK))


# ------------------------------------------------------------------ public kernels
def client_groups(sizes: np.ndarray, max_rows: int = GROUP_ROWS) -> np.ndarray:
    """Group boundaries (G + 1,) in flat client indices ``r m + i``, from 0 to ``n_rep m``: group q is
    clients ``groups[q]:groups[q+1]`` of one replicate, at most ``max_rows`` rows unless one client has more.

    Parameters
    ----------
    sizes : ndarray of int of shape (n_rep, m)
        Client sizes.
    max_rows : int
        The most rows of a group (unless one client has more).
    """
    n_rep, m = sizes.shape
    total = np.cumsum(sizes, axis=1)
    cuts = [0]
    for r in range(n_rep):
        start = 0
        for i in range(1, m):
            if total[r, i] - start > max_rows:
                cuts.append(r * m + i)
                start = total[r, i - 1]
        cuts.append((r + 1) * m)
    return np.array(cuts, dtype=np.int64)


@_njit(_EXACT)
def gradients(XT, y, lim, offsets, groups, theta, model, clip, out, ones=False):
    """Mean clipped gradient of every client at its own parameter, into ``out``.

    Parameters
    ----------
    XT, y, lim, offsets, groups : ndarray
        The layout (module docstring) and `client_groups`.
    theta : ndarray of shape (C, d)
        Each client's parameter.
    model : int
        `MODEL_CODES`.
    clip : bool
        Clip residuals to ``lim`` (False: non-private).
    out : ndarray of shape (C, d)
        Written in place.
    ones : bool
        Row 0 of XT is all ones (the intercept; then not read).
    """
    buf, tb = _scratch(XT.shape[0])
    for q in range(groups.shape[0] - 1):
        _group_gradients(out, XT, y, lim, offsets, groups[q], groups[q + 1], theta, model, clip,
                         buf, tb, ones)


@_njit(_EXACT)
def local_descent(XT, y, lim, offsets, groups, m, theta, K, eta, model, clip, sigma, Z, noisy, ones=False):
    """K noisy local steps of every client, in place (Algorithms 2-4):
    ``theta_c <- theta_c - eta * mean_j clip(g_j) + sigma_c Z[r, t, i]``.

    Parameters
    ----------
    XT, y, lim, offsets, groups : ndarray
        The layout (module docstring; ``lim`` read only when ``clip``) and `client_groups`.
    m : int
        Clients per replicate.
    theta : ndarray of shape (C, d)
        Each client's parameter, updated in place.
    K, eta
        Local steps and their size.
    model : int
        `MODEL_CODES`.
    clip : bool
        Clip residuals to ``lim`` (False: non-private).
    sigma : ndarray of shape (C,)
        Noise sds.
    Z : ndarray of shape (n_rep, K, m, d)
        Standard normals (read only when ``noisy``).
    noisy : bool
        Add the noise.
    ones : bool
        Row 0 of XT is all ones (the intercept), then not read: the same numbers.
    """
    C, d = theta.shape
    g = np.empty((C, d))
    buf, tb = _scratch(d)
    for q in range(groups.shape[0] - 1):
        c0, c1 = groups[q], groups[q + 1]
        r = c0 // m
        for t in range(K):
            _group_gradients(g, XT, y, lim, offsets, c0, c1, theta, model, clip, buf, tb, ones)
            for c in range(c0, c1):
                if noisy:               # the noise joins the step before the step meets theta
                    for k in range(d):
                        theta[c, k] += sigma[c] * Z[r, t, c - r * m, k] - eta * g[c, k]
                else:
                    for k in range(d):
                        theta[c, k] -= eta * g[c, k]


@_njit(_EXACT)
def server_descent(XT, y, lim, offsets, m, theta, wrow, w, K, eta, model, clip, sigma, Z, noisy, ones=False):
    """K server steps of every replicate, in place (Algorithms 1-2):
    ``theta_r <- theta_r - eta * sum_i w_ri (mean_j clip(g_j) + sigma_c Z[r, k, i])``.

    Parameters
    ----------
    XT, y, lim, offsets : ndarray
        The layout (module docstring; ``lim`` read only when ``clip``).
    m, K, eta, model, clip, sigma, Z, noisy, ones
        As in `local_descent` (K: server steps).
    theta : ndarray of shape (n_rep, d)
        Each replicate's global parameter, updated in place.
    wrow : ndarray of shape (N,)
        Each row's weight ``w_ri / n_i``.
    w : ndarray of shape (n_rep, m)
        Aggregation weights.
    """
    n_rep, d = theta.shape
    sign = _predictor_sign(model)
    total = np.empty(d)
    buf, tb = _scratch(d)
    for r in range(n_rep):
        S0, S1 = offsets[r * m], offsets[(r + 1) * m]
        for k in range(K):
            total[:] = 0.0
            for s in range(S0, S1, CHUNK):
                e = min(s + CHUNK, S1)
                _eta_one(buf, XT, theta[r], sign, s, e - s, ones)
                _residuals(buf, y, lim, s, e - s, model, clip)
                for j in range(e - s):
                    buf[_u(j)] *= wrow[_u(s + j)]
                _segment_sum(total, buf, XT, s, 0, e - s, ones)
            if noisy:
                for i in range(m):
                    c = r * m + i
                    for q in range(d):
                        total[q] += w[r, i] * (sigma[c] * Z[r, k, i, q])
            for q in range(d):
                theta[r, q] -= eta * total[q]


@_njit(_EXACT)
def hessians(XT, inv_norm, offsets, theta, model, bound, out):
    """Hessian ``mean_j v_j x_j x_j'`` of every client's loss, ``v_j = min(b''(eta_j), bound/||x_j||^2)``:
    the compiled port of `fedgdp.core.glm.GLM.clipped_hessian_rows` (``tests/simulation/test_kernels.py``);
    with a finite bound a non-finite weight is 0, so every per-sample Hessian has norm <= bound.

    Parameters
    ----------
    XT : ndarray of shape (d, N)
        All rows, features first.
    inv_norm : ndarray of shape (N,)
        ``1/||x_j||`` of each row.
    offsets : ndarray of int64 of shape (C + 1,)
        Client row offsets.
    theta : ndarray of shape (C, d)
        Each client's parameter.
    model : int
        `MODEL_CODES`.
    bound : float
        The per-sample Hessian clip ``H_c`` (inf: none).
    out : ndarray of shape (C, d, d)
        Written in place: each client's mean Hessian.
    """
    d = XT.shape[0]
    for c in range(theta.shape[0]):
        H = out[c]
        H[:, :] = 0.0
        th = theta[c]
        for j in range(offsets[c], offsets[c + 1]):
            e = 0.0
            for k in range(d):
                e += XT[k, j] * th[k]
            if model == LOGISTIC:
                p = 1.0 / (1.0 + math.exp(-e))
                v = p * (1.0 - p)
            else:
                v = math.exp(e)
            lim = bound * inv_norm[j] * inv_norm[j]
            v = lim if v > lim else v
            if bound < math.inf and not (v < math.inf):     # NaN or inf weight: clipped to zero
                v = 0.0
            for a in range(d):
                va = v * XT[a, j]
                for b in range(a + 1):
                    H[a, b] += va * XT[b, j]
        n = offsets[c + 1] - offsets[c]
        for a in range(d):
            for b in range(a + 1):
                H[a, b] = H[a, b] / n
                H[b, a] = H[a, b]
