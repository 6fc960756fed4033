"""Empirical privacy audit: a search for the worst neighbouring pair of every release,
its change beside the sensitivity its ledger records (docs/methods.md §2, "The audit").

`run_audit` searches, for every private method (simulations, real data, the clipping
histogram, a `FederatedGLM` fit's inference releases, the CNNs when torch imports), for
the pair of client data sets differing in one record that moves the release *before
noise* the most at a public state, through the package's own code paths. ``observed``
is the largest change found (not finite: inf), ``recorded`` the sensitivity the plan
declares, ``ratio = observed / recorded``; ``budget`` counts the pairs evaluated and
``pair`` describes the best one. A ratio above ``1 + RATIO_TOL`` proves a leak; at most
that, only that the search found none. Targets: `default_targets`, `nn_targets`,
`audit_targets` (``fedgdp audit --configfile``), `readings_targets` (``--readings``).
"""
from .glm import audit_inference, audit_real, audit_sim, worst_pair
from .nn import NN_KEYS, audit_nn, nn_settings_of, nn_targets, readings_targets
from .run import as_dicts, audit_targets, default_targets, format_table, run_audit, write_audit
from .search import RATIO_TOL, AuditRow, AuditTarget, change

__all__ = ["RATIO_TOL", "AuditRow", "AuditTarget", "run_audit", "audit_targets", "default_targets", "change",
           "nn_targets", "nn_settings_of", "readings_targets", "audit_nn", "NN_KEYS", "write_audit", "format_table",
           "as_dicts",
           "worst_pair", "audit_sim", "audit_real", "audit_inference"]
