"""``fedgdp.PrivacyBudget``: each record's mu-GDP composed over every fit charged to it.

A [`PrivacyBudget`][fedgdp.api.budget.PrivacyBudget] keeps ``sqrt(sum_k mu_k^2)`` per record
over every fit that used it: fits inside ``with budget:`` or given ``budget=``. A record is
what it holds, its features and its label (`record_keys`: ``y`` as int or float, the client
as int or str, or no client, are the same record); a fit on some of the columns knows a
record by a feature value no other row holds in its column (`value_keys`). A fit that would pass the budget
raises [`BudgetExceededError`][fedgdp.api.budget.BudgetExceededError] before any release;
selection on exact scores is not covered (an
[`UncoveredSelectionWarning`][fedgdp.api.budget.UncoveredSelectionWarning]); fits in another
process are refused. docs/privacy.md, "A budget across fits".
"""
from __future__ import annotations

import hashlib
import math
import os
import threading
import warnings

import numpy as np

from ..core import privacy
from ..core.privacy import parse_mu

__all__ = ["PrivacyBudget", "BudgetExceededError", "UncoveredSelectionWarning", "record_keys", "value_keys"]

_ACTIVE: list[PrivacyBudget] = []          # the entered blocks: a global stack, so threads of a tool see them
_LOCK = threading.RLock()                  # guards _ACTIVE and every check-and-charge
_TOL = 1e-12                               # relative slack of the comparison with the budget (float sums)
#: the attribute a pickled estimator carries while a block is active (the pid that pickled it)
BLOCK_MARK = "_budget_block_pid"


class BudgetExceededError(ValueError):
    """A fit would spend more than a `PrivacyBudget` has left for one of its records (or
    would run where the budget cannot charge it); raised before anything is computed."""


class UncoveredSelectionWarning(UserWarning):
    """A fitted estimator was evaluated inside a budget: scores read from exact predictions
    on held-out rows are not covered by the budget (`PrivacyBudget.uncovered`)."""


def _label_bytes(label) -> bytes:
    """A label as the record holds it: a number by its float64 value (1, 1.0 and True are one label), any other
    label by its text."""
    if isinstance(label, (bool, int, float, np.bool_, np.number)):
        return b"n" + np.float64(float(label) + 0.0).tobytes()
    return b"s" + str(label).encode()


def record_keys(X: np.ndarray, y: np.ndarray) -> list[bytes]:
    """One 16-byte key per row: the BLAKE2b digest of what the record is, its features (float64, -0 as 0)
    and its label (a number by its value, so ``y`` as int or float gives the same key); the client label is
    not part of it (conservative: the same record under two clients is one record).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The features as the estimator receives them (without the intercept column).
    y : ndarray of shape (n,)
        The labels or counts.
    """
    X = np.ascontiguousarray(np.asarray(X, dtype=np.float64) + 0.0)
    return [hashlib.blake2b(row.tobytes() + b"\x1f" + _label_bytes(label), digest_size=16).digest()
            for row, label in zip(X, np.asarray(y).tolist())]


def value_keys(X: np.ndarray, y: np.ndarray) -> list[list[bytes]]:
    """For each row, one key per feature value that no other row of ``X`` holds in its column, with the row's
    label: how a record is recognised in a fit that uses only some of its columns (`PrivacyBudget`).

    Parameters
    ----------
    X : ndarray of shape (n, p)
    y : ndarray of shape (n,)
    """
    X = np.asarray(X, dtype=np.float64) + 0.0
    out: list[list[bytes]] = [[] for _ in range(len(X))]
    labels = [_label_bytes(v) for v in np.asarray(y).tolist()]
    for j in range(X.shape[1] if X.ndim == 2 else 0):
        values, inverse, counts = np.unique(X[:, j], return_inverse=True, return_counts=True)
        for i in np.flatnonzero(counts[inverse] == 1):
            out[i].append(hashlib.blake2b(b"v" + X[i, j].tobytes() + b"\x1f" + labels[i], digest_size=16).digest())
    return out


def _row_keys(X: np.ndarray, y: np.ndarray) -> list[list[bytes]]:
    """Each row's keys: its `record_keys` key first, then its `value_keys`."""
    return [[k, *v] for k, v in zip(record_keys(X, y), value_keys(X, y))]


class PrivacyBudget:
    """A total mu-GDP per record, charged by every fit that uses the record.

    Parameters
    ----------
    mu : float
        Each record's total budget (finite, > 0); a record's total is ``sqrt(sum_k mu_k^2)``.

    Attributes
    ----------
    fits : list of dict
        One per charged fit: ``method``, ``mu``, ``rows``, ``records``, then ``certified`` and
        ``noise_secret`` once it has ended (None until then).
    evaluations : int
        Calls of a prediction method of a charged estimator while the budget is active.

    Examples
    --------
    >>> import numpy as np
    >>> from fedgdp import FederatedGLM, PrivacyBudget
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 3)); y = (X[:, 0] + rng.logistic(size=600) > 0).astype(int)
    >>> clients = np.repeat(np.arange(6), 100)
    >>> with PrivacyBudget(mu=3) as budget:
    ...     est = FederatedGLM(mu=2, clip=2.0, classes=[0, 1]).fit(X, y, clients)
    ...     est = est.set_params(mu=1).fit(X[:300], y[:300], clients[:300])
    >>> round(budget.spent, 4), round(budget.remaining, 4)     # sqrt(4 + 1), sqrt(9 - 5)
    (2.2361, 2.0)
    """

    def __init__(self, mu):
        mu = parse_mu(mu)
        if not math.isfinite(mu):
            raise ValueError(f"PrivacyBudget needs a finite mu (a total each record may spend), got mu={mu}")
        self.mu = mu
        self.fits: list[dict] = []
        self.evaluations = 0
        self._parent: dict[bytes, bytes] = {}       # record and value keys, joined when they are one record
        self._fits_of: dict[bytes, dict[int, float]] = {}   # a record's root key -> {fit index: mu}
        self._charged: set[bytes] = set()           # record keys of the rows charged
        self._client_records: dict = {}             # client label -> distinct records charged
        self._client_rows: dict = {}                # client label -> largest number of its rows in one fit
        self._pid = os.getpid()
        self._warned: set[str] = set()

    # ------------------------------------------------------------ what it says
    @property
    def spent(self) -> float:
        """The largest total of any record, ``max_r sqrt(sum_k mu_k^2)`` (`fedgdp.core.privacy.compose`; 0 before
        any fit)."""
        with _LOCK:
            return max((float(privacy.compose((mu, 1) for mu in f.values())) for f in self._fits_of.values()),
                       default=0.0)

    @property
    def remaining(self) -> float:
        """The largest mu a further fit on every record may spend: ``sqrt(mu^2 - spent^2)``."""
        return privacy.headroom(self.mu, self.spent)

    @property
    def records(self) -> int:
        """The number of distinct records charged."""
        return len(self._charged)

    def spent_on(self, X, y, clients=None) -> np.ndarray:
        """Each row's own total (0 for a row no fit used).

        Parameters
        ----------
        X : array-like of shape (n, p)
        y : array-like of shape (n,)
        clients : array-like of shape (n,), "single" or None
            As given to ``fit``; not part of a record (kept for the call's shape).
        """
        from .routing import client_labels

        X = np.asarray(X, dtype=np.float64)
        groups = client_labels("single" if clients is None else clients, X.shape[0])
        del groups          # the client is not part of a record (record_keys)
        y = np.asarray(y).reshape(-1)
        with _LOCK:
            return np.array([self._prior(keys) for keys in _row_keys(X, y)], dtype=float)

    @property
    def uncovered(self) -> list[str]:
        """What the budget does not cover: exact evaluations (a selection made from them),
        fits whose mu is nominal only, fits whose noise came from a known seed."""
        out = []
        if self.evaluations:
            out.append(f"selection: {self.evaluations} evaluation(s) of fitted estimators on rows (score, predict, "
                       "predict_proba, ...): scores of held-out rows are exact, and a choice made from them "
                       "(cross_validate's scores, GridSearchCV's best candidate and refit) is a release of those "
                       "rows that no ledger or budget accounts for")
        for i, f in enumerate(self.fits):
            if f["certified"] is False:
                out.append(f"fit {i} ({f['method']}, mu = {f['mu']:g}): nominal only ({'; '.join(f['assumptions'])})")
            if f["noise_secret"] is False:
                out.append(f"fit {i} ({f['method']}, mu = {f['mu']:g}): noise from a given random_state, void "
                           "while the seed is known")
        return out

    def __repr__(self) -> str:
        return (f"PrivacyBudget(mu={self.mu:g}; spent {self.spent:.4g}, remaining {self.remaining:.4g}, "
                f"{len(self.fits)} fit(s), {self.records} record(s))")

    # ------------------------------------------------------------ records
    def _find(self, k: bytes) -> bytes:
        root = k
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[k] != root:          # path compression
            self._parent[k], k = root, self._parent[k]
        return root

    def _prior(self, keys: list[bytes]) -> float:
        """The composed mu of the fits that used the record these keys name (0 for a new record)."""
        fits: dict[int, float] = {}
        for root in {self._find(k) for k in keys if k in self._parent}:
            fits.update(self._fits_of.get(root, {}))
        return float(privacy.compose((mu, 1) for mu in fits.values()))

    def _join(self, keys: list[bytes]) -> bytes:
        """One record of these keys (their groups merged, their fits united); its root."""
        for k in keys:
            self._parent.setdefault(k, k)
        root = self._find(keys[0])
        for k in keys[1:]:
            other = self._find(k)
            if other != root:
                self._parent[other] = root
                self._fits_of.setdefault(root, {}).update(self._fits_of.pop(other, {}))
        return root

    # ------------------------------------------------------------ a block, a parameter
    def __enter__(self) -> PrivacyBudget:
        with _LOCK:
            _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        with _LOCK:
            for i in range(len(_ACTIVE) - 1, -1, -1):
                if _ACTIVE[i] is self:
                    del _ACTIVE[i]
                    break

    def __copy__(self) -> PrivacyBudget:       # scikit-learn's clone copies parameters: one budget, shared
        return self

    def __deepcopy__(self, memo) -> PrivacyBudget:
        return self

    # ------------------------------------------------------------ charging
    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise BudgetExceededError(
                f"{self!r} was made in process {self._pid}; this fit runs in process {os.getpid()} (a tool with "
                "n_jobs > 1 on processes), where a charge would reach a copy no one reads: run the tool with "
                "n_jobs=1, or on threads (joblib.parallel_config(prefer='threads'))")

    def _refuse(self, mu: float, worst: float, rows: int) -> None:
        total = float(privacy.compose([(worst, 1), (mu, 1)]))
        raise BudgetExceededError(
            f"PrivacyBudget(mu={self.mu:g}): a fit at mu={mu:g} on {rows} rows would bring a record's total to "
            f"{total:.6g} > {self.mu:g} (that record has spent {worst:.6g}, so at most mu="
            f"{privacy.headroom(self.mu, worst):.6g} is left for it); nothing was computed or released")


def _budgets(est) -> list[PrivacyBudget]:
    """The budgets that charge ``est``: its ``budget`` parameter and the active blocks, once each."""
    own = getattr(est, "budget", None)
    if own is not None and not isinstance(own, PrivacyBudget):
        raise ValueError(f"budget must be a fedgdp.PrivacyBudget or None, got budget={own!r}")
    with _LOCK:
        found = ([own] if own is not None else []) + list(_ACTIVE)
    out: list[PrivacyBudget] = []
    for b in found:
        if not any(b is o for o in out):
            out.append(b)
    return out


def check_public(est, mu: float) -> None:
    """Before the data are read: refuse (`BudgetExceededError`) a fit whose ``mu`` alone exceeds a budget, or
    one in another process.

    Parameters
    ----------
    est : FederatedGLM
        The estimator about to fit.
    mu : float
        The fit's mu (inf: non-private).
    """
    mark = est.__dict__.pop(BLOCK_MARK, None)
    if mark is not None and mark != os.getpid():
        raise BudgetExceededError(
            f"this {type(est).__name__} was sent from a `with PrivacyBudget` block in process {mark} to process "
            f"{os.getpid()} (a tool with n_jobs > 1 on processes), where the block cannot charge its fit: run "
            "the tool with n_jobs=1, or on threads (joblib.parallel_config(prefer='threads'))")
    for b in _budgets(est):
        b._check_process()
        if mu > b.mu * (1 + _TOL):
            what = "a non-private fit (mu=inf)" if math.isinf(mu) else f"a fit at mu={mu:g}"
            raise BudgetExceededError(f"PrivacyBudget(mu={b.mu:g}): {what} exceeds the whole budget of every "
                                      "record it uses; nothing was computed or released")


def charge(est, mu: float, X: np.ndarray, y: np.ndarray, clients: np.ndarray) -> list[tuple]:
    """Before any release: charge ``mu^2`` to every record of the fit in every budget, or refuse
    (`BudgetExceededError`) and charge nothing; each budget charged and the index of the fit's entry in its
    ``fits`` (for `settle`).

    Parameters
    ----------
    est : FederatedGLM
        The estimator about to fit.
    mu : float
        The fit's mu.
    X, y, clients : ndarray
        The rows as ``fit`` checked them (features without the intercept column).
    """
    budgets = _budgets(est)
    if not budgets:
        return []
    rows = _row_keys(X, y)
    labels, counts = np.unique(np.asarray(clients), return_counts=True)
    rows_of = dict(zip(labels.tolist(), counts.tolist()))
    out = []
    with _LOCK:
        for b in budgets:           # every budget agrees, or none is charged
            b._check_process()
            worst = max((b._prior(keys) for keys in rows), default=0.0)
            if privacy.compose([(worst, 1), (mu, 1)]) > b.mu * (1 + _TOL):
                b._refuse(mu, worst, len(rows))
        for b in budgets:
            index = len(b.fits)
            for keys, c in zip(rows, np.asarray(clients).tolist()):
                if keys[0] not in b._charged:
                    b._charged.add(keys[0])
                    b._client_records[c] = b._client_records.get(c, 0) + 1
                b._fits_of.setdefault(b._join(keys), {})[index] = mu
            for c, n in rows_of.items():
                b._client_rows[c] = max(b._client_rows.get(c, 0), n)
            b.fits.append({"method": est.method, "mu": mu, "rows": len(rows), "records": len({k[0] for k in rows}),
                           "certified": None, "noise_secret": None, "assumptions": []})
            out.append((b, index))
            _warn_changed_rows(b)
    return out


def _warn_changed_rows(b: PrivacyBudget) -> None:
    """Warn (once per budget) when a client has more than twice as many distinct records as
    its largest fit held: the same records changed between fits (a scaler fitted inside a
    Pipeline) would look like new records, and the budget would under-count them."""
    for c, distinct in b._client_records.items():
        if distinct > 2 * b._client_rows[c] and "rows" not in b._warned:
            b._warned.add("rows")
            warnings.warn(
                f"PrivacyBudget: client {c!r} has {distinct} distinct rows over fits of at most {b._client_rows[c]} "
                "of its rows: if these are the same records changed between fits (a preprocessing step fitted "
                "inside a Pipeline or search), the budget counts them as new records and under-counts; give the "
                "budgeted fits the records themselves (scale with public constants before the search)",
                UserWarning, stacklevel=4)
            return


def settle(charged: list[tuple], report) -> None:
    """Record in each budget's fit entry whether the fit was certified and its noise secret.

    Parameters
    ----------
    charged : list of (PrivacyBudget, int)
        What `charge` returned.
    report : PrivacyReport
        The fit's report.
    """
    for b, i in charged:
        b.fits[i].update(certified=bool(report.certified), noise_secret=bool(report.noise_secret),
                         assumptions=list(report.assumptions))


def note_evaluation(est) -> None:
    """Count an evaluation of ``est`` in its budgets; an `UncoveredSelectionWarning` once per budget.

    Parameters
    ----------
    est : FederatedGLM
        The fitted estimator evaluated.
    """
    own = getattr(est, "budget", None)
    with _LOCK:
        budgets = ([own] if isinstance(own, PrivacyBudget) else []) + [b for b in _ACTIVE if b is not own]
        first = []
        for b in budgets:
            b.evaluations += 1
            if "evaluation" not in b._warned:
                b._warned.add("evaluation")
                first.append(b)
    for _ in first:
        warnings.warn(
            "a fitted estimator is evaluated inside a PrivacyBudget: scores of held-out rows are exact, and a "
            "choice made from them (a search's best candidate) is not covered by the budget (budget.uncovered; "
            "docs/privacy.md, 'A budget across fits')", UncoveredSelectionWarning, stacklevel=4)


def pickle_state(state: dict) -> dict:
    """An estimator's pickled state, marked with this process while a block is active (`check_public`).

    Parameters
    ----------
    state : dict
        The estimator's ``__dict__``.
    """
    with _LOCK:
        if _ACTIVE:
            return {**state, BLOCK_MARK: os.getpid()}
    return state
