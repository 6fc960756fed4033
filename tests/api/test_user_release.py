"""A private release of a user's own data (issue 30, items 1, 2 and 5): fresh noise unless a
seed is given (and then the report says the guarantee is void while the seed is known), a
public label domain (nothing observable depends on a record's label), a finite epsilon
for every accepted mu, and one-line errors for a missing label."""
import math
import warnings

import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api.estimator import LABELS_FROM_DATA, PrivacyLeakWarning
from fedgdp.core.seeds import seed_sequence


def _data(n=600, m=6, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    score = X[:, 0] - 0.5 * X[:, 1] + rng.logistic(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y, np.repeat(np.arange(m), n // m)


# ----------------------------------------------------------- item 1: the seed
def test_default_fits_of_the_same_data_draw_different_noise():
    """Two releases of the same data differ (fresh noise): nobody can rerun the fit on a
    candidate neighbour and match the coefficients."""
    X, y, clients = _data()
    a, b = (FederatedGLM(mu=2, clip=2.0, classes=[0, 1]).fit(X, y, clients) for _ in range(2))
    assert not np.allclose(a.coef_, b.coef_)
    for est in (a, b):
        rep = est.privacy_
        assert rep.noise_secret and rep.certified and rep.guarantee_holds
        assert rep.guarantee == "record-level mu-GDP at each client, mu = 2 (certified)"
        d = rep.as_dict()
        assert d["noise_secret"] is True and d["guarantee_holds"] is True and d["label_domain"] == "public"


@pytest.mark.parametrize("seed", [0, np.random.SeedSequence(3), np.random.RandomState(1)])
def test_a_known_seed_reproduces_and_the_report_says_the_noise_is_not_secret(seed):
    """A given random_state reproduces the fit; the mechanism stays certified, but the
    report marks the guarantee void while the seed is known (docs/privacy.md)."""
    X, y, clients = _data()
    est = FederatedGLM(mu=2, clip=2.0, classes=[0, 1], random_state=seed).fit(X, y, clients)
    if not isinstance(seed, np.random.RandomState):       # a RandomState is consumed by the fit
        again = FederatedGLM(mu=2, clip=2.0, classes=[0, 1], random_state=seed).fit(X, y, clients)
        np.testing.assert_array_equal(est.coef_, again.coef_)
    rep = est.privacy_
    assert rep.certified and not rep.noise_secret and not rep.guarantee_holds
    assert rep.guarantee.startswith("void while the seed is known: ")
    assert "anyone who knows it can regenerate the noise and remove it" in rep.guarantee
    d = rep.as_dict()
    assert d["noise_secret"] is False and d["guarantee_holds"] is False and d["guarantee"] == rep.guarantee


def test_the_pipelines_seed_sequence_is_a_known_seed():
    X, y, clients = _data()
    est = FederatedGLM(mu=2, clip=2.0, classes=[0, 1], random_state=seed_sequence(2026, {"k": 1}, 0, 0))
    assert not est.fit(X, y, clients).privacy_.noise_secret


# ----------------------------------------------------------- item 2: the label domain
def test_an_extra_label_record_changes_nothing_visible_when_classes_are_given():
    """The neighbour that replaces one record's label by one nobody else has: with classes
    given, classes_ and coef_.shape are those of the domain on both; without, the record
    shows (the leak) and the fit says so."""
    X, y, clients = _data(classes=3)
    y2 = y.copy()
    y2[17] = 3                                    # the only record with label 3
    fits = [FederatedGLM(family="multinomial", mu=2, clip=2.0, classes=[0, 1, 2, 3]).fit(X, v, clients)
            for v in (y, y2)]
    for est in fits:
        np.testing.assert_array_equal(est.classes_, [0, 1, 2, 3])
        assert est.coef_.shape == (4, 3) and est.intercept_.shape == (4,)
        assert est.privacy_.certified and est.privacy_.label_domain == "public"
    with pytest.warns(PrivacyLeakWarning, match="label set is taken from the data"):
        leaky = [FederatedGLM(family="multinomial", mu=2, clip=2.0).fit(X, v, clients) for v in (y, y2)]
    assert leaky[0].coef_.shape != leaky[1].coef_.shape                  # what classes= prevents
    for est in leaky:
        assert not est.privacy_.certified and est.privacy_.label_domain == LABELS_FROM_DATA
        assert est.privacy_.epsilon(1e-5) == math.inf
        assert est.privacy_.epsilon(1e-5, nominal=True) == pytest.approx(10.0, abs=0.01)
        assert any(a.startswith("label set: classes_ is np.unique(y)") for a in est.privacy_.assumptions)


def test_logistic_with_classes_releases_when_y_holds_one_class():
    """Without classes a y of one class is a ValueError, a refusal that depends on the data;
    with classes the release goes ahead, with the domain's shapes."""
    X, y, clients = _data()
    for value in (0, 1):
        est = FederatedGLM(mu=2, clip=2.0, classes=[0, 1]).fit(X, np.full(len(y), value), clients)
        np.testing.assert_array_equal(est.classes_, [0, 1])
        assert est.coef_.shape == (1, 3) and est.privacy_.certified and np.all(np.isfinite(est.coef_))
    est = FederatedGLM(mu=2, clip=2.0, classes=["no", "yes"]).fit(X, np.where(y == 1, "yes", "no"), clients)
    assert list(est.classes_) == ["no", "yes"] and set(est.predict(X)) <= {"no", "yes"}
    with pytest.raises(ValueError, match="only one class"):
        FederatedGLM(mu=2, clip=2.0).fit(X, np.zeros(len(y), int), clients)


def test_classes_are_sorted_whatever_order_is_given():
    """classes_ is the domain sorted (scikit-learn's order); logistic's positive class is
    classes_[1] (tests/api/test_scorers.py holds the scorers to it)."""
    X, y, clients = _data()
    a = FederatedGLM(mu=math.inf, method="np_pooled", classes=[0, 1]).fit(X, y, clients)
    b = FederatedGLM(mu=math.inf, method="np_pooled", classes=[1, 0]).fit(X, y, clients)
    np.testing.assert_array_equal(b.classes_, [0, 1])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=0, atol=1e-10)    # fresh row orders: summation order only
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    with pytest.raises(ValueError, match="classes must hold labels of one type that sort"):
        FederatedGLM(classes=np.array([1, "a"], dtype=object)).fit(X, y, clients)


def test_a_label_outside_the_domain_is_refused_before_anything_is_computed(monkeypatch):
    """The rule, stated in advance: a row whose label is not in classes is a ValueError
    naming the label and the row; it is raised before the clipping bound or any release
    is computed, so nothing is released."""
    import fedgdp.realdata

    def reached(*a, **k):
        raise AssertionError("the fit went past the label check")

    monkeypatch.setattr(fedgdp.realdata, "clip_bound_real", reached)
    X, y, clients = _data()
    y = y.copy()
    y[42] = 5
    est = FederatedGLM(mu=2, classes=[0, 1])
    with pytest.raises(ValueError, match=r"y holds the label 5 at row 42 \(from 0; 1 row\(s\) in all\), which is "
                                         r"not in classes=\[0, 1\]"):
        est.fit(X, y, clients)
    assert not hasattr(est, "theta_") and not hasattr(est, "privacy_")


@pytest.mark.parametrize("params,match", [
    ({"classes": "ab"}, "classes must be a list of labels"),
    ({"classes": [0, 0]}, "classes must be distinct"),
    ({"classes": [1]}, "family 'logistic' needs exactly 2 classes"),
    ({"classes": [0, 1, 2]}, "family 'logistic' needs exactly 2 classes"),
    ({"classes": [0], "family": "multinomial"}, "family 'multinomial' needs at least 2 classes"),
    ({"classes": [0, None]}, "missing label"),
    ({"classes": [0.0, np.nan]}, "classes must hold finite labels"),
    ({"classes": [0, 1], "family": "poisson"}, "classes is for the classifiers"),
])
def test_bad_classes_are_refused_naming_them(params, match, monkeypatch):
    import fedgdp.realdata

    monkeypatch.setattr(fedgdp.realdata, "get_method", lambda *a: pytest.fail("got past the checks"))
    X, y, clients = _data()
    with pytest.raises(ValueError, match=match):
        FederatedGLM(mu=2, **params).fit(X, y, clients)


def test_poisson_has_no_label_domain_and_no_label_warning():
    X, _, clients = _data()
    counts = np.random.default_rng(1).poisson(np.exp(0.2 + 0.3 * X[:, 0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        est = FederatedGLM(family="poisson", mu=2, clip=3.0).fit(X, counts, clients)
    assert est.privacy_.label_domain is None and est.privacy_.certified


# ----------------------------------------------------------- item 5: edges
@pytest.mark.parametrize("family", ["logistic", "multinomial", "poisson"])
@pytest.mark.parametrize("classes", [None, [0, 1]])
def test_y_holding_none_is_a_value_error_naming_y(family, classes):
    X, y, clients = _data()
    y = y.astype(object)
    y[9] = None
    params = {"classes": classes} if family != "poisson" and classes is not None else {}
    with pytest.raises(ValueError, match=r"y contains a missing label \(None or NaN\) at row 9"):
        FederatedGLM(family=family, mu=2, **params).fit(X, y, clients)


def test_epsilon_is_finite_at_mu_30():
    """privacy_.epsilon overflowed (OverflowError) from mu = 30."""
    X, y, clients = _data()
    rep = FederatedGLM(mu=30, clip=2.0, classes=[0, 1]).fit(X, y, clients).privacy_
    assert rep.epsilon(1e-5) == pytest.approx(577.01, abs=0.01)
    assert rep.as_dict()["epsilon"] == pytest.approx(577.01, abs=0.01)
