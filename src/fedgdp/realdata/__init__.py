"""Real-data federated logistic regression: nine methods, per-client metrics (docs/methods.md §5).

Paper section 5.1 (Figures 7 and 8): binary (odd vs even digit) and 10-class softmax
regression on images split over m clients, 5 folds within each client, S client
splits; every client scores each fit on its own test fold (AUC or accuracy), averaged
over its folds. Methods: `REGISTRY`, the real-data view of `fedgdp.methods.REGISTRY`
(the private ones, DP-SCAFFOLD, and the non-private baselines run once at mu = inf).

Client i holds ``X_i`` (n_i, d) and targets ``Y_i`` (n_i, k) (`fedgdp.core.glm`, matrix
form); parameters are ``Theta`` (d, k); weights ``w_i = n_i / N``; all methods start at
0. A fold's clipping bound follows the configured rule on its training data
(`clip_bound_real`); tau1 is a configured number (the image Hessian is singular, so
``auto`` would give 0). Every configured mu is fitted in one stacked pass where the
method allows (`RealBackend`). Seeds: docs/methods.md §5; the modules:
docs/ARCHITECTURE.md (``realdata/``).
"""

from ..core.solvers import cg_solve
from .backend import RealBackend, local_descent
from .clipping import clip_bound_real, clipped_gradient, stacked_gradients
from .folds import FoldData
from .metrics import accuracy, auc, client_metric
from .parameters import (
                         DEFAULTS,
                         EXTRA_PRIVATE,
                         METRICS,
                         NONPRIVATE,
                         PRIVATE,
                         REGISTRY,
                         TASKS,
                         RealdataSettings,
                         get_method,
                         resolve,
)
from .run import CLIP_STREAM, COLUMNS, noise_rng, read_rows, run_split, write_rows
from .solvers import newton_step, ridge_fit

__all__ = [
    "RealdataSettings", "DEFAULTS", "TASKS", "METRICS", "PRIVATE", "EXTRA_PRIVATE", "NONPRIVATE",
    "resolve",
    "FoldData", "RealBackend", "REGISTRY", "get_method", "clipped_gradient", "stacked_gradients", "local_descent",
    "cg_solve", "newton_step", "ridge_fit", "auc", "accuracy", "client_metric", "run_split", "noise_rng",
    "write_rows", "read_rows", "COLUMNS", "CLIP_STREAM", "clip_bound_real",
]
