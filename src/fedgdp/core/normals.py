"""Standard normal draws: numpy's own numbers, drawn by compiled code.

``standard_normal(rng, shape)`` is exactly ``rng.standard_normal(shape)`` (same numbers,
same generator state), about three times faster for large draws through numba's port of
numpy's ziggurat (docs/ARCHITECTURE.md, "The fast path"; ``scripts/profile_draws.py``).
Each process checks the identity once (`CHECK_DRAWS`) and falls back to numpy where an
installation differs; draws under `COMPILED_FROM` numbers go to numpy. numba's
``Generator.poisson`` is not used: it truncates where numpy floors.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["standard_normal", "COMPILED_FROM", "CHECK_DRAWS"]

#: The smallest draw handed to compiled code (below it numpy draws: same numbers).
COMPILED_FROM = 4096
#: Numbers drawn both ways, once per process, before the compiled loop is trusted
#: (about 30 tail and 1,000 wedge samples of the ziggurat; under a millisecond).
CHECK_DRAWS = 100_000

_FILL: list = []


def _filler():
    """The compiled ``out[i] = rng.standard_normal()`` loop, or None when its `CHECK_DRAWS`
    numbers (tail and wedge samples included) differ from numpy's here (with a warning).
    """
    if not _FILL:
        from .compiled import njit

        @njit(False)
        def fill(rng, out):
            for i in range(out.shape[0]):
                out[i] = rng.standard_normal()

        mine, ref = np.empty(CHECK_DRAWS), np.random.default_rng(20261201).standard_normal(CHECK_DRAWS)
        fill(np.random.default_rng(20261201), mine)
        if not np.array_equal(mine, ref):
            import warnings

            warnings.warn("fedgdp.core.normals: numba's standard_normal differs from numpy's in this installation; "
                          "numpy draws the normals (slower, the same numbers)", RuntimeWarning, stacklevel=3)
            fill = None
        _FILL.append(fill)
    return _FILL[0]


def standard_normal(rng: np.random.Generator, shape) -> np.ndarray:
    """``rng.standard_normal(shape)``: the same numbers in C order, the generator advanced alike.

    Parameters
    ----------
    rng : numpy.random.Generator
        The generator.
    shape : int or tuple of int
        The shape of the draw.
    """
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = math.prod(dims)
    if n < COMPILED_FROM:
        return rng.standard_normal(dims)
    fill = _filler()
    if fill is None:
        return rng.standard_normal(dims)
    out = np.empty(n)
    fill(rng, out)
    return out.reshape(dims)
