"""The training data of one fold, split by client (shapes: `fedgdp.realdata`), and its privacy setting."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core import privacy
from ..core.glm import GLM, product_design
from ..core.privacy import Ledger
from ..core.solvers import solve_tol
from ..methods import REALDATA
from .backend import RealBackend, same_stream
from .clipping import clipped_gradient, clipped_residuals
from .parameters import DEFAULTS

__all__ = ["FoldData"]


@dataclass
class FoldData:
    """The training data of one fold, split by client, and the privacy setting.

    Attributes
    ----------
    model : GLM
    X, Y : list of ndarray
        Client i's design (n_i, d) and targets (n_i, k), rows in random order; a design
        may be a `fedgdp.core.glm.NonzeroColumns` (read entries with ``np.asarray``).
    mu : float          target mu per client (inf: non-private)
    B : float           clipping bound (ignored, no clipping, when mu = inf)
    tau1 : float        FedNewton's eigenvalue floor / ridge
    newton : dict       solver settings (``solver``, ``cg_tol``, ``cg_maxiter``)
    products : list     what the products read (`fedgdp.core.glm.product_design`; made when not given)
    xnorm : list        each client's row norms (n_i,) (made when not given)
    trace : list | None collects the noisy iterates (``fedgdp.api.diagnostics``); None keeps none
    intercept : bool    whether the design's first column is the intercept (public; FedIRLS starts counts there)
    """

    model: GLM
    X: list
    Y: list
    mu: float = math.inf
    B: float = math.inf
    tau1: float = 0.5
    newton: dict = field(default_factory=lambda: dict(DEFAULTS["newton"]))
    privacy: dict = field(default_factory=lambda: dict(DEFAULTS["privacy"]))
    clip: dict = field(default_factory=lambda: dict(DEFAULTS["clip"]))
    products: list | None = field(default=None, repr=False)
    xnorm: list | None = field(default=None, repr=False)
    trace: list | None = field(default=None, repr=False, compare=False)
    intercept: bool = False

    def __post_init__(self):
        # what the products read (a CSR copy of a wide sparse design, fedgdp.core.glm.product_design)
        # and the row norms; a run passes both, made once per fold for all its FoldData
        if self.products is None:
            self.products = [product_design(x) for x in self.X]
        if self.xnorm is None:
            self.xnorm = [privacy.row_norms(x) for x in self.X]

    @property
    def private(self) -> bool:
        """Whether the releases carry noise (`fedgdp.core.privacy.adds_noise`): finite mu."""
        return privacy.adds_noise(self.mu)

    @property
    def m(self) -> int:
        return len(self.X)

    @property
    def d(self) -> int:
        return int(self.X[0].shape[1])

    @property
    def k(self) -> int:
        return int(self.model.k)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([x.shape[0] for x in self.X], dtype=np.int64)

    @property
    def weights(self) -> np.ndarray:
        n = self.sizes.astype(float)
        return n / n.sum()

    @property
    def bound(self) -> float:
        """The clipping bound in force: B, or inf when non-private (`fedgdp.core.privacy.clips`)."""
        return float(self.B) if privacy.clips(self.mu) else math.inf

    def design(self, i: int, rows: slice = slice(None)):
        """Client i's ``rows`` as the products read them (dense, or CSR for a wide sparse design).

        Parameters
        ----------
        i : int
            The client.
        rows : slice
            The client's rows to use (``slice(None)``: all).
        """
        X = self.products[i]  # type: ignore[index]
        return X if rows == slice(None) else X[rows]

    def gradient(self, i: int, Theta: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
        """Client i's average gradient (d, k) at Theta over ``rows``, per-sample clipped to `bound`.

        Parameters
        ----------
        i : int
            The client.
        Theta : ndarray of shape (d, k)
            The parameter.
        rows : slice
            The client's rows to use (``slice(None)``: all).
        """
        return clipped_gradient(self.model, Theta, self.design(i, rows), self.Y[i][rows], self.bound,
                                self.xnorm[i][rows])  # type: ignore[index]

    def clipped_residuals(self, Theta: np.ndarray, X, Y, xnorm=None, B: float | None = None) -> np.ndarray:
        """The residuals of `gradient` on the rows X, Y (any rows: FedIRLS's whitened design), each scaled
        so that its per-sample gradient ``x_j r_j'`` is clipped to `bound`
        (`fedgdp.realdata.clipping.clipped_residuals`).

        Parameters
        ----------
        Theta : ndarray of shape (d, k)
        X, Y : ndarray of shapes (n, d) and (n, k)
        xnorm : ndarray of shape (n,) or None
            The row norms of X, when computed already.
        B : float or None
            The clip instead of `bound` (FedIRLS on counts: `bound` times the released residuals' scale).
        """
        return clipped_residuals(self.model, Theta, X, Y, self.bound if B is None else B, xnorm)

    def calibrate(self, plan: tuple) -> tuple[list, Ledger]:
        """Per-client noise sds and the ledger of a plan (`fedgdp.core.privacy.calibrate_with_clip`).

        Parameters
        ----------
        plan : tuple of fedgdp.core.privacy.ReleaseSpec
            The method's releases (arrays shaped (1, m)).

        Returns
        -------
        sigmas : list of ndarray, each shape (m,)
            One array of noise sds per spec.
        ledger : fedgdp.core.privacy.Ledger
            The ledger (with the clipping rule's release, if any).
        """
        cal = privacy.calibrate_with_clip(plan, mu=self.mu, clip=self.clip, n=self.plan_n)
        return [np.asarray(s)[0] for s in cal.sigmas], cal.ledger

    # -- what the core reads (fedgdp.methods)
    kind = REALDATA

    @property
    def plan_B(self) -> float:
        """The clipping bound (a plan's ``B``)."""
        return self.B

    @property
    def plan_n(self) -> np.ndarray:
        """Client sizes as a (1, m) float array (the shape of a plan's ``n``)."""
        return self.sizes.astype(float)[None, :]

    @property
    def solve_tol(self) -> float:
        """FedNewton's solve tolerance (``cg``: ``cg_tol``; dense: 0), in the certified sensitivity."""
        return solve_tol(self.newton)

    def half_sizes(self) -> np.ndarray:
        """FedNewton's half 1 of each client: its first ``floor(n_i / 2)`` rows, (m,)."""
        h1 = self.sizes // 2
        if h1.min() < 1:
            raise ValueError(f"FedNewton needs at least 2 training rows per client, got {self.sizes.min()}")
        return h1

    def plan_halves(self) -> tuple[np.ndarray, np.ndarray]:
        """FedNewton's half sizes as (1, m) float arrays."""
        h1 = self.half_sizes()
        return h1[None, :].astype(float), (self.sizes - h1)[None, :].astype(float)

    def backend(self, rng: np.random.Generator | None):
        """This fold with its noise generator: a `fedgdp.realdata.backend.RealBackend` with J = 1.

        Parameters
        ----------
        rng : numpy.random.Generator or None
            Draws the noise (None: no noise).
        """
        return RealBackend([self], rng)

    @staticmethod
    def stacked_backend(fds: list, rngs: list):
        """The J folds (same data, one per level) as one backend with noise from ``rngs[0]``, or
        None when their generators would not draw the same numbers.

        Parameters
        ----------
        fds : list of FoldData, length J
            The folds.
        rngs : list of numpy.random.Generator or None, length J
            Their noise generators (`fedgdp.realdata.backend.same_stream`).
        """
        return RealBackend(fds, rngs[0]) if same_stream(rngs) else None
