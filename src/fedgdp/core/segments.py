"""Clients whose rows are consecutive in one array (the estimator's design, sorted by client once): the array
without a copy, runs of clients computed together, and per-client products in one pass (issue 62;
docs/ARCHITECTURE.md). The per-client formulas stay with their methods; these only group the rows."""
from __future__ import annotations

import numpy as np

__all__ = ["GROUP_ROWS", "stacked", "client_groups", "grams", "cross_means", "by_blocks"]

#: Consecutive clients are computed together up to this many rows (a bounded temporary; a larger client alone)
GROUP_ROWS = 1 << 16


def stacked(blocks: list) -> np.ndarray:
    """The row blocks as one array: a read-only view where they are consecutive slices of one array
    (the estimator's clients, `fedgdp.api.estimator.client_blocks`), else their stacked copy.

    Parameters
    ----------
    blocks : list of ndarray
        The clients' rows, in order.
    """
    first = blocks[0]
    base, row = first.base, first.strides[0] if first.ndim else 0
    at, total, ok = first.__array_interface__["data"][0], 0, base is not None and row > 0
    for b in blocks:
        ok = ok and b.base is base and b.flags.c_contiguous and b.strides == first.strides \
            and b.dtype == first.dtype and b.shape[1:] == first.shape[1:] \
            and b.__array_interface__["data"][0] == at + total * row
        if not ok:
            break
        total += b.shape[0]
    if ok:
        return np.lib.stride_tricks.as_strided(first, (total,) + first.shape[1:], first.strides, writeable=False)
    return np.concatenate(blocks)


def client_groups(sizes) -> list[tuple[int, int, np.ndarray]]:
    """Runs of consecutive clients of at most `GROUP_ROWS` rows together (one client may exceed it):
    (first row, end row, each client's end row counted from the first).

    Parameters
    ----------
    sizes : ndarray of shape (m,)
        Rows per client, in order.
    """
    ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
    out, i, lo = [], 0, 0
    while i < len(ends):
        j = max(int(np.searchsorted(ends, lo + GROUP_ROWS, side="right")), i + 1)
        out.append((lo, int(ends[j - 1]), ends[i:j] - lo))
        i, lo = j, int(ends[j - 1])
    return out


def grams(A: np.ndarray, ends, c: np.ndarray | None = None) -> np.ndarray:
    """Each client's ``mean_j c_j a_j a_j'`` (clients, d, d) over its consecutive rows of A (``c``: ones).

    Parameters
    ----------
    A : ndarray of shape (n, d)
    ends : sequence of int
        Each client's end row in A.
    c : ndarray of shape (n,) or None
    """
    out, lo = np.empty((len(ends), A.shape[1], A.shape[1])), 0
    for i, hi in enumerate(ends):
        Ai = A[lo:hi]
        out[i] = (Ai if c is None else Ai * c[lo:hi, None]).T @ Ai / Ai.shape[0]
        lo = hi
    return out


def cross_means(A: np.ndarray, R: np.ndarray, ends) -> np.ndarray:
    """Each client's ``mean_j a_j r_j'`` (clients, d, k) over its consecutive rows.

    Parameters
    ----------
    A, R : ndarray of shapes (n, d) and (n, k)
    ends : sequence of int
        Each client's end row.
    """
    out, lo = np.empty((len(ends), A.shape[1], R.shape[1])), 0
    for i, hi in enumerate(ends):
        out[i] = A[lo:hi].T @ R[lo:hi] / (hi - lo)
        lo = hi
    return out


def by_blocks(f, X: np.ndarray, rows: int | None = None) -> np.ndarray:
    """``f(X)`` for a row-wise ``f`` (one value per row), computed `GROUP_ROWS` rows at a time: the same values,
    with temporaries of a block's size, not X's (a fresh large block costs its page faults again).

    Parameters
    ----------
    f : callable
        ``(n, ...) -> (n,)``, each row's value from that row alone (e.g. `fedgdp.core.privacy.row_norms`).
    X : ndarray of shape (n, ...)
    rows : int or None
        Rows a block (None: `GROUP_ROWS`).
    """
    step = GROUP_ROWS if rows is None else rows
    if X.shape[0] <= step:
        return f(X)
    return np.concatenate([f(X[lo:lo + step]) for lo in range(0, X.shape[0], step)])

