"""Empirical privacy audit: a search for the worst neighbouring pair of every release,
its change beside the sensitivity its ledger records.

For every private method (simulations: both GLMs, FedNewton in both privacy modes;
real data: binary and softmax regression, every Newton solver; the private clipping
rule's histogram; the inference releases of a `FederatedGLM` fit with
``inference_share > 0``, every family; the CNN methods of the extra ``nn`` when torch
imports),
`run_audit` searches for a pair of neighbouring client data sets (one record
replaced) that moves the release *before noise* the most, at a public state, by
calling the package's own code paths: `fedgdp.simulation.backend.ClientBlock` and its
local steps, ``FedNewton.newton_update`` on each backend,
`fedgdp.realdata.FoldData.gradient`, `fedgdp.core.privacy.clip_histogram`,
`fedgdp.realdata.moments.client_moments` (`glm`), and
the CNN backend's own release, `fedgdp.nn.backend.TorchBackend.release`, against the
sensitivity its own ledger records (`nn`: minibatch passes, ``sum``, the ``client`` and
``update`` units, schedule-aware accounting, FedNewton-Iter's head).

The search (docs/methods.md §2, "The audit"):

- *base data sets*: random designs (Gaussian or pixel-like), and adversarial ones: every
  gradient aligned and clipped (``aligned``), and for FedNewton a half 1 of zero
  curvature with a half 2 whose clipped gradients all point one way (``hessian``), the
  data set on which one record of half 1 moves the ridge inverse the most;
- *client sizes*: the main size and the tiny, odd ones n = 2 and 3 (CNNs: 2, 1 and a
  client of two unequal minibatches);
- *replaced records*: rows of norm 0 to the float maximum along the axes, random
  directions and the release's own direction, every response (label flips), the
  Hessian-shaping records of half 1 (``c u`` along the direction of the gradient);
  for FedNewton one record of each half; for a pass of minibatches one record of each;
- *random restarts and local search*: random records, then hill climbing on the best
  record found (multiplicative and additive perturbations; GLMs).

``observed`` is the largest change found (a change that is not finite counts as inf:
a violation), ``recorded`` the sensitivity the method's plan declares (what its ledger
records and its noise is calibrated on), ``ratio = observed / recorded``; ``budget``
is the number of neighbouring pairs evaluated and ``pair`` describes the best one.

An audit is a lower bound on the true sensitivity: a ratio above ``1 + RATIO_TOL``
proves that the recorded sensitivity is too small (a privacy leak), a ratio at most
that only says the search found no leak (the tolerance is the float64 rounding of the
release itself, docs/methods.md §2, "The audit": every clipped contribution is within
its bound exactly, the clip margin); it cannot prove there is none. The certified releases'
bounds are proved in docs/methods.md §2. Targets: the defaults (`default_targets`,
`nn_targets`), one run's settings (`audit_targets`; the command ``fedgdp audit
--configfile``) or the certified readings of a readings config (`readings_targets`;
``fedgdp audit --readings``).

The package stands on the studies (floor 3, beside the reports and the estimator API);
reading a run's config into targets, which needs the plan, is the command's
(`fedgdp.commands.audit`).
"""
from .glm import audit_inference, audit_real, audit_sim, worst_pair
from .nn import NN_KEYS, audit_nn, nn_settings_of, nn_targets, readings_targets
from .run import as_dicts, audit_targets, default_targets, format_table, run_audit, write_audit
from .search import RATIO_TOL, AuditRow, AuditTarget, change

__all__ = ["RATIO_TOL", "AuditRow", "AuditTarget", "run_audit", "audit_targets", "default_targets", "change",
           "nn_targets", "nn_settings_of", "readings_targets", "audit_nn", "NN_KEYS", "write_audit", "format_table",
           "as_dicts",
           "worst_pair", "audit_sim", "audit_real", "audit_inference"]
