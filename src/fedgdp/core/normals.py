"""Standard normal draws: numpy's own numbers, drawn by compiled code.

``standard_normal(rng, shape)`` returns exactly ``rng.standard_normal(shape)`` (the same
numbers, and the generator left in the same state), about three times faster for large
draws: numba's ``Generator.standard_normal`` is a port of numpy's 256-step ziggurat that
reads the same bit generator, and in a compiled loop it costs 2.2-3.6 ns a draw against
numpy's 8.0-8.7 on the runs' shapes (``python scripts/profile_draws.py``). Every normal of the simulations (the
covariates, the privacy noise) and of the real-data fits' noise is drawn here; the tests
check the identity on millions of draws, tail and wedge samples included
(``tests/test_normals.py``), and every process checks it once on first use
(`CHECK_DRAWS`), falling back to numpy where an installation differs.

Small draws (fewer than `COMPILED_FROM` numbers) go to numpy itself: handing the
generator to compiled code costs a few microseconds a call. numba's ``Generator.poisson``
is not used: its PTRS branch (means >= 10) truncates where numpy floors, so its counts
differ from numpy's.
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
    """The compiled ``out[i] = rng.standard_normal()`` loop (compiled, or loaded from the
    disk cache, on first use), or None when it does not reproduce numpy here.

    On first use it draws `CHECK_DRAWS` numbers both ways from one seed (tail and
    wedge samples included) and keeps the compiled loop only if they are identical, so a
    numba or numpy release whose ziggurats differ falls back to numpy (with a warning)
    instead of changing a number.
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
    fill = _filler()
    if fill is None:
        return rng.standard_normal(dims)
    out = np.empty(n)
    fill(rng, out)
    return out.reshape(dims)
