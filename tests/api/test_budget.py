"""fedgdp.PrivacyBudget: each record's mu-GDP composed over the fits that used it, in
cross_validate and GridSearchCV (the totals of issue 46 exactly), its refusal before any
release, and what it reports as not covered."""
import math
import os
import pickle
import warnings

import numpy as np
import pytest

from fedgdp import FederatedGLM, PrivacyBudget
from fedgdp.api.budget import BLOCK_MARK, BudgetExceededError, UncoveredSelectionWarning

sklearn = pytest.importorskip("sklearn")
pytestmark = pytest.mark.filterwarnings("ignore::fedgdp.api.diagnostics.ConvergenceWarning")   # 5-step fits

# the float sums of mu^2 are exact here (0.25, 1, 4, 25 are dyadic), but a total is a sqrt: 1e-12
RTOL = 1e-12


def _data(n=600, m=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.logistic(size=n) > 0).astype(int)
    return X, y, np.array([f"c{i % m}" for i in range(n)])


def _est(**kw):       # a cheap private fit: FedSGD with 5 steps, a public clip bound
    return FederatedGLM(classes=[0, 1], clip=2.0, method="fedsgd", method_settings={"K": 5}, **kw)


def test_gridsearch_charges_each_record_its_own_count():
    """KFold(5) over mu in {0.5, 1, 2}, then the refit at mu = 2: a record is in the training
    folds of 4 of 5 fits per candidate, so its total is sqrt(4 (0.25 + 1 + 4) + 4) = 5
    exactly (not the 2 of best_estimator_.privacy_, nor the 5.12 of charging every fit)."""
    from sklearn.model_selection import GridSearchCV, KFold

    X, y, cl = _data()
    with PrivacyBudget(mu=5) as budget, pytest.warns(UncoveredSelectionWarning):
        # the refit at mu = 2 as in the issue (refit=callable: the index of the candidate to refit;
        # chosen by the scores, the refit's mu would depend on the noise)
        gs = GridSearchCV(_est(), {"mu": [0.5, 1, 2]}, cv=KFold(5, shuffle=True, random_state=0),
                          refit=lambda results: 2).fit(X, y, clients=cl)
    assert gs.best_estimator_.mu == 2
    assert math.isclose(budget.spent, 5.0, rel_tol=RTOL) and budget.remaining == pytest.approx(0, abs=1e-6)
    np.testing.assert_allclose(budget.spent_on(X, y, cl), 5.0, rtol=RTOL)       # every record, its own count
    assert len(budget.fits) == 16 and budget.records == 600
    assert [f["rows"] for f in budget.fits] == [480] * 15 + [600]
    assert budget.uncovered[0].startswith("selection: 15 evaluation(s)")
    assert gs.best_estimator_.privacy_.mu == 2          # one fit's report, beside the budget's total


def test_issue_example_and_cross_validate_totals():
    """GridSearchCV over {1, 2, 5} with cv = 3: sqrt(2 (1 + 4 + 25) + mu_best^2) (9.22 for a
    refit at mu = 5, issue 46);
    cross_validate with KFold(5) at mu = 2: sqrt(4 * 4) = 4; a record in no fit spent 0."""
    from sklearn.model_selection import GridSearchCV, KFold, cross_validate

    X, y, cl = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncoveredSelectionWarning)
        with PrivacyBudget(mu=10) as budget:
            gs = GridSearchCV(_est(), {"mu": [1, 2, 5]}, cv=3).fit(X, y, clients=cl)
        best = gs.best_params_["mu"]            # 9.22 when the refit is at mu = 5 (it depends on the noise)
        assert math.isclose(budget.spent, math.sqrt(2 * (1 + 4 + 25) + best ** 2), rel_tol=RTOL)
        with PrivacyBudget(mu=4) as budget:
            cross_validate(_est(mu=2), X[:500], y[:500], cv=KFold(5), params={"clients": cl[:500]})
    assert math.isclose(budget.spent, 4.0, rel_tol=RTOL) and budget.remaining == pytest.approx(0, abs=1e-6)
    spent = budget.spent_on(X, y, cl)
    np.testing.assert_allclose(spent[:500], 4.0, rtol=RTOL)
    np.testing.assert_array_equal(spent[500:], 0.0)


def test_budget_parameter_survives_clone_and_composes_disjoint_rows_per_record():
    from sklearn.base import clone
    from sklearn.model_selection import cross_validate

    X, y, cl = _data()
    budget = PrivacyBudget(mu=3)
    est = _est(mu=2, budget=budget)
    assert clone(est).budget is budget
    est.fit(X[:300], y[:300], cl[:300])
    est.fit(X[300:], y[300:], cl[300:])         # other records: each record has spent 2, not sqrt(8)
    assert math.isclose(budget.spent, 2.0, rel_tol=RTOL) and math.isclose(budget.remaining, math.sqrt(5))
    est.set_params(mu=math.sqrt(5)).fit(X, y, cl)     # exactly what is left
    assert math.isclose(budget.spent, 3.0, rel_tol=RTOL)
    with pytest.raises(BudgetExceededError):
        cross_validate(_est(mu=0.5, budget=budget), X, y, cv=2, params={"clients": cl}, error_score="raise")


def test_a_fit_past_the_budget_is_refused_before_anything_is_computed(monkeypatch):
    """The refusal comes before the clipping bound (the first computation on the data) and
    charges nothing; mu alone over the budget (or mu = inf) is refused before the data are read."""
    import fedgdp.realdata

    X, y, cl = _data()
    budget = PrivacyBudget(mu=2.5)
    with budget:
        _est(mu=2).fit(X, y, cl)

        def reached(*a, **k):
            raise AssertionError("the fit went past the budget's check")

        monkeypatch.setattr(fedgdp.realdata, "clip_bound_real", reached)
        est = _est(mu=2)
        with pytest.raises(BudgetExceededError, match=r"PrivacyBudget\(mu=2.5\): a fit at mu=2 on 10 rows would bring "
                                                      r"a record's total to 2.82843 > 2.5 .*at most mu=1.5 is left"):
            est.fit(X[:10], y[:10], cl[:10])
        assert not hasattr(est, "theta_") and len(budget.fits) == 1 and math.isclose(budget.spent, 2.0)
        for mu in (3, math.inf):                  # public: refused before X is even looked at
            with pytest.raises(BudgetExceededError, match="exceeds the whole budget"):
                FederatedGLM(mu=mu, method="np_pooled" if math.isinf(mu) else "fednewton").fit("not an array", None)
    with pytest.raises(ValueError, match="finite mu"):
        PrivacyBudget(mu=math.inf)
    with pytest.raises(ValueError, match="budget must be a fedgdp.PrivacyBudget"):
        _est(budget=5).fit(X, y, cl)


def test_identical_rows_are_one_record_and_nested_budgets_both_charge():
    X, y, cl = _data()
    X, y, cl = np.vstack([X, X[:1]]), np.append(y, y[0]), np.append(cl, cl[0])     # row 600 copies row 0
    outer, inner = PrivacyBudget(mu=10), PrivacyBudget(mu=10)
    with outer:
        _est(mu=2, budget=inner).fit(X[:300], y[:300], cl[:300])        # holds row 0, not its copy
        _est(mu=2, budget=inner).fit(X[300:], y[300:], cl[300:])        # holds the copy, not row 0
    for b in (outer, inner):
        spent = b.spent_on(X, y, cl)
        assert math.isclose(spent[0], math.sqrt(8)) and math.isclose(spent[600], math.sqrt(8))   # conservative
        assert math.isclose(spent[1], 2.0) and len(b.fits) == 2


def test_uncovered_lists_known_seeds_and_nominal_fits():
    X, y, cl = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with PrivacyBudget(mu=10) as budget:
            _est(mu=1).fit(X, y, cl)                             # fresh noise, public labels: covered
            _est(mu=1, random_state=0).fit(X, y, cl)             # a known seed
            FederatedGLM(mu=1, clip=2.0, method="fedsgd").fit(X, y, cl)    # labels from the data: nominal
    assert budget.evaluations == 0
    found = budget.uncovered
    assert len(found) == 2 and found[0].startswith("fit 1 (fedsgd, mu = 1): noise from a given random_state")
    assert found[1].startswith("fit 2 (fedsgd, mu = 1): nominal only (label set")


def test_a_fit_in_another_process_is_refused():
    """Pickled inside a block (a tool with n_jobs > 1 on processes ships it so), a fit in
    another process is refused; so is a budget parameter unpickled there."""
    X, y, cl = _data()
    est = _est(mu=1)
    with PrivacyBudget(mu=5):
        copy = pickle.loads(pickle.dumps(est))
    assert copy.__dict__[BLOCK_MARK] == os.getpid()
    copy.fit(X, y, cl)                              # the same process: fine, and the mark is gone
    assert BLOCK_MARK not in copy.__dict__
    with PrivacyBudget(mu=5):
        shipped = pickle.loads(pickle.dumps(est))
    shipped.__dict__[BLOCK_MARK] = -1               # as if pickled by another process
    with pytest.raises(BudgetExceededError, match="n_jobs=1"):
        shipped.fit(X, y, cl)
    budget = PrivacyBudget(mu=5)
    budget._pid = -1                                # as if made by another process
    with pytest.raises(BudgetExceededError, match="n_jobs=1"):
        _est(mu=1, budget=budget).fit(X, y, cl)


def test_threads_charge_the_block_and_a_pipeline_scaler_warns():
    """A tool on threads charges the block exactly; a scaler fitted inside the search changes
    the rows per fold, which the budget cannot recognise as the same records: it says so."""
    import joblib
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, cl = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncoveredSelectionWarning)
        with joblib.parallel_config(backend="threading"), PrivacyBudget(mu=5) as budget:
            GridSearchCV(_est(), {"mu": [0.5, 1, 2]}, cv=KFold(5), n_jobs=2, refit=lambda results: 2).fit(
                X, y, clients=cl)
        assert math.isclose(budget.spent, 5.0, rel_tol=RTOL)
        with PrivacyBudget(mu=5), pytest.warns(UserWarning, match="counts them as new records and under-counts"):
            GridSearchCV(make_pipeline(StandardScaler(), _est()), {"federatedglm__mu": [0.5, 1]},
                         cv=KFold(5)).fit(X, y, federatedglm__clients=cl)


@pytest.mark.slow
def test_a_search_on_processes_is_refused_not_undercounted():
    """GridSearchCV(n_jobs=2) on joblib's process backend inside a block: every fit in a
    worker is refused (error_score='raise' surfaces it) rather than charged to no one."""
    import joblib
    from sklearn.model_selection import GridSearchCV

    X, y, cl = _data()
    with joblib.parallel_config(backend="loky"), PrivacyBudget(mu=5):
        with pytest.raises(BudgetExceededError, match="n_jobs=1"):
            GridSearchCV(_est(), {"mu": [0.5, 1]}, cv=2, n_jobs=2, error_score="raise").fit(X, y, clients=cl)


def test_a_record_is_its_features_and_label_whatever_their_types_and_client():
    """Issue 61: four fits at mu = 2 of the same 600 records, y as int or float and the clients as int
    or str (bit-identical fits), compose to sqrt(4 * 4) = 4; under PrivacyBudget(mu=2) the second is refused."""
    X, y, _ = _data()
    ints = np.repeat(np.arange(6), 100)
    variants = [(y, ints), (y.astype(float), ints), (y, ints.astype(str)), (y.astype(float), ints.astype(str))]
    with PrivacyBudget(mu=10) as budget:
        for yy, cc in variants:
            _est(mu=2).fit(X, yy, cc)
    assert math.isclose(budget.spent, 4.0, rel_tol=RTOL) and budget.records == 600
    with PrivacyBudget(mu=2) as budget:
        _est(mu=2).fit(X, y, ints)
        with pytest.raises(BudgetExceededError, match="would bring a record's total to 2.82843"):
            _est(mu=2).fit(X, y.astype(float), ints.astype(str))
    assert math.isclose(budget.spent, 2.0, rel_tol=RTOL)


def test_feature_subsets_and_a_pooled_fit_after_a_federated_one_count_the_same_records():
    """Two fits at mu = 2 on overlapping feature subsets of the same rows, or a federated fit then the pooled
    one (no clients): sqrt(4 + 4) = 2.83 each record; a third on all columns sees both (sqrt(12))."""
    X, y, cl = _data()
    with PrivacyBudget(mu=10) as budget:
        _est(mu=2).fit(X[:, :2], y, cl)
        _est(mu=2).fit(X[:, 1:], y, cl)
        assert math.isclose(budget.spent, math.sqrt(8), rel_tol=RTOL)
        _est(mu=2).fit(X, y, cl)
    assert math.isclose(budget.spent, math.sqrt(12), rel_tol=RTOL)
    np.testing.assert_allclose(budget.spent_on(X, y), math.sqrt(12), rtol=RTOL)
    with PrivacyBudget(mu=10) as budget:
        _est(mu=2).fit(X, y, cl)
        _est(mu=2).fit(X, y, "single")            # the pooled fit: one client
    assert math.isclose(budget.spent, math.sqrt(8), rel_tol=RTOL)
    with PrivacyBudget(mu=2.5) as budget:        # and the refusal sees it: 2.83 > 2.5
        _est(mu=2).fit(X[:, :2], y, cl)
        with pytest.raises(BudgetExceededError):
            _est(mu=2).fit(X[:, 1:], y, "single")


def test_record_keys_are_the_record_not_its_spelling():
    from fedgdp.api.budget import record_keys

    X = np.array([[0.0, 1.5], [-0.0, 1.5]])
    assert record_keys(X, np.array([1, 1]))[0] == record_keys(X, np.array([1.0, True]))[1]   # -0 is 0, 1 is 1.0
    assert record_keys(X, np.array([1, 1]))[0] != record_keys(X, np.array([0, 0]))[0]        # the label counts
    assert record_keys(X, np.array(["a", "a"]))[0] != record_keys(X, np.array([1, 1]))[0]


def test_docstring_example_runs():
    import doctest

    import fedgdp.api.budget

    assert doctest.testmod(fedgdp.api.budget).failed == 0
