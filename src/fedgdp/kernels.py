"""Fused compiled kernels (numba) for the clipped GLM gradient steps of the simulations.

Layout
------
The clients of a block of replicates are stored rows-contiguous and features-first:
``XT`` of shape ``(d, N)`` (N rows of all clients of all replicates), ``y`` and
``inv_norm`` (``1/||x_j||``) of shape ``(N,)``, and ``offsets`` of shape ``(C + 1,)``:
client ``c = r * m + i`` (replicate r, client i) owns columns
``offsets[c]:offsets[c + 1]``. Parameters are ``(C, d)`` per client or ``(R, d)``
global; clipping bounds ``bound`` and noise sds ``sigma`` are ``(C,)``; standard-normal
noise is ``(R, K, m, d)`` as drawn by the methods.

One pass per gradient step
--------------------------
A client's rows are processed in chunks of :data:`CHUNK` rows starting at its first
row: the linear predictor of the chunk (d vectorised multiply-adds per row), the
mean ``b'(eta)`` through a vectorisable ``exp`` (:func:`_exp_chunk`), the residual
``r_j = b'(eta_j) - y_j`` clipped to ``[-B/||x_j||, B/||x_j||]`` (clipping the
per-sample gradient ``r_j x_j`` to norm B), and the accumulation of ``r_j x_j``
while the chunk is still in the L1 cache. Every client is computed on its own, in
an order that depends only on its own rows, so a replicate's numbers do not depend
on which replicates share its block.

Local steps (Algorithms 2-4) run client by client, all K steps of a client before
the next client, so its rows stay in cache; server steps (Algorithms 1-2) run
replicate by replicate.

Compilation is cached on disk (``cache=True``: next to this file, or in the user's
cache directory, or ``NUMBA_CACHE_DIR``), so only the first process compiles; where
no cache location is writable the kernels compile in every process.
"""
from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["CHUNK", "MODEL_CODES", "gradients", "local_descent", "server_descent", "hessians"]

CHUNK = 256
MODEL_CODES = {"logistic": 0, "poisson": 1}

# Cody-Waite reduction exp(x) = 2^n exp(r), |r| <= ln2/2, with ln2 split so that n*LN2_HI
# is exact; exp(r) by its Taylor polynomial of degree 13 (remainder < 1e-17 relative).
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10

_EXACT = {"contract"}                  # fused multiply-add only: elementwise loops
_SUMS = {"contract", "reassoc"}        # reductions may be reordered (vectorised sums)


def _njit(fastmath):
    """``numba.njit`` with the on-disk cache, or without it where no cache location is
    writable (numba raises RuntimeError at decoration then)."""
    opts = dict(fastmath=fastmath, error_model="numpy", nogil=True)

    def wrap(func):
        try:
            return numba.njit(cache=True, **opts)(func)
        except RuntimeError:
            return numba.njit(cache=False, **opts)(func)
    return wrap


# ----------------------------------------------------------------- chunk passes
@_njit(_EXACT)
def _eta_chunk(buf, XT, th, sign, s, L):
    """``buf[:L] = sign * XT[:, s:s+L]' th``: the (signed) linear predictor of a chunk."""
    d = XT.shape[0]
    x = XT[0, s:s + L]
    t = sign * th[0]
    for j in range(L):
        buf[j] = x[j] * t
    for k in range(1, d):
        x = XT[k, s:s + L]
        t = sign * th[k]
        for j in range(L):
            buf[j] += x[j] * t


@_njit(_EXACT)
def _exp_chunk(buf, L, ia, ib):
    """``buf[:L] = exp(buf[:L])`` in a form the compiler vectorises (within 1 ulp of
    the C library's exp for normal results; inf above 709.78, NaN kept)."""
    for j in range(L):
        x = buf[j]
        xc = min(max(x, -746.0), 710.0)
        n = math.floor(xc * _LOG2E + 0.5)
        r = (xc - n * _LN2_HI) - n * _LN2_LO
        p = 1.0 + r * (1.0 + r * (1 / 2 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r * (
            1 / 720 + r * (1 / 5040 + r * (1 / 40320 + r * (1 / 362880 + r * (
                1 / 3628800 + r * (1 / 39916800 + r * (1 / 479001600 + r / 6227020800))))))))))))
        ni = np.int64(n)
        h = ni >> 1                       # 2^n as 2^h 2^(n-h): both factors normal
        ia[j] = (h + 1023) << 52
        ib[j] = (ni - h + 1023) << 52
        buf[j] = p if x == x else x
    fa = ia.view(np.float64)
    fb = ib.view(np.float64)
    for j in range(L):
        buf[j] = buf[j] * fa[j] * fb[j]


@_njit(_EXACT)
def _residual_chunk(buf, y, inv_norm, L, logistic, b, clip):
    """``buf[:L]``: ``exp(+-eta)`` in, the (clipped) residual ``b'(eta) - y`` out.

    Logistic: buf holds ``exp(-eta)`` and ``b'(eta) = 1/(1 + exp(-eta))``; Poisson:
    buf holds ``exp(eta) = b'(eta)``. Clipping keeps NaN (a diverged run stays NaN).
    """
    if logistic:
        for j in range(L):
            buf[j] = 1.0 / (1.0 + buf[j]) - y[j]
    else:
        for j in range(L):
            buf[j] = buf[j] - y[j]
    if clip:
        for j in range(L):
            lim = b * inv_norm[j]
            r = buf[j]
            r = lim if r > lim else r
            buf[j] = -lim if r < -lim else r


@_njit(_SUMS)
def _accumulate_chunk(g, buf, XT, s, L):
    """``g += XT[:, s:s+L] @ buf[:L]``."""
    d = XT.shape[0]
    for k in range(d):
        x = XT[k, s:s + L]
        acc = 0.0
        for j in range(L):
            acc += buf[j] * x[j]
        g[k] += acc


@_njit(_EXACT)
def _client_gradient(g, XT, y, inv_norm, s0, s1, th, model, b, clip, buf, ia, ib):
    """``g = mean_j clip(r_j x_j)`` over the rows ``s0:s1`` of one client at ``th``."""
    logistic = model == 0
    sign = -1.0 if logistic else 1.0
    g[:] = 0.0
    for s in range(s0, s1, CHUNK):
        L = min(s + CHUNK, s1) - s
        _eta_chunk(buf, XT, th, sign, s, L)
        _exp_chunk(buf, L, ia, ib)
        _residual_chunk(buf, y[s:s + L], inv_norm[s:s + L], L, logistic, b, clip)
        _accumulate_chunk(g, buf, XT, s, L)
    n = s1 - s0
    for k in range(g.shape[0]):
        g[k] = g[k] / n


@_njit(_EXACT)
def _scratch():
    return np.empty(CHUNK), np.empty(CHUNK, np.int64), np.empty(CHUNK, np.int64)


# ------------------------------------------------------------------ public kernels
@_njit(_EXACT)
def gradients(XT, y, inv_norm, offsets, theta, bound, model, clip, out):
    """Mean clipped gradient of every client at its own parameter.

    Parameters
    ----------
    XT : (d, N); y, inv_norm : (N,); offsets : (C + 1,) int64
    theta : (C, d)            parameter of each client
    bound : (C,)              clipping bound B of each client (ignored unless clip)
    model : int               :data:`MODEL_CODES`
    clip : bool
    out : (C, d)              written in place
    """
    buf, ia, ib = _scratch()
    for c in range(theta.shape[0]):
        _client_gradient(out[c], XT, y, inv_norm, offsets[c], offsets[c + 1], theta[c], model,
                         bound[c], clip, buf, ia, ib)


@_njit(_EXACT)
def local_descent(XT, y, inv_norm, offsets, m, theta, K, eta, bound, model, clip, sigma, Z, noisy):
    """K noisy local steps of every client, in place (Algorithms 2-4):
    ``theta_c <- theta_c - eta * mean_j clip(g_j) + sigma_c Z[r, t, i]``.

    theta : (C, d) with ``C = R m``; sigma, bound : (C,); Z : (R, K, m, d), read only
    when ``noisy``.
    """
    d = theta.shape[1]
    g = np.empty(d)
    buf, ia, ib = _scratch()
    for c in range(theta.shape[0]):
        r, i = c // m, c % m
        th = theta[c]
        for t in range(K):
            _client_gradient(g, XT, y, inv_norm, offsets[c], offsets[c + 1], th, model, bound[c], clip,
                             buf, ia, ib)
            for k in range(d):
                th[k] -= eta * g[k]
            if noisy:
                for k in range(d):
                    th[k] += sigma[c] * Z[r, t, i, k]


@_njit(_EXACT)
def server_descent(XT, y, inv_norm, offsets, m, theta, w, K, eta, bound, model, clip, sigma, Z, noisy):
    """K server steps of every replicate, in place (Algorithms 1-2):
    ``theta_r <- theta_r - eta * sum_i w_ri (mean_j clip(g_j) + sigma_c Z[r, k, i])``.

    theta : (R, d); w : (R, m); sigma, bound : (C,); Z : (R, K, m, d), read only when
    ``noisy``.
    """
    d = theta.shape[1]
    g = np.empty(d)
    total = np.empty(d)
    buf, ia, ib = _scratch()
    for r in range(theta.shape[0]):
        th = theta[r]
        for k in range(K):
            total[:] = 0.0
            for i in range(m):
                c = r * m + i
                _client_gradient(g, XT, y, inv_norm, offsets[c], offsets[c + 1], th, model, bound[c],
                                 clip, buf, ia, ib)
                if noisy:
                    for q in range(d):
                        g[q] += sigma[c] * Z[r, k, i, q]
                for q in range(d):
                    total[q] += w[r, i] * g[q]
            for q in range(d):
                th[q] -= eta * total[q]


@_njit(_EXACT)
def hessians(XT, inv_norm, offsets, theta, model, bound, out):
    """Hessian ``mean_j v_j x_j x_j'`` of every client's loss at its parameter, with the
    per-sample weight ``v_j = min(b''(eta_j), bound/||x_j||^2)`` (``bound = inf``: the
    plain Hessian). theta : (C, d); out : (C, d, d), written in place."""
    d = XT.shape[0]
    for c in range(theta.shape[0]):
        H = out[c]
        H[:, :] = 0.0
        th = theta[c]
        for j in range(offsets[c], offsets[c + 1]):
            e = 0.0
            for k in range(d):
                e += XT[k, j] * th[k]
            if model == 0:
                p = 1.0 / (1.0 + math.exp(-e))
                v = p * (1.0 - p)
            else:
                v = math.exp(e)
            lim = bound * inv_norm[j] * inv_norm[j]
            v = lim if v > lim else v
            for a in range(d):
                va = v * XT[a, j]
                for b in range(a + 1):
                    H[a, b] += va * XT[b, j]
        n = offsets[c + 1] - offsets[c]
        for a in range(d):
            for b in range(a + 1):
                H[a, b] = H[a, b] / n
                H[b, a] = H[a, b]
