"""Standard normal draws: numpy's own numbers, drawn by compiled code.

``standard_normal(rng, shape)`` returns exactly ``rng.standard_normal(shape)`` (the same
numbers, and the generator left in the same state), about three times faster for large
draws: numba's ``Generator.standard_normal`` is a port of numpy's 256-step ziggurat that
reads the same bit generator, and in a compiled loop it costs about 2.3 ns a draw against
numpy's 7.7 (``python scripts/profile_draws.py``). Every normal of the simulations (the
covariates, the privacy noise) and of the real-data fits' noise is drawn here; the tests
check the identity on millions of draws, tail and wedge samples included
(``tests/test_normals.py``).

Small draws (fewer than :data:`COMPILED_FROM` numbers) go to numpy itself: handing the
generator to compiled code costs a few microseconds a call. numba's ``Generator.poisson``
is not used: its PTRS branch (means >= 10) truncates where numpy floors, so its counts
differ from numpy's.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["standard_normal", "COMPILED_FROM"]

#: The smallest draw handed to compiled code (below it numpy draws: same numbers).
COMPILED_FROM = 4096

_FILL: list = []


def _filler():
    """The compiled ``out[i] = rng.standard_normal()`` loop (compiled, or loaded from the
    disk cache, on first use)."""
    if not _FILL:
        from .compiled import njit

        @njit(False)
        def fill(rng, out):
            for i in range(out.shape[0]):
                out[i] = rng.standard_normal()

        _FILL.append(fill)
    return _FILL[0]


def standard_normal(rng: np.random.Generator, shape) -> np.ndarray:
    """``rng.standard_normal(shape)``, the same numbers, drawn faster when there are many.

    Parameters
    ----------
    rng : numpy.random.Generator
        The generator (advanced as by numpy's own draw).
    shape : int or tuple of int
        The shape of the draw.

    Returns
    -------
    ndarray of float64, shape ``shape``
        Standard normals, in numpy's order (C order).
    """
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = math.prod(dims)
    if n < COMPILED_FROM:
        return rng.standard_normal(dims)
    out = np.empty(n)
    _filler()(rng, out)
    return out.reshape(dims)
