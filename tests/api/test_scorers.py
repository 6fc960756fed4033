"""scikit-learn's scorers on FederatedGLM: ``classes`` in any order gives scikit-learn's
sorted ``classes_`` and the same scores as the sorted-order fit (alone and in GridSearchCV);
``sample_weight`` is refused by ``fit`` and ``score`` alike, and the routing agrees."""
import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api.routing import SAMPLE_WEIGHT_REFUSAL

sklearn = pytest.importorskip("sklearn")

BINARY = ("roc_auc", "neg_log_loss", "average_precision", "accuracy")
MULTI = ("roc_auc_ovr", "neg_log_loss", "accuracy")


def _binary(n=1200, m=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.logistic(size=n) > 0).astype(int)
    return X, y, np.repeat(np.arange(m), n // m)


def _multi(n=1600, m=8, C=4, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    S = 2 * X @ rng.normal(size=(3, C)) + rng.gumbel(size=(n, C))
    return X, np.array(["a", "b", "c", "d"])[np.argmax(S, axis=1)], np.repeat(np.arange(m), n // m)


def _scores(est, X, y, names):
    from sklearn.metrics import get_scorer

    return np.array([get_scorer(s)(est, X, y) for s in names])


@pytest.mark.parametrize("family,data,orders,names", [
    ("logistic", _binary, ([0, 1], [1, 0]), BINARY),
    ("multinomial", _multi, (["a", "b", "c", "d"], ["c", "a", "d", "b"], ["d", "c", "b", "a"]), MULTI),
], ids=["binary", "multiclass"])
def test_any_order_of_classes_gives_the_sorted_fit_and_its_scores(family, data, orders, names):
    """The same random_state draws the same noise, so a scrambled ``classes`` must give the
    sorted-order fit exactly (tolerance 0: the codes, hence every number, are the same), and
    the scores must be those of a working classifier (mu = 4 on 1,200-1,600 rows: the
    non-private AUC is about 0.8 and 0.95; 0.7 leaves room for the noise, and a column
    order mixed up as in issue 46 scored 0.27 and 0.45)."""
    X, y, cl = data()
    fits = [FederatedGLM(family=family, classes=c, mu=4, clip=2.0, random_state=3).fit(X, y, cl) for c in orders]
    ref = _scores(fits[0], X, y, names)
    assert ref[0] > 0.7, ref
    for est in fits[1:]:
        np.testing.assert_array_equal(est.classes_, np.unique(y))
        np.testing.assert_array_equal(est.theta_, fits[0].theta_)
        np.testing.assert_array_equal(_scores(est, X, y, names), ref)
        # predict_proba's columns are classes_: the most probable column is predict's label
        np.testing.assert_array_equal(est.classes_[np.argmax(est.predict_proba(X), axis=1)], est.predict(X))


def test_logistic_positive_class_is_the_last_of_classes_():
    """Logistic's positive class is classes_[1] (the larger label), whatever the order given:
    predict_proba[:, 1] and decision_function > 0 speak for it, as scikit-learn's scorers read."""
    X, y, cl = _binary()
    labels = np.where(y == 1, "yes", "no")
    est = FederatedGLM(classes=["yes", "no"], mu=4, clip=2.0, random_state=0).fit(X, labels, cl)
    assert list(est.classes_) == ["no", "yes"]
    p = est.predict_proba(X)[:, 1]
    assert np.mean(p[labels == "yes"]) > np.mean(p[labels == "no"])
    np.testing.assert_array_equal(est.predict(X), np.where(est.decision_function(X) > 0, "yes", "no"))


@pytest.mark.parametrize("family,data,orders,names", [
    ("logistic", _binary, ([0, 1], [1, 0]), BINARY),
    ("multinomial", _multi, (["a", "b", "c", "d"], ["d", "b", "a", "c"]), MULTI),
], ids=["binary", "multiclass"])
def test_gridsearch_scores_agree_for_any_order_of_classes(family, data, orders, names):
    """GridSearchCV over mu ranks candidates on the same scores whatever the order of
    ``classes`` (every clone keeps random_state, so each fold draws the same noise in both
    searches: tolerance 0)."""
    from sklearn.model_selection import GridSearchCV, KFold

    X, y, cl = data()
    results = []
    for classes in orders:
        est = FederatedGLM(family=family, classes=classes, clip=2.0, random_state=5)
        gs = GridSearchCV(est, {"mu": [1.0, 4.0]}, scoring=list(names), refit=names[0],
                          cv=KFold(3, shuffle=True, random_state=0)).fit(X, y, clients=cl)
        results.append(gs)
    for gs in results[1:]:
        for s in names:
            np.testing.assert_array_equal(gs.cv_results_[f"mean_test_{s}"], results[0].cv_results_[f"mean_test_{s}"])
        assert gs.best_params_ == results[0].best_params_
    assert results[0].best_score_ > 0.7


def test_sample_weight_is_refused_by_fit_and_score_alike():
    X, y, cl = _binary()
    est = FederatedGLM(classes=[0, 1], mu=4, clip=2.0, random_state=0)
    w = np.ones(len(y))
    with pytest.raises(ValueError, match="FederatedGLM.fit: sample_weight is not supported"):
        est.fit(X, y, cl, sample_weight=w)
    assert not hasattr(est, "theta_")
    est.fit(X, y, cl, sample_weight=None)          # None: no weights, as scikit-learn spells it
    with pytest.raises(ValueError, match="FederatedGLM.score: sample_weight is not supported"):
        est.score(X, y, sample_weight=w)
    assert est.score(X, y) == est.score(X, y, sample_weight=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'weights'"):
        est.fit(X, y, cl, weights=w)
    assert "sensitivity" in SAMPLE_WEIGHT_REFUSAL


def test_sample_weight_through_scikit_learn_tools_is_refused():
    """Without routing the tools pass it to fit (refused); with routing it is never
    requested (set_fit_request and set_score_request refuse to ask for it), so scikit-learn
    refuses it. scikit-learn's meta-estimators see no sample_weight in fit's signature."""
    from sklearn.exceptions import UnsetMetadataPassedError
    from sklearn.model_selection import GridSearchCV, cross_validate
    from sklearn.utils.validation import has_fit_parameter

    X, y, cl = _binary()
    w = np.ones(len(y))
    est = FederatedGLM(classes=[0, 1], mu=4, clip=2.0, random_state=0)
    assert not has_fit_parameter(est, "sample_weight")
    with pytest.raises(ValueError, match="sample_weight is not supported"):
        GridSearchCV(est, {"mu": [4.0]}, cv=2, error_score="raise").fit(X, y, clients=cl, sample_weight=w)
    with pytest.raises(ValueError, match="sample_weight is not supported"):
        cross_validate(est, X, y, cv=2, params={"clients": cl, "sample_weight": w}, error_score="raise")
    with sklearn.config_context(enable_metadata_routing=True):
        est = FederatedGLM(classes=[0, 1], mu=4, clip=2.0, random_state=0)
        routing = est.get_metadata_routing()
        assert routing.fit.requests == {"clients": None} and routing.score.requests == {"sample_weight": None}
        with pytest.raises(ValueError, match="FederatedGLM.set_fit_request: sample_weight is not supported"):
            est.set_fit_request(clients=True, sample_weight=True)
        for alias in (True, "w"):
            with pytest.raises(ValueError, match="FederatedGLM.set_score_request: sample_weight is not supported"):
                est.set_score_request(sample_weight=alias)
        est.set_fit_request(clients=True).set_score_request(sample_weight=False)
        assert est.get_metadata_routing().score.requests == {"sample_weight": False}
        est.set_score_request(sample_weight=None)
        with pytest.raises(UnsetMetadataPassedError, match="sample_weight"):
            cross_validate(est, X, y, cv=2, params={"clients": cl, "sample_weight": w})
        res = cross_validate(est, X, y, cv=2, params={"clients": cl}, scoring="roc_auc")
        assert np.all(res["test_score"] > 0.7)
