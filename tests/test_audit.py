"""The empirical privacy audit: it flags the paper's FedNewton Newton step and finds
every certified release within its recorded sensitivity."""
import json

import pytest

from fedgdp.audit import run_audit
from fedgdp.cli import main
from fedgdp.estimators import REGISTRY
from fedgdp.realdata import REGISTRY as REAL


@pytest.fixture(scope="module")
def rows():
    return run_audit(quick=True)


def test_every_registered_method_and_release_is_audited(rows):
    seen = {(r.method, r.model) for r in rows}
    for name in REGISTRY:
        assert {(name, "logistic"), (name, "poisson")} <= seen
    for name, meth in REAL.items():
        if meth.private:
            assert {(name, "binary"), (name, "multiclass")} <= seen
    assert {("clip_private_quantile", "logistic"), ("clip_private_quantile", "poisson")} <= seen
    assert {(r.method, r.mode, r.release) for r in rows if r.method == "fednewton"} >= {
        ("fednewton", "paper", "newton"), ("fednewton", "certified", "newton"),
        ("fednewton", "paper", "local step (half 1)")}


def test_certified_releases_stay_within_their_sensitivity(rows):
    bad = [r for r in rows if r.certified and r.ratio > 1 + 1e-9]
    assert not bad, bad
    assert all(r.observed > 0 for r in rows)      # every candidate set moved the release


def test_paper_newton_step_is_flagged(rows):
    paper = [r for r in rows if r.method == "fednewton" and r.mode == "paper" and r.release == "newton"]
    assert len(paper) == 4 and all(not r.certified for r in paper)
    sims = [r for r in paper if r.model in ("logistic", "poisson")]
    assert all(r.ratio > 2 for r in sims), sims           # the leak is well above noise level
    assert max(r.ratio for r in paper) > 2


def test_cli_json(capsys):
    assert main(["audit", "--quick", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"method", "model", "release", "certified", "observed", "recorded", "ratio"} <= set(out[0])


def test_nn_methods_are_audited_when_torch_imports(rows):
    pytest.importorskip("torch")
    from fedgdp.nn.calibration import METHODS

    nn_rows = [r for r in rows if r.model == "cnn"]
    assert {f"nn:{m}" for m in METHODS} == {r.method for r in nn_rows}
    assert {"local step", "gradient", "newton"} == {r.release for r in nn_rows}
