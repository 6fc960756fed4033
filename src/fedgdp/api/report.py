"""`PrivacyReport`: what one `FederatedGLM` fit released (its ``privacy_``).

The ledger of the fit's releases per client, its composed and certified mu, epsilon at a
delta, whether the noise was secret, the label domain, and the one-line guarantee
(docs/privacy.md); `FIT_SCOPE` and `REFUSAL_RULE`, what a report covers and when a fit
is refused. `fedgdp.api.estimator` re-exports every name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core import privacy

__all__ = ["PrivacyReport", "FIT_SCOPE", "REFUSAL_RULE"]

#: What a [`PrivacyReport`][fedgdp.api.report.PrivacyReport] covers (its ``scope``)
FIT_SCOPE = ("one fit: the releases of this call to fit only. Every other fit on the same clients' rows (a "
             "cross-validation fold, a grid-search candidate, the refit) spends its own budget, and a record's "
             "budgets compose: sqrt(sum of mu^2) over the fits that used it, which fedgdp.PrivacyBudget keeps "
             "(docs/privacy.md)")


#: The rule behind every refusal of a private fit (its ``refusals``; docs/methods.md §2,
#: "No refusal depends on a record")
REFUSAL_RULE = ("every refusal depends on public inputs only (the settings, the clipping bound B, the client "
                "sizes, the dimension) and is raised before the first release; a certified Newton solve that "
                "misses its tolerance releases the exact solve instead, so neighbouring data sets both release "
                "or both refuse (a label outside classes is the data holder's own check, before any work)")


@dataclass
class PrivacyReport:
    """What one fit released, per client: the ledger, its composed and certified mu.

    The report covers this fit only (``scope``): a grid search or a cross-validation
    spends a budget on every fit it makes (`fedgdp.api.budget.PrivacyBudget` keeps the total).

    Attributes
    ----------
    method : str
        The registry name of the method.
    mu : float
        The target mu per client (inf: non-private).
    privacy_mode : str
        ``certified`` or ``paper``.
    clip : dict
        The clipping rule (`fedgdp.core.privacy.check_clip`).
    clip_bound : float
        The clipping bound B the fit used (inf when non-private).
    clients : ndarray of shape (m,)
        The client labels, in the order of the ledger's columns.
    ledger : fedgdp.core.privacy.Ledger
        Every release of every client (arrays of shape (1, m)).
    noise_secret : bool
        True when the noise came from fresh entropy (``random_state=None``); False when
        it came from a given seed, which anyone who knows it can use to remove the
        noise: the guarantee is then void while the seed is known (``guarantee``).
    label_domain : str or None
        ``"public"`` (classifiers given ``classes``), ``"from data (not covered)"``
        (classifiers without ``classes``: the label set is ``np.unique(y)``, a release no
        ledger accounts for, listed in the ledger's ``unaccounted``) or None (Poisson).
    mu_composed : ndarray of shape (m,)
        Each client's composed (nominal) mu.
    mu_certified : ndarray of shape (m,)
        ``mu_composed`` where every release is certified and nothing is unaccounted (the
        clipping bound public or private, the label domain public), inf otherwise.

    Notes
    -----
    ``certified`` is a property of the mechanism: every release's sensitivity holds for
    all inputs and nothing the fit shows (the clipping bound, the label set) is taken from
    the data outside the ledger. Whether the noise is secret is a property of the run,
    reported apart (``noise_secret``); [`guarantee`][fedgdp.api.report.PrivacyReport.guarantee]
    combines both: record-level mu-GDP at each client holds only when both do.
    """

    method: str
    mu: float
    privacy_mode: str
    clip: dict
    clip_bound: float
    clients: np.ndarray
    ledger: privacy.Ledger
    noise_secret: bool = False
    label_domain: str | None = None
    mu_composed: np.ndarray = field(default=None)  # type: ignore[arg-type]
    mu_certified: np.ndarray = field(default=None)  # type: ignore[arg-type]

    def __post_init__(self):
        m = len(self.clients)
        if self.ledger.releases:
            self.mu_composed = np.asarray(self.ledger.composed_mu(), float).reshape(-1, m)[0]
            self.mu_certified = np.asarray(self.ledger.certified_mu(), float).reshape(-1, m)[0]
        else:        # the plain fits: nothing released with noise
            self.mu_composed = np.full(m, math.inf)
            self.mu_certified = np.full(m, math.inf)

    @property
    def scope(self) -> str:
        """What the report covers: this one fit ([`FIT_SCOPE`][fedgdp.api.report.FIT_SCOPE])."""
        return FIT_SCOPE

    @property
    def refusals(self) -> str:
        """When a fit is refused: from public inputs only (`REFUSAL_RULE`)."""
        return REFUSAL_RULE

    @property
    def certified(self) -> bool:
        """True when every client's guarantee holds for all inputs (finite certified mu)."""
        return bool(np.all(np.isfinite(self.mu_certified)))

    @property
    def guarantee_holds(self) -> bool:
        """True when the fit is record-level mu-GDP at each client: certified, and the
        noise secret (drawn from fresh entropy)."""
        return self.certified and self.noise_secret

    @property
    def guarantee(self) -> str:
        """What the fit guarantees, in one line: record-level mu-GDP at each client (its
        mu), nominal only (and why), void while the seed is known, or none (non-private)."""
        if not self.ledger.releases or not math.isfinite(self.mu):
            return "none: nothing was released with noise (a non-private fit)"
        mu = float(np.max(self.mu_composed))
        if not self.certified:
            why = "; ".join(self.assumptions) or "a release without finite sensitivity"
            what = f"nominal only (mu = {mu:g} rests on: {why})"
        else:
            what = f"record-level mu-GDP at each client, mu = {mu:g} (certified)"
        if not self.noise_secret:
            return (f"void while the seed is known: the noise was drawn from a given random_state, and anyone "
                    f"who knows it can regenerate the noise and remove it; with fresh noise (random_state=None, "
                    f"fedgdp fit without --seed) the mechanism is {what}")
        return what

    @property
    def assumptions(self) -> list[str]:
        """What the uncertified releases rest on, and what is unaccounted."""
        out = [f"{r.stage}: {r.assumption}" for r in self.ledger.releases if not r.certified]
        return list(dict.fromkeys(out)) + list(self.ledger.unaccounted)

    def epsilon(self, delta: float = 1e-5, *, nominal: bool = False) -> float:
        """(epsilon, delta)-DP of the worst client: the certified mu converted
        (`fedgdp.core.privacy.gdp_epsilon`); inf when uncertified, unless ``nominal``
        (the composed mu, which holds only under ``assumptions``). It is the
        mechanism's epsilon: a guarantee only while the noise is secret (``guarantee_holds``).

        Parameters
        ----------
        delta : float, default=1e-5
            The delta of (epsilon, delta)-DP.
        nominal : bool, default=False
            Convert the composed (nominal) mu instead of the certified one.

        Returns
        -------
        float
            epsilon of the client with the largest mu; inf when that mu is not finite.
        """
        mu = float(np.max(self.mu_composed if nominal else self.mu_certified))
        return math.inf if not math.isfinite(mu) else privacy.gdp_epsilon(mu, delta)

    def as_dict(self, delta: float = 1e-5) -> dict:
        """A JSON-ready summary: each client's composed and certified mu, the worst
        client's epsilon at ``delta`` (certified and nominal), every release (stage,
        count, certified, assumption; sensitivity and sigma per client) and the
        assumptions. Infinite values are written as the string ``"inf"``.

        Parameters
        ----------
        delta : float, default=1e-5
            The delta of the epsilons reported.

        Returns
        -------
        dict
            Keys ``method``, ``mu``, ``privacy_mode``, ``clip``, ``clip_bound``, ``certified``,
            ``noise_secret``, ``label_domain``, ``guarantee_holds``, ``guarantee``,
            ``clients``, ``mu_composed``, ``mu_certified`` (lists, one per client), ``delta``,
            ``epsilon``, ``epsilon_nominal``, ``assumptions``, ``releases`` (list of dict),
            ``scope`` (the report covers one fit) and ``refusals`` (the refusal rule).
        """
        def num(x):
            x = float(x)
            return x if math.isfinite(x) else str(x)

        releases = [{"stage": r.stage, "count": r.count, "certified": r.certified, "assumption": r.assumption,
                     "sensitivity": [num(v) for v in np.ravel(r.sensitivity)],
                     "sigma": [num(v) for v in np.ravel(r.sigma)]} for r in self.ledger.releases]
        return {
            "method": self.method, "mu": num(self.mu), "privacy_mode": self.privacy_mode, "clip": self.clip,
            "clip_bound": num(self.clip_bound), "certified": self.certified, "noise_secret": self.noise_secret,
            "label_domain": self.label_domain, "guarantee_holds": self.guarantee_holds, "guarantee": self.guarantee,
            "clients": [c.item() if hasattr(c, "item") else c for c in self.clients],
            "mu_composed": [num(v) for v in self.mu_composed], "mu_certified": [num(v) for v in self.mu_certified],
            "delta": delta, "epsilon": num(self.epsilon(delta)),
            "epsilon_nominal": num(self.epsilon(delta, nominal=True)),
            "assumptions": self.assumptions, "releases": releases, "scope": self.scope,
            "refusals": self.refusals,
        }
