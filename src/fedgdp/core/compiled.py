"""The package's one numba set-up: the import and ``njit`` with the on-disk cache.

Used by the simulation kernels (`fedgdp.simulation.kernels`) and the normal draws
(`fedgdp.core.normals`). Compilation is cached on disk (``cache=True``: next to the
compiled module, else in the user's cache directory, or in ``NUMBA_CACHE_DIR``), so only
the first process compiles; where no cache location is writable the functions compile in
every process, with one warning.
"""
from __future__ import annotations

import sys

__all__ = ["numba", "njit"]


def _import_numba():
    """Import numba and its array typing without letting it import ``scipy.linalg``.

    numba's first compile or cache load imports ``numba.np.arraymath``, which imports
    ``scipy.linalg`` (when scipy is installed) only to see whether BLAS is there for
    ``np.cov``-style inner products; that import costs a process about 0.15 CPU-s
    (half as much as importing numba). The package's compiled code uses no BLAS, so unless
    scipy.linalg is already loaded the check fails fast (numba then uses its plain loop
    there; ``np.dot`` in compiled code still finds BLAS later, as it checks again).
    """
    import numba

    if "scipy.linalg" not in sys.modules and "numba.np.arraymath" not in sys.modules:
        sys.modules["scipy.linalg.cython_blas"] = None      # makes the import fail at once
        try:
            import numba.np.arraymath  # noqa: F401
        finally:
            del sys.modules["scipy.linalg.cython_blas"]
    return numba


numba = _import_numba()


def njit(fastmath, inline="never"):
    """``numba.njit`` with the on-disk cache, or without it where no cache location is
    writable (numba raises RuntimeError at decoration then).

    Parameters
    ----------
    fastmath : bool or set of str
        numba's ``fastmath`` (the package passes the flags it allows: ``{"contract"}`` for
        elementwise loops, ``{"contract", "reassoc"}`` for sums).
    inline : str
        numba's ``inline`` (``"always"`` for small helpers).

    Returns
    -------
    callable
        The decorator.
    """
    opts = dict(fastmath=fastmath, error_model="numpy", nogil=True, inline=inline)

    def wrap(func):
        try:
            return numba.njit(cache=True, **opts)(func)
        except RuntimeError:
            _warn_no_cache()
            return numba.njit(cache=False, **opts)(func)
    return wrap


_WARNED: list = []


def _warn_no_cache():
    if not _WARNED:
        _WARNED.append(True)
        import warnings

        warnings.warn("fedgdp: no writable numba cache location (package directory or ~/.cache/numba); "
                      "the compiled kernels compile in every process (seconds each); "
                      "set NUMBA_CACHE_DIR to a writable directory", RuntimeWarning, stacklevel=3)
