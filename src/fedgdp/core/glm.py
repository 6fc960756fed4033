"""Generalised linear models with canonical link: loss, gradients, Hessians.

Conventions
-----------
One class, `GLM`, writes the loss and its derivatives once for every family
(`Logistic`, `Poisson`, `Multinomial`); a family supplies only
its own pieces. Every method takes one client's (or one pooled) data:

- ``X``: design, shape ``(n, d)`` (samples, then features); column 0 is the
  intercept (paper sections 4.1 and 5.1).
- ``theta``: coefficients, shape ``(d, k)``, one column per output. The
  single-output families (logistic, Poisson; ``k = 1``) also take a coefficient
  vector ``(d,)``, as the simulations do; `Multinomial` takes ``(d, C)``
  for ``C`` classes.
- ``Y``: responses in the shape of the scores: ``(n,)`` with a vector ``theta``,
  ``(n, k)`` with a matrix: one column of 0/1 labels or counts, or one-hot rows
  (`GLM.targets` builds it from labels).
- ``S = X @ theta``: scores (linear predictors ``eta``), ``(n, k)`` or ``(n,)``.
- ``P = mean(S)``: the fitted mean ``b'(S)`` (probabilities for the logistic and
  softmax families), the shape of ``S``; residuals ``R = P - Y``.

Results keep the caller's shapes: with a vector ``theta`` the output axis is
dropped (gradient ``(d,)``, residuals ``(n,)``, per-sample gradients ``(n, d)``).
Flattened parameters (Hessians, linear solves) use the row-major order of
``(d, k)``: entry ``(a, c)`` is index ``a * k + c``, and a Hessian is
``(d k, d k)``, ``(d, d)`` for ``k = 1``.

The loss of one observation is its negative log-likelihood up to terms free of
theta, ``rho(x, y; theta) = A(s) - <y, s>`` with ``s = theta' x`` (k,) and ``A``
the log-partition (the cumulant ``b`` for ``k = 1``, log-sum-exp for softmax).
Its gradient is the outer product ``x r'`` with ``r = grad A(s) - y``, whose
Frobenius norm ``||x|| ||r||`` makes clipping a matter of scaling ``r``
(`fedgdp.core.privacy`), and its Hessian is ``x x'`` (Kronecker) ``W`` with
``W = Hess A(s)`` (``b''(eta)`` for ``k = 1``, ``diag(p) - p p'`` for softmax).
`GLM.loss` and the rest average over the ``n`` rows.

The compiled simulation kernels (`fedgdp.simulation.kernels`) evaluate the same
logistic and Poisson residuals in their own features-first layout.
"""
from __future__ import annotations

import numpy as np

__all__ = ["BINARY_LOGISTIC", "GLM", "LOGISTIC", "MODELS", "POISSON", "Logistic", "Multinomial", "Poisson",
           "NonzeroColumns", "SingleOutput", "get_model", "matrix_model", "product_design",
           "population_hessian", "population_min_eigenvalue"]

#: Designs with more rows are processed in blocks of ROW_BLOCK rows, so that each
#: block is read from memory once for both products (X V, then X' C): 26% faster
#: Hessian-vector products for the pooled MNIST fit (56,000 x 785, block 256).
ROW_BLOCK, ROW_BLOCK_MIN = 256, 4096

#: A design with more than ROW_BLOCK_MIN rows, at least SPARSE_MIN_COLUMNS columns and at
#: most SPARSE_MAX_DENSITY of its entries nonzero is multiplied as a CSR matrix
#: (`product_design`): MNIST's pixels are 19% nonzero, and a CSR product streams
#: about 12 bytes per nonzero instead of 8 per entry (``python scripts/profile_realdata.py
#: --products``: 2-3x faster products for the pooled 56,000 x 785 fit). A client's few
#: hundred rows are not made CSR: they fit in cache, where BLAS is as fast and scipy's
#: per-call cost and row slicing made the local steps up to 2x slower (a wide client with
#: blank columns goes through `NonzeroColumns` instead). Narrower designs (the
#: bundled digits, the simulations) are multiplied as they are.
SPARSE_MIN_COLUMNS, SPARSE_MAX_DENSITY = 256, 0.3

#: A client's dense design (at most ROW_BLOCK_MIN rows, at least SPARSE_MIN_COLUMNS
#: columns) of which at least ZERO_COLUMNS_MIN of the columns are all zero is multiplied
#: through its other columns only (`NonzeroColumns`): a client's 600-800 MNIST
#: images leave about 190 of the 784 pixels at zero, and its products take 21-25% less
#: time (``python scripts/profile_realdata.py --products``).
ZERO_COLUMNS_MIN = 0.1


class NonzeroColumns:
    """A dense design X (n, d) multiplied through its columns that are not all zero.

    ``X @ V`` is ``Xc @ V[cols]`` and ``X.T @ C`` is ``Xc.T @ C`` in the rows ``cols``
    (zero elsewhere), ``Xc = X[:, cols]``: the dense products' nonzero terms, so equal
    to rounding (about 1e-16 relative). It offers what `GLM`'s products read (``@``,
    ``.T @``, ``shape``, row slices); the entries are ``np.asarray(X)``. Make one with `of`.

    Parameters
    ----------
    Xc : ndarray of shape (n, c)
        The columns ``cols`` of X, C-contiguous.
    cols : ndarray of int of shape (c,)
        X's columns that are not all zero, increasing.
    d : int
        X's number of columns.
    """

    def __init__(self, Xc: np.ndarray, cols: np.ndarray, d: int):
        self.Xc, self.cols = Xc, cols
        self.shape = (Xc.shape[0], d)

    @classmethod
    def of(cls, X: np.ndarray, cols: np.ndarray | None = None) -> NonzeroColumns:
        """The design X through ``cols`` (default: its columns that are not all zero).

        Parameters
        ----------
        X : ndarray of shape (n, d)
            The design.
        cols : ndarray of int, optional
            The columns to keep (default: those not all zero).
        """
        cols = np.flatnonzero(np.any(X != 0, axis=0)) if cols is None else cols
        return cls(np.ascontiguousarray(X[:, cols]), cols, X.shape[1])

    def toarray(self) -> np.ndarray:
        """The dense design, shape (n, d) (a new array: zeros outside ``cols``)."""
        out = np.zeros(self.shape)
        out[:, self.cols] = self.Xc
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if copy is False:
            raise ValueError("NonzeroColumns: its dense array is always a new one (copy=False cannot hold)")
        return self.toarray() if dtype is None else self.toarray().astype(dtype, copy=False)

    def __matmul__(self, V: np.ndarray) -> np.ndarray:
        return self.Xc @ V[self.cols]

    def __getitem__(self, rows: slice) -> NonzeroColumns:
        return NonzeroColumns(self.Xc[rows], self.cols, self.shape[1])

    @property
    def T(self) -> _TransposedColumns:
        return _TransposedColumns(self)


class _TransposedColumns:
    """``X.T`` of a `NonzeroColumns` X: ``X.T @ C`` maps (n, ...) to (d, ...)."""

    def __init__(self, X: NonzeroColumns):
        self.X = X
        self.shape = X.shape[::-1]

    def __matmul__(self, C: np.ndarray) -> np.ndarray:
        out = np.zeros((self.shape[0],) + C.shape[1:])
        out[self.X.cols] = self.X.Xc.T @ C
        return out


def _row_blocks(n: int):
    return (slice(s, min(s + ROW_BLOCK, n)) for s in range(0, n, ROW_BLOCK))


def product_design(X):
    """The matrix to multiply with in place of the dense design ``X`` (n, d): a ``scipy.sparse.csr_matrix`` with
    X's values when X is tall, wide and sparse (`ROW_BLOCK_MIN`, `SPARSE_MIN_COLUMNS`, `SPARSE_MAX_DENSITY`); a
    `NonzeroColumns` when X is short (a client), wide and has enough all-zero columns (`ZERO_COLUMNS_MIN`); else
    X itself (stacked).

    Every product of `GLM` accepts each; they agree with the dense ones to rounding.
    ``X`` may also be a list of row blocks (a pooled design's clients): the design is
    their stack, a sparse one built block by block without the dense stack (the same CSR
    arrays as ``csr_matrix(np.vstack(X))``).

    Parameters
    ----------
    X : ndarray of shape (n, d), or list of ndarray, shapes (n_i, d)
        A design, or its row blocks in order (a block may be a `NonzeroColumns`;
        so may X, which is then returned as it is).
    """
    if isinstance(X, NonzeroColumns):
        return X
    blocks = X if isinstance(X, list) else [X]
    n, d = sum(b.shape[0] for b in blocks), blocks[0].shape[1]

    def stack():
        return np.vstack([np.asarray(b) for b in blocks]) if isinstance(X, list) else X

    if d < SPARSE_MIN_COLUMNS:
        return stack()
    if n <= ROW_BLOCK_MIN:              # a client: its all-zero columns left out, when there are enough
        dense = stack()
        cols = np.flatnonzero(np.any(dense != 0, axis=0))
        return NonzeroColumns.of(dense, cols) if d - cols.size >= ZERO_COLUMNS_MIN * d else dense
    # a block may be a client's NonzeroColumns: its entries are Xc's, in the columns cols
    parts = [(b.Xc, b.cols) if isinstance(b, NonzeroColumns) else (b, None) for b in blocks]
    if sum(np.count_nonzero(a) for a, _ in parts) > SPARSE_MAX_DENSITY * n * d:
        return stack()
    from scipy.sparse import csr_matrix

    values, columns, counts = [], [], []
    for a, cols in parts:            # row-major nonzeros, as csr_matrix(dense) orders them (cols increase)
        r, c = np.nonzero(a)
        values.append(a[r, c])
        columns.append(c if cols is None else cols[c])
        counts.append(np.bincount(r, minlength=a.shape[0]))
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))])
    return csr_matrix((np.concatenate(values), np.concatenate(columns), indptr), shape=(n, d))


def _blocked(X) -> bool:
    """Whether products with X go by blocks of rows: a dense design of more than
    `ROW_BLOCK_MIN` rows (a sparse one streams its nonzeros once either way)."""
    return X.shape[0] > ROW_BLOCK_MIN and isinstance(X, np.ndarray)


def _columns(a: np.ndarray) -> np.ndarray:
    """A vector ``(m,)`` as the column ``(m, 1)``; a matrix ``(m, k)`` unchanged (a view)."""
    return a.reshape(a.shape[0], -1)


class GLM:
    """A generalised linear model with canonical link (see the module's Conventions).

    A family sets ``name`` and ``k`` (outputs) and supplies `targets`,
    `log_partition_and_mean`, `mean`, `curvature` and
    `curvature_bound`; the loss, gradients, residuals, Hessian,
    Hessian-vector products and Hessian clipping are written here once.
    ``bounded_residuals`` says whether each row's residual is at most 1 in norm (a probability
    less a label: logistic, softmax), so that a clip of at least ``||x||`` never binds; counts' are
    not (`fedgdp.api.diagnostics.check_clip_bias` checks the clip's bias of those only).
    """

    name = ""
    k = 1
    bounded_residuals = True

    # ---------------------------------------------------------- a family's pieces
    def targets(self, labels) -> np.ndarray:
        """Responses ``Y`` (n, k) from labels (0/1, counts or class indices) (n,).

        Parameters
        ----------
        labels : array_like of shape (n,)
            0/1 labels, counts or class indices.

        Returns
        -------
        ndarray of shape (n, k)
            The responses ``Y``.
        """
        raise NotImplementedError

    def log_partition_and_mean(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log-partition ``A(s_j)`` of each row, shape (n,), and the mean ``P`` (n, k),
        from the scores ``S`` (n, k) (one pass where they share work; S is not changed).

        Parameters
        ----------
        S : ndarray of shape (n, k)
            The scores ``X @ theta``.

        Returns
        -------
        A : ndarray of shape (n,)
            The log-partition of each row.
        P : ndarray of shape (n, k)
            The fitted mean.
        """
        raise NotImplementedError

    def mean(self, S: np.ndarray) -> np.ndarray:
        """The fitted mean ``P = grad A`` of each row of the scores ``S``, S's shape.

        Parameters
        ----------
        S : ndarray
            The scores of shape (n, k) (the single-output families: any shape, elementwise).

        Returns
        -------
        ndarray
            ``P``, the shape of ``S``.
        """
        raise NotImplementedError

    def curvature(self, P: np.ndarray, V: np.ndarray) -> np.ndarray:
        """Each row's Hessian ``W_j`` of A in the scores, at mean ``p_j``, applied to
        ``v_j``: shape (n, k) from ``P`` and ``V`` (n, k).

        Parameters
        ----------
        P : ndarray of shape (n, k)
            The fitted means ``p_j``.
        V : ndarray of shape (n, k)
            The vectors ``v_j``, one per row.

        Returns
        -------
        ndarray of shape (n, k)
            ``W_j v_j``, row by row.
        """
        raise NotImplementedError

    def curvature_bound(self, P: np.ndarray) -> np.ndarray:
        """An upper bound on the operator norm of each ``W_j``, shape (n,), from ``P`` (n, k).

        Parameters
        ----------
        P : ndarray of shape (n, k)
            The fitted means.

        Returns
        -------
        ndarray of shape (n,)
            The bounds ``c_j``.
        """
        raise NotImplementedError

    # ------------------------------------------------------- written once for all
    def predict(self, theta, X) -> np.ndarray:
        """The fitted mean ``P = b'(X theta)`` (probabilities for logistic and softmax,
        ranked for AUC or maximised for the class), shape (n, k) or (n,).

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray of shape (n, d)
            Design.

        Returns
        -------
        ndarray of shape (n, k) or (n,)
            The fitted mean ``P`` (``(n,)`` for a vector theta).
        """
        return self.mean(X @ theta)

    def loss_gradient(self, theta, X, Y) -> tuple[float, np.ndarray, np.ndarray]:
        """Mean negative log-likelihood, its gradient ``X' (P - Y) / n`` (theta's
        shape) and ``P`` (Y's shape), from one product ``X @ theta``.

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray or scipy.sparse.csr_matrix of shape (n, d)
            Design.
        Y : ndarray of shape (n, k) or (n,)
            Responses, in the shape of the scores.

        Returns
        -------
        loss : float
            The mean negative log-likelihood.
        gradient : ndarray of shape (d, k) or (d,)
            Its gradient, theta's shape.
        P : ndarray of shape (n, k) or (n,)
            The fitted mean, Y's shape.
        """
        T, Yc = _columns(theta), _columns(Y)
        n = X.shape[0]
        if not _blocked(X):
            value, P = self._loss_and_mean(X @ T, Yc)
            return value, (X.T @ (P - Yc) / n).reshape(theta.shape), P.reshape(Y.shape)
        P = np.empty((n, T.shape[1]))
        total, grad = 0.0, np.zeros(T.shape)
        for rows in _row_blocks(n):
            Xb = X[rows]
            value, P[rows] = self._loss_and_mean(Xb @ T, Yc[rows])
            total += value * Xb.shape[0]
            grad += Xb.T @ (P[rows] - Yc[rows])
        return total / n, (grad / n).reshape(theta.shape), P.reshape(Y.shape)

    def _loss_and_mean(self, S: np.ndarray, Y: np.ndarray) -> tuple[float, np.ndarray]:
        """``mean_j A(s_j) - <y_j, s_j>`` and ``P`` (n, k) from scores S and Y (n, k)."""
        A, P = self.log_partition_and_mean(S)
        return float(np.mean(A - np.sum(Y * S, axis=1))), P

    def loss(self, theta, X, Y) -> float:
        """Mean negative log-likelihood ``mean_j rho(x_j, y_j; theta)``.

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray of shape (n, d)
            Design.
        Y : ndarray of shape (n, k) or (n,)
            Responses.

        Returns
        -------
        float
            The loss.
        """
        return self.loss_gradient(theta, X, Y)[0]

    def gradient(self, theta, X, Y) -> np.ndarray:
        """Gradient of `loss`, ``X' (P - Y) / n``, theta's shape.

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray of shape (n, d)
            Design.
        Y : ndarray of shape (n, k) or (n,)
            Responses.

        Returns
        -------
        ndarray of shape (d, k) or (d,)
            The gradient.
        """
        return self.loss_gradient(theta, X, Y)[1]

    def residuals(self, theta, X, Y) -> np.ndarray:
        """``R = P - Y``, Y's shape.

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray of shape (n, d)
            Design.
        Y : ndarray of shape (n, k) or (n,)
            Responses.

        Returns
        -------
        ndarray of shape (n, k) or (n,)
            The residuals.
        """
        return self.predict(theta, X) - Y

    def per_sample_gradients(self, theta, X, Y) -> np.ndarray:
        """Gradient of each observation's loss, ``x_j r_j'``: shape (n, d, k), or
        (n, d) for a vector theta (the loop oracle and tests; small n).

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray of shape (n, d)
            Design.
        Y : ndarray of shape (n, k) or (n,)
            Responses.

        Returns
        -------
        ndarray of shape (n, d, k) or (n, d)
            One gradient per observation.
        """
        R = _columns(self.residuals(theta, X, Y))
        return (X[:, :, None] * R[:, None, :]).reshape((X.shape[0],) + theta.shape)

    def hvp(self, theta, X, V, scale: np.ndarray | None = None) -> np.ndarray:
        """Hessian of `loss` at theta applied to ``V`` (theta's shape), without forming it.

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray of shape (n, d)
            Design.
        V : ndarray of shape (d, k) or (d,)
            The direction, theta's shape.
        scale : ndarray of shape (n,), optional
            Per-sample Hessian weights.

        Returns
        -------
        ndarray
            The product, V's shape.
        """
        return self.hvp_at(self.predict(theta, X), X, V, scale)

    def hvp_at(self, P, X, V, scale: np.ndarray | None = None) -> np.ndarray:
        """`hvp` given the fitted mean ``P`` at theta.

        Parameters
        ----------
        P : ndarray of shape (n, k) or (n,)
            The fitted mean at theta.
        X : ndarray or scipy.sparse.csr_matrix of shape (n, d)
            Design.
        V : ndarray of shape (d, k) or (d,)
            The direction.
        scale : ndarray of shape (n,), optional
            Per-sample Hessian weights.

        Returns
        -------
        ndarray
            The product, V's shape.
        """
        P, Vc = _columns(P), _columns(V)
        n = X.shape[0]
        if not _blocked(X):
            return (self._hvp_rows(P, X, Vc, scale) / n).reshape(V.shape)
        out = np.zeros(Vc.shape)
        for rows in _row_blocks(n):
            out += self._hvp_rows(P[rows], X[rows], Vc, None if scale is None else scale[rows])
        return (out / n).reshape(V.shape)

    def _hvp_rows(self, P, X, V, scale):
        C = self.curvature(P, X @ V)
        if scale is not None:
            C *= scale[:, None]
        return X.T @ C

    def hessian(self, theta, X, scale: np.ndarray | None = None, P: np.ndarray | None = None) -> np.ndarray:
        """Dense Hessian of `loss`, ``mean_j x_j x_j' (Kronecker) W_j``, shape
        (d k, d k) in row-major order ((d, d) for k = 1).

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Coefficients.
        X : ndarray of shape (n, d)
            Design.
        scale : ndarray of shape (n,), optional
            Per-sample Hessian weights.
        P : ndarray of shape (n, k) or (n,), optional
            The fitted means at theta.

        Returns
        -------
        ndarray of shape (d k, d k)
            The Hessian, row-major in ``(d, k)``.
        """
        T = _columns(theta)
        d, k = T.shape
        P = self.mean(X @ T) if P is None else _columns(P)
        if scale is not None:
            X = X * np.sqrt(scale)[:, None]
        H = np.empty((d, k, d, k))
        for c in range(k):
            E = np.zeros((X.shape[0], k))
            E[:, c] = 1.0
            W = self.curvature(P, E)                           # (n, k): column c of each W_j
            H[:, :, :, c] = np.einsum("na,nc,nb->acb", X, W, X) / X.shape[0]
        return H.reshape(d * k, d * k)

    def clipped_hessian_rows(self, theta, X, bound: float, norms=None) -> tuple[np.ndarray, np.ndarray]:
        """The reference per-sample Hessian clip (certified FedNewton, docs/methods.md §2):
        the rows and fitted means of the clipped Hessian, in finite arithmetic.

        Row j is scaled by ``a_j = min(1, sqrt(H_c / c_j) / ||x_j||)`` (``c_j`` the
        `curvature_bound`), so its per-sample Hessian ``c_j a_j^2 x_j x_j'`` has norm
        <= H_c; a row whose mean or factor is not finite, or whose curvature is 0, gets
        ``a_j = 0`` and a zero mean (docs/methods.md §2). The simulations' compiled port
        (`fedgdp.simulation.kernels.hessians`) is held to it by ``tests/simulation/test_kernels.py``.

        Parameters
        ----------
        theta : ndarray of shape (d, k) or (d,)
            Where the Hessian is taken.
        X : ndarray or NonzeroColumns of shape (n, d)
            The rows.
        bound : float
            ``H_c``, the bound on each per-sample Hessian's operator norm.
        norms : ndarray of shape (n,) or None
            In place of ``||x_j||``, a bound on the norm of the row in the coordinates the Hessian is
            clipped in (FedIRLS's whitened rows, `fedgdp.methods.fedirls.whitened_norms`); None: ``||x_j||``.

        Returns
        -------
        aX : ndarray of shape (n, d)
            The scaled rows ``a_j x_j``.
        P : ndarray of shape (n, k)
            The fitted means (0 in the zeroed rows).
        """
        from .privacy import row_norms

        X = np.asarray(X)              # the entries themselves (a fold's NonzeroColumns made dense)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            P = np.array(self.predict(theta, X), dtype=float).reshape(X.shape[0], -1)
            c = self.curvature_bound(P)
            a = np.minimum(1.0, np.sqrt(bound / c) / (row_norms(X) if norms is None else norms))
        bad = ~(np.isfinite(P).all(axis=1) & np.isfinite(a)) | (c == 0)   # c = 0: a zero Hessian anyway
        a[bad] = 0.0
        P[bad] = 0.0
        return X * a[:, None], P


class SingleOutput(GLM):
    """A family with one output (``k = 1``) given by its cumulant ``b``.

    A subclass supplies `cumulant` ``b``, `mean` ``b'`` and
    `variance_function` ``V`` with ``b'' = V(b')``, each elementwise, and
    `sample`.
    """

    k = 1

    def cumulant(self, eta: np.ndarray) -> np.ndarray:
        """``b(eta)``, elementwise (eta's shape).

        Parameters
        ----------
        eta : ndarray
            Linear predictors.
        """
        raise NotImplementedError

    def variance_function(self, mu: np.ndarray) -> np.ndarray:
        """``V(mu)``, with ``b''(eta) = V(b'(eta))``, elementwise (mu's shape).

        Parameters
        ----------
        mu : ndarray
            Means.
        """
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, eta: np.ndarray) -> np.ndarray:
        """Responses (float) drawn at the linear predictors ``eta`` (n,), shape (n,).

        Parameters
        ----------
        rng : numpy.random.Generator
            The generator.
        eta : ndarray of shape (n,)
            Linear predictors.
        """
        raise NotImplementedError

    def variance(self, eta: np.ndarray) -> np.ndarray:
        """``b''(eta)``, elementwise (eta's shape).

        Parameters
        ----------
        eta : ndarray
            Linear predictors.
        """
        return self.variance_function(self.mean(eta))

    def targets(self, labels):
        """The labels or counts as one float column, (n, 1)."""
        return np.asarray(labels, dtype=float).reshape(-1, 1)

    def log_partition_and_mean(self, S):
        """``b(s_j)`` and ``b'(s_j)`` of each row."""
        return self.cumulant(S[:, 0]), self.mean(S)

    def curvature(self, P, V):
        """``b''(s_j) v_j = V(p_j) v_j``, elementwise."""
        return self.variance_function(P) * V

    def curvature_bound(self, P):
        """``V(p_j)`` itself, shape (n,)."""
        return self.variance_function(P[:, 0])


def _sigmoid(eta: np.ndarray) -> np.ndarray:
    # 0.5 * (1 + tanh(eta / 2)) is exact and overflow free
    return 0.5 + 0.5 * np.tanh(0.5 * eta)


class Logistic(SingleOutput):
    """Logistic regression, ``b(eta) = log(1 + e^eta)``: the simulations' ``logistic``
    model and the real-data ``binary`` task (theta (d, 1))."""

    name = "logistic"

    def cumulant(self, eta):
        """``log(1 + e^eta)``, elementwise and overflow free."""
        return np.logaddexp(0.0, eta)

    def mean(self, S):
        """The sigmoid of the scores, elementwise."""
        return _sigmoid(S)

    def variance_function(self, mu):
        """``mu (1 - mu)``, elementwise."""
        return mu * (1.0 - mu)

    def sample(self, rng, eta):
        """Bernoulli responses (float) at probabilities ``sigmoid(eta)``."""
        return (rng.random(eta.shape) < _sigmoid(eta)).astype(np.float64)


class Poisson(SingleOutput):
    """Poisson regression, ``b(eta) = e^eta``."""

    name = "poisson"
    bounded_residuals = False

    def cumulant(self, eta):
        """``e^eta``, elementwise."""
        return np.exp(eta)

    def mean(self, S):
        """``e^S``, elementwise."""
        return np.exp(S)

    def variance_function(self, mu):
        """``V(mu) = mu``."""
        return mu

    def sample(self, rng, eta):
        """Poisson counts (float) at means ``e^eta``."""
        return rng.poisson(np.exp(eta)).astype(np.float64)


class Multinomial(GLM):
    """Softmax regression over ``n_classes`` classes with the full (d, C) parameter,
    ``A(s) = log sum_c e^(s_c)`` (paper section 5.1, multiclass task).

    The parameterisation is redundant (adding one vector to every column leaves P
    unchanged), so the Hessian is singular along those directions; the methods
    that solve with it floor or ridge it (docs/methods.md §2, §5).
    """

    name = "multiclass"

    def __init__(self, n_classes: int = 10):
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got n_classes={n_classes}")
        self.k = int(n_classes)

    def targets(self, labels):
        """One-hot responses (n, C) from class indices (ValueError outside ``0..C-1``)."""
        labels = np.asarray(labels, dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= self.k):
            raise ValueError(f"labels must lie in 0..{self.k - 1}, got {labels.min()}..{labels.max()}")
        Y = np.zeros((labels.shape[0], self.k))
        Y[np.arange(labels.shape[0]), labels] = 1.0
        return Y

    def log_partition_and_mean(self, S):
        """Log-sum-exp of each row and the softmax, shifted by the row maximum (no overflow)."""
        top = S.max(axis=1, keepdims=True)
        E = np.exp(S - top)
        total = E.sum(axis=1, keepdims=True)
        A = (top + np.log(total))[:, 0]
        E /= total
        return A, E

    def mean(self, S):
        """The softmax of each row, (n, C)."""
        return self.log_partition_and_mean(S)[1]

    def curvature(self, P, V):
        """``(diag(p_j) - p_j p_j') v_j``, row by row."""
        PV = P * V
        return PV - P * PV.sum(axis=1, keepdims=True)

    def curvature_bound(self, P):
        """``max_c p_jc``: ``diag(p) - p p'`` is PSD and below ``diag(p)``."""
        return P.max(axis=1)


LOGISTIC = Logistic()
POISSON = Poisson()
#: The real-data binary task is the logistic model with theta (d, 1).
BINARY_LOGISTIC = LOGISTIC

MODELS: dict[str, SingleOutput] = {m.name: m for m in (LOGISTIC, POISSON)}


def get_model(name: str) -> SingleOutput:
    """Look up a simulation model by name (``logistic`` or ``poisson``).

    Parameters
    ----------
    name : str
        ``logistic`` or ``poisson`` (ValueError otherwise).
    """
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}") from None


def matrix_model(task: str, n_classes: int = 10) -> GLM:
    """The model of a real-data task: ``binary`` (logistic) or ``multiclass`` (softmax).

    Parameters
    ----------
    task : str
        ``binary`` or ``multiclass`` (ValueError otherwise).
    n_classes : int
        Classes of the multiclass task.

    Returns
    -------
    GLM
        `BINARY_LOGISTIC` or a `Multinomial`.
    """
    if task == "binary":
        return BINARY_LOGISTIC
    if task == "multiclass":
        return Multinomial(n_classes)
    raise ValueError(f"unknown task {task!r}; choose 'binary' or 'multiclass'")


def population_hessian(model: str, beta_true, sigma_c: float, *, nodes: int = 80) -> np.ndarray:
    """``E[b''(x'beta) x x']`` for ``x = [1, z]``, ``z ~ N(0, sigma_c^2 I)``, shape (p, p).

    Exact up to quadrature error: with ``s = ||beta_z||``, ``u = beta_z / s`` and
    ``t = u'z / sigma_c ~ N(0, 1)``, the weight depends on t alone, so
    ``a_k = E[b''(beta_0 + sigma_c s t) t^k]`` (Gauss-Hermite, ``nodes`` points) give
    ``H = [[a0, sigma_c a1 u'], [sigma_c a1 u, sigma_c^2 (a0 (I - uu') + a2 uu')]]``.

    Parameters
    ----------
    model : str
        ``logistic`` or ``poisson``.
    beta_true : array_like of shape (p,)
        The true coefficients, intercept first.
    sigma_c : float
        The covariates' standard deviation.
    nodes : int
        Gauss-Hermite nodes.

    Returns
    -------
    ndarray of shape (p, p)
        The population Hessian.
    """
    beta = np.asarray(beta_true, dtype=float)
    p = beta.shape[0]
    s = float(np.linalg.norm(beta[1:]))
    u = beta[1:] / s if s > 0 else np.eye(p - 1)[0]
    t, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / np.sqrt(2 * np.pi)
    v = get_model(model).variance(beta[0] + sigma_c * s * t)
    a0, a1, a2 = (np.sum(w * v * t ** k) for k in range(3))
    H = np.empty((p, p))
    H[0, 0] = a0
    H[0, 1:] = H[1:, 0] = sigma_c * a1 * u
    uu = np.outer(u, u)
    H[1:, 1:] = sigma_c ** 2 * (a0 * (np.eye(p - 1) - uu) + a2 * uu)
    return H


def population_min_eigenvalue(model: str, beta_true, sigma_c: float) -> float:
    """Smallest eigenvalue of `population_hessian` (docs/methods.md §2, ``tau1: auto``).

    Parameters
    ----------
    model : str
        ``logistic`` or ``poisson``.
    beta_true : array_like of shape (p,)
        The true coefficients, intercept first.
    sigma_c : float
        The covariates' standard deviation.

    Returns
    -------
    float
        The smallest eigenvalue.
    """
    return float(np.linalg.eigvalsh(population_hessian(model, beta_true, sigma_c))[0])
