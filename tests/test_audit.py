"""The empirical privacy audit: it flags the paper's FedNewton Newton step and finds
every certified release within its recorded sensitivity.

The fast lane audits the simulation and real-data releases (about 2 CPU-s); the CNN
releases (torch, about 10 CPU-s) and the command line on the full audit are marked slow."""
import json
import sys

import pytest

from fedgdp.audit import _audit_nn, run_audit
from fedgdp.cli import main
from fedgdp.simulation.backend import REGISTRY
from fedgdp.realdata import REGISTRY as REAL


@pytest.fixture(scope="module")
def rows():
    """Every simulation and real-data release: run_audit with torch hidden (it audits
    the CNN methods only when torch imports; those are :func:`nn_rows`)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "torch", None)
        return run_audit(quick=True)


@pytest.fixture(scope="module")
def nn_rows():
    pytest.importorskip("torch")
    return _audit_nn(0)


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


@pytest.mark.slow
def test_cli_json(capsys):
    assert main(["audit", "--quick", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"method", "model", "release", "certified", "observed", "recorded", "ratio"} <= set(out[0])


def test_cli_prints_the_audit_as_json_and_as_a_table(rows, capsys, monkeypatch):
    """The command's plumbing on the rows above (the full audit through it: test_cli_json)."""
    import fedgdp.audit

    monkeypatch.setattr(fedgdp.audit, "run_audit", lambda quick=False, seed=0: rows)
    assert main(["audit", "--quick", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == len(rows)
    assert {"method", "model", "release", "certified", "observed", "recorded", "ratio"} <= set(out[0])
    assert main(["audit", "--quick"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["method", "model", "mode"] and len(table) == len(rows) + 1


@pytest.mark.slow
def test_nn_methods_are_audited_when_torch_imports(nn_rows):
    from fedgdp.nn.settings import METHODS

    assert all(r.model == "cnn" for r in nn_rows)
    assert {f"nn:{m}" for m in METHODS} == {r.method for r in nn_rows}
    assert {"local step", "gradient", "newton"} == {r.release for r in nn_rows}
    bad = [r for r in nn_rows if r.certified and r.ratio > 1 + 1e-9]
    assert not bad, bad
    assert all(r.observed > 0 for r in nn_rows)
