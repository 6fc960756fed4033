"""Client labels through scikit-learn's tools: metadata routing in cross_validate,
GridSearchCV and Pipeline, the spellings without routing, and the loud default."""
import warnings

import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api.estimator import FIT_SCOPE, SingleClientWarning

sklearn = pytest.importorskip("sklearn")


def _toy(n=600, m=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.logistic(size=n) > 0).astype(int)
    return X, y, np.array([f"c{i % m}" for i in range(n)])       # every fold holds every client


class Recorder(FederatedGLM):
    """Records the number of clients of every fit (what the routing delivered)."""

    seen: list = []

    def fit(self, X, y, clients=None):
        super().fit(X, y, clients)
        Recorder.seen.append(self.n_clients_)
        return self


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


def _est(**kw):
    return Recorder(mu=4, clip=2.0, method="fedsgd", method_settings={"K": 5}, random_state=0, **kw)


def test_metadata_routing_in_cross_validate_gridsearch_and_pipeline(routing):
    from sklearn.model_selection import GridSearchCV, GroupKFold, cross_validate
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, cl = _toy()
    Recorder.seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingleClientWarning)     # a dropped label would fail here
        res = cross_validate(_est().set_fit_request(clients=True), X, y, cv=3, params={"clients": cl})
        assert Recorder.seen == [6, 6, 6] and np.all(res["test_score"] > 0.6)
        Recorder.seen = []
        gs = GridSearchCV(_est().set_fit_request(clients=True), {"mu": [1.0, 4.0]}, cv=2).fit(X, y, clients=cl)
        assert Recorder.seen == [6] * 5 and gs.best_estimator_.n_clients_ == 6      # 2 x 2 fits and the refit
        Recorder.seen = []
        pipe = make_pipeline(StandardScaler(), _est().set_fit_request(clients=True)).fit(X, y, clients=cl)
        assert Recorder.seen == [6] and pipe[-1].n_clients_ == 6
        Recorder.seen = []        # groups for the splitter, clients for the fit, side by side
        res = cross_validate(make_pipeline(StandardScaler(), _est().set_fit_request(clients=True)), X, y,
                             cv=GroupKFold(3), params={"clients": cl, "groups": cl})
        assert Recorder.seen == [4, 4, 4] and np.all(res["test_score"] > 0.6)       # scored, not NaN


def test_routing_refuses_clients_that_were_not_requested(routing):
    from sklearn.exceptions import UnsetMetadataPassedError
    from sklearn.model_selection import cross_validate

    X, y, cl = _toy()
    with pytest.raises(UnsetMetadataPassedError, match="clients"):
        cross_validate(_est(), X, y, cv=2, params={"clients": cl})


def test_set_fit_request_needs_routing_and_survives_clone():
    from sklearn.base import clone

    with pytest.raises(RuntimeError, match="enable_metadata_routing=True"):
        FederatedGLM().set_fit_request(clients=True)
    with sklearn.config_context(enable_metadata_routing=True):
        est = FederatedGLM().set_fit_request(clients=True)
        assert clone(est).get_metadata_routing().fit.requests["clients"] is True
        assert FederatedGLM().get_metadata_routing().fit.requests["clients"] is None


def test_spellings_without_routing():
    from sklearn.model_selection import GridSearchCV, cross_validate
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, cl = _toy()
    Recorder.seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingleClientWarning)
        cross_validate(_est(), X, y, cv=3, params={"clients": cl})
        GridSearchCV(_est(), {"mu": [4.0]}, cv=2).fit(X, y, clients=cl)
        make_pipeline(StandardScaler(), _est()).fit(X, y, recorder__clients=cl)
    assert Recorder.seen == [6] * 3 + [6] * 3 + [6]


def test_missing_clients_warn_naming_the_guarantee_and_single_is_silent():
    X, y, _ = _toy()
    with pytest.warns(SingleClientWarning, match="one client holds all 600 rows .*record-level mu-GDP of the whole"):
        est = FederatedGLM(clip=2.0, random_state=0).fit(X, y)
    assert est.n_clients_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingleClientWarning)
        same = FederatedGLM(clip=2.0, random_state=0).fit(X, y, clients="single")
    np.testing.assert_array_equal(same.theta_, est.theta_)


def test_cross_val_score_without_clients_is_loud():
    from sklearn.model_selection import cross_val_score

    X, y, _ = _toy()
    with pytest.warns(SingleClientWarning):
        cross_val_score(FederatedGLM(clip=2.0, random_state=0), X, y, cv=2)


def test_privacy_report_says_it_covers_one_fit():
    X, y, cl = _toy()
    rep = FederatedGLM(clip=2.0, random_state=0).fit(X, y, cl).privacy_
    assert rep.scope == FIT_SCOPE and rep.scope.startswith("one fit")
    assert rep.as_dict()["scope"] == FIT_SCOPE
    from fedgdp.api.estimator import REFUSAL_RULE

    assert rep.refusals == REFUSAL_RULE and rep.as_dict()["refusals"].startswith("every refusal depends on public")
