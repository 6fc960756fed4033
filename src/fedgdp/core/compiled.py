"""The package's one numba set-up: the import and ``njit`` with the on-disk cache (or
``NUMBA_CACHE_DIR``), so only the first process compiles; where no cache location is
writable the functions compile in every process, with one warning.
"""
from __future__ import annotations

import sys

__all__ = ["numba", "njit"]


def _import_numba():
    """Import numba without letting it import ``scipy.linalg`` for a BLAS probe the package's
    compiled code does not need (about 0.15 CPU-s a process; docs/ARCHITECTURE.md, "The fast path").
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
    """The ``numba.njit`` decorator with the on-disk cache, or without it where no cache
    location is writable.

    Parameters
    ----------
    fastmath : bool or set of str
        numba's ``fastmath`` (``{"contract"}`` for elementwise loops, ``{"contract", "reassoc"}``
        for sums).
    inline : str
        numba's ``inline`` (``"always"`` for small helpers).
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
