"""Real-data federated logistic regression: nine methods, per-client metrics (docs/methods.md §5).

Paper section 5.1 (Figures 7 and 8): binary (odd vs even digit) and 10-class softmax
regression on images split over m clients, 5 folds within each client, S client
splits. For every split and fold, each method trains on the training folds of all
clients and every client scores the result on its own test fold (AUC for binary,
accuracy for multiclass); a client's value is the average over its folds.

Methods (`REGISTRY`, the real-data view of `fedgdp.methods.REGISTRY`)
-------------------------------------------------------------------------------
Private (mu-GDP per client, the noise of the table of docs/methods.md §2):

- ``fedsgd``      Algorithm 1: K server steps on noisy clipped client gradients.
- ``fedavg``      Algorithm 3: R rounds of K noisy local steps, averaged.
- ``fedhybrid``   Algorithm 2: K1 noisy local steps, average, then K2 FedSGD steps.
- ``fednewton``   Algorithm 4: FedAvg (R = 1) on half 1 of each client's training
  data, then one private Newton step (Hessian on half 1, clipped gradient on
  half 2), solving ``(H_i + tau1 I) s = g_i`` by conjugate gradients on
  Hessian-vector products (``solver: cg``; no d x d matrix, d = 7850 on MNIST) or,
  for small d, densely with H's eigenvalues floored at tau1 (``solver: floor``).
  Both keep ``||s|| <= ||g_i|| / tau1``, the bound the calibration assumes (CG
  started at 0 has iterates of increasing norm, so a truncated solve keeps it too).
- ``dp_scaffold`` SCAFFOLD (Karimireddy et al. 2020, option II control variates) with
  FedAvg's noise: each local step is ``y <- y - eta (clip-grad_i(y) - c_i + c) +
  sigma Z`` with FedAvg's sigma for R rounds of K steps. The control variates
  ``c_i+ = c_i - c + (theta - y_K) / (K eta)`` and ``c`` are computed from the noisy
  iterates and the server's broadcasts only, i.e. from quantities already released;
  they are post-processing, cost no privacy, and the ledger is FedAvg's (R K
  releases of sensitivity ``2 eta B / n_i``). Option I (a fresh gradient for c_i)
  would be an extra release and is not used.

Non-private baselines (mu = inf: no clipping, no noise; run once, stored with mu = inf):

- ``np_scaffold``, ``np_fedavg``  the same algorithms without privacy (their settings
  default to those of ``dp_scaffold`` and ``fedavg``).
- ``np_localfit`` each client fits alone on its own training folds.
- ``np_pooled``   one fit on the pooled training folds of all clients.
  Both minimise the mean negative log-likelihood plus ``ridge/2 ||Theta||^2`` (the
  intercept row unpenalised) by trust-region Newton-CG (`ridge_fit`, to a
  gradient norm of 1e-8): on images the unpenalised MLE often does not exist
  (separable data, and softmax's redundant parameterisation).

Conventions
-----------
``m`` clients; client i holds ``X_i`` (n_i, d) and targets ``Y_i`` (n_i, k)
(`fedgdp.core.glm`, in its matrix form); parameters are ``Theta`` (d, k). Aggregation
weights are ``w_i = n_i / N`` over training sizes. All methods start at 0.

Privacy: the clipping bound B of a fold follows the configured rule on that fold's
training data: the paper's q-quantile of per-sample gradient norms at Theta = 0, max
over clients (data-driven: recorded as unaccounted, so ``mu_certified`` is inf), a
fixed public value, or the private quantile (noisy histograms, recorded in the
ledger; its noise from the stream ``clip_histogram``, and B then depends on mu).
Every method declares its releases as a plan (`fedgdp.core.privacy`); ``privacy:
{mode: certified}`` makes FedNewton clip per-sample Hessians (``fednewton_certified``
does so in every mode). tau1 is a configured number here: the population Hessian of
image data is singular (constant pixels), so the simulations' ``auto`` rule gives 0.

Cost: FedSGD, FedAvg, FedHybrid and (DP-/NP-)SCAFFOLD fit every configured mu in one
pass (`fedgdp.methods.Method.fit_many` on `RealBackend`):
the J parameters are stacked, each client computes
the scores of all J from one product ``X [Theta_1 ... Theta_J]`` (softmax; binary
computes them one by one, matrix-vector products being faster), clips with each
level's bound, and one noise draw per step serves all J levels, which is what J
separate runs draw, their generators being seeded alike. NP-LocalFit and NP-Pooled
evaluate loss, gradient and probabilities from one product ``X Theta``.

Seeds: the layout of split s comes from `fedgdp.common.datasets.split_layout`; the
noise of method M in split s, fold f from ``SeedSequence([base_seed,
stable_hash(layout_key + task), s, f, stable_hash(M)])``, the same for every mu
(common random numbers across privacy levels).

Modules
-------
``parameters`` (defaults, the methods' settings, `resolve`), ``folds`` (fold data,
clipped gradients, the clipping bound), ``solvers`` (the Newton step, the ridge MLE),
``backend`` (the operations the methods of `fedgdp.methods` ask of the data),
``metrics`` (AUC, accuracy), ``run`` (one split: the run loop, its rows and file).
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
