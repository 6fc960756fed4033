"""The algorithm core (fedgdp.methods): one registry, backend checks, and the worked
example of docs/ARCHITECTURE.md ("Adding a method") run end to end on both backends."""
import importlib
import sys

import numpy as np
import pytest

from fedgdp import methods
from fedgdp.simulation.params import resolve
from fedgdp.simulation.run import run_cell
from paths import ROOT

# ---------------------------------------------------------- the worked example
#: The new method's module, ``src/fedgdp/methods/oneshot.py``, exactly as docs/ARCHITECTURE.md
#: ("Adding a method") prints it.
ONESHOT = '''"""One-shot averaging: K noisy local steps from 0, averaged once."""
from __future__ import annotations

from ..core import privacy
from .base import Method
from .settings import StepSettings


class OneShot(Method):
    """One-shot averaging: K noisy local steps from 0, averaged once."""

    name, label, algorithm = "oneshot", "One-shot", "one round of Algorithm 3"
    settings_class = StepSettings               # its settings: K, eta (defaults, checks, help)

    def noise_shapes(self, s, m, d):            # simulation: one replicate's pre-drawn noise
        return {"Z": (s.K, m, d)}

    def rounds(self, s):
        return 1

    def plan(self, data, s):                    # its releases: FedAvg's with one round
        return privacy.plan_fedavg(B=data.plan_B, n=data.plan_n, eta=s.eta, R=1, K=s.K)

    def run(self, be, s):
        (sigma,), ledgers = be.calibrate(self, s)
        w = self.weights(be, s)
        local = be.local_steps(be.zeros(), K=s.K, eta=s.eta, sigma=sigma, noise=be.noise.take("Z"))
        return be.finish(be.average(w, local), ledgers, self.comm(s, be.m, be.dk))
'''


@pytest.fixture
def oneshot(tmp_path, monkeypatch):
    """The new module, written as ``oneshot.py`` into a folder that joins the package
    ``fedgdp.methods`` (so it imports as ``fedgdp.methods.oneshot``, relative imports and
    all), and its registry line, ``OneShot()`` in `REGISTRY`'s tuple, for this test only."""
    (tmp_path / "oneshot.py").write_text(ONESHOT)
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "fedgdp.methods.oneshot", raising=False)
    module = importlib.import_module("fedgdp.methods.oneshot")
    monkeypatch.setitem(methods.REGISTRY, "oneshot", module.OneShot())
    yield module
    sys.modules.pop("fedgdp.methods.oneshot", None)


def test_the_worked_example_is_the_one_in_the_docs():
    """docs/ARCHITECTURE.md prints the module this file tests, line for line."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("### Adding a method", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert block == ONESHOT


CELL = {"m": 6, "sizes": "equal(40)", "K": 6, "method_settings": {"fedavg": {"R": 1}}}


def test_a_new_method_runs_through_run_cell(oneshot):
    """Non-private, one-shot averaging is FedAvg with one round, to the last bit; private,
    every client's ledger composes to the cell's mu."""
    rows = run_cell(resolve({**CELL, "mu": "inf", "methods": ["oneshot", "fedavg"]}), [0, 1])
    by = {(r["replicate"], r["method"]): r for r in rows}
    for rep in (0, 1):
        assert by[(rep, "oneshot")]["theta_hat"] == by[(rep, "fedavg")]["theta_hat"]
        assert by[(rep, "oneshot")]["rounds"] == 1
    private = run_cell(resolve({**CELL, "mu": 2.0, "methods": ["oneshot"]}), [0, 1])
    assert [r["mu_composed"] for r in private] == pytest.approx([2.0, 2.0])
    assert all(np.isfinite(r["theta_hat"]).all() for r in private)


def test_a_new_method_runs_on_real_data(oneshot):
    """The same class on the real-data backend (its settings: the class's real-data
    preset, nothing elsewhere): with the same generator it draws what FedAvg with one
    round draws, so the two fits are equal."""
    from fedgdp.core.glm import BINARY_LOGISTIC
    from fedgdp.realdata import FoldData, get_method
    from fedgdp.realdata import resolve as resolve_realdata

    p = resolve_realdata({"methods": ["oneshot"], "method_settings": {"oneshot": {"K": 4}}})
    assert p.method_settings == {"oneshot": {"K": 4, "eta": 0.5}}
    with pytest.raises(ValueError, match=r"unknown setting 'etaa' \(did you mean 'eta'\?\) for method oneshot"):
        resolve_realdata({"methods": ["oneshot"], "method_settings": {"oneshot": {"etaa": 0.1}}})

    rng = np.random.default_rng(0)
    X = [np.column_stack([np.ones(n), rng.random((n, 3))]) for n in (20, 31, 25)]
    Y = [BINARY_LOGISTIC.targets(rng.integers(0, 2, x.shape[0])) for x in X]
    fd = FoldData(BINARY_LOGISTIC, X, Y, mu=2.0, B=0.8, clip={"rule": "fixed", "value": 0.8})
    s = {"K": 4, "eta": 0.5}
    one = get_method("oneshot").fit(fd, s, np.random.default_rng(5))
    avg = get_method("fedavg").fit(fd, {**s, "R": 1}, np.random.default_rng(5))
    assert np.array_equal(one.theta, avg.theta)
    assert one.ledger.composed_mu()[0] == pytest.approx(np.full(3, 2.0))


def test_every_resolver_refuses_an_unknown_setting_with_did_you_mean():
    """Issue 21: a misspelt setting used to run FedSGD with eta 0.5 silently."""
    from fedgdp.realdata import resolve as resolve_realdata

    with pytest.raises(ValueError, match=r"unknown setting 'etaa' \(did you mean 'eta'\?\) for method fedsgd"):
        resolve({"method_settings": {"fedsgd": {"etaa": 0.1}}})
    with pytest.raises(ValueError, match=r"unknown setting 'etaa' \(did you mean 'eta'\?\) for method fedsgd"):
        resolve_realdata({"method_settings": {"fedsgd": {"etaa": 0.1}}})
    with pytest.raises(ValueError, match="fedavg.R must be an integer >= 1"):
        resolve({"method_settings": {"fedavg": {"R": 1.5}}})


def test_real_data_fedhybrid_takes_its_share():
    """share1, FedHybrid's own setting, splits the real-data K1 + K2 = 50 steps too."""
    from fedgdp.realdata import resolve as resolve_realdata

    s = resolve_realdata({"methods": ["fedhybrid"], "method_settings": {"fedhybrid": {"share1": 0.5}}})
    assert {k: s.method_settings["fedhybrid"][k] for k in ("K1", "K2")} == {"K1": 25, "K2": 25}
    assert resolve_realdata({"methods": ["fedhybrid"]}).method_settings["fedhybrid"] == {
        "K1": 30, "eta1": 0.5, "K2": 20, "eta2": 0.5}


# ---------------------------------------------------------------- the registry
def test_one_registry_with_backend_views():
    from fedgdp import realdata
    from fedgdp.simulation import backend as estimators

    assert list(estimators.REGISTRY) == [n for n, m in methods.REGISTRY.items() if "simulation" in m.tags.backends]
    assert list(realdata.REGISTRY) == [n for n, m in methods.REGISTRY.items() if "realdata" in m.tags.backends]
    assert estimators.REGISTRY["fedavg"] is realdata.REGISTRY["fedavg"]
    s = methods.RoundSettings(R=2, K=3)
    assert methods.REGISTRY["np_scaffold"].comm(s, 4, 10)["floats_up"] == 2 * 4 * 10 * 2   # update + variate
    assert methods.REGISTRY["np_fedavg"].comm(s, 4, 10) == methods.REGISTRY["fedavg"].comm(s, 4, 10)
    with pytest.raises(ValueError, match="unknown method 'dp_scaffold'"):
        estimators.get_method("dp_scaffold")          # real data only


def test_a_method_refuses_a_backend_it_does_not_have(block):
    _, _, fd = block({"m": 4, "sizes": "equal(30)", "K": 2})
    with pytest.raises(ValueError, match="does not run on simulation data"):
        methods.REGISTRY["dp_scaffold"].fit(fd, {"R": 1, "K": 1, "eta": 0.5, "eta_g": 1.0}, {"Z": None})


def test_a_new_method_runs_through_the_ledger_the_audit_and_a_figure(oneshot, tmp_path):
    """The rest of issue 21's proof: the class and its registry line, nothing else, and
    the new method is accounted (its ledger composes to mu), audited (every release of
    its plan, no sensitivity exceeded) and drawn in a figure (the fallback style)."""
    import pandas as pd

    from fedgdp.audit import RATIO_TOL, AuditTarget, run_audit
    from fedgdp.common.figures import METHOD_STYLE, method_style
    from fedgdp.simulation.plots import plot_figure
    from fedgdp.simulation.summary import summarise

    rows = []
    for m in (4, 6):
        p = resolve({"m": m, "sizes": "equal(40)", "K": 6, "mu": 2.0, "methods": ["oneshot", "fedavg"],
                     "method_settings": {"fedavg": {"R": 1}}, "study": "s"})
        rows += run_cell(p, [0, 1, 2])
    assert [r["mu_composed"] for r in rows if r["method"] == "oneshot"] == pytest.approx([2.0] * 6)
    summary = summarise(pd.DataFrame(rows))
    assert "oneshot" not in METHOD_STYLE
    spec = {"model": "logistic", "study": "s", "layout": "m_by_method", "panels": [{"sizes": "equal(40)"}],
            "studies": {"s": {"methods": ["fedavg", "oneshot"]}}}
    fig = plot_figure(spec, summary, png=tmp_path / "f.png")
    colours = {ln.get_color() for ax in fig.axes for ln in ax.get_lines()}
    assert method_style("oneshot")["color"] in colours
    audited = run_audit(quick=True, targets=[AuditTarget("simulation", "oneshot", "logistic", "paper", 0.081)],
                        nn=False, histogram=False)
    assert [r.method for r in audited] == ["oneshot"] * len(audited) and audited
    assert all(r.ratio <= 1 + RATIO_TOL for r in audited), [(r.release, r.ratio) for r in audited]


@pytest.mark.parametrize("name", ["fedsgd", "fedavg", "fedhybrid", "fednewton"])
def test_the_hooks_receive_frozen_settings_and_a_record_fits_the_same(name, block):
    """``Method.settings`` freezes a resolved record (its values kept, a field it lacks at its
    default); ``fit`` takes the record or the frozen settings and returns the same estimate from
    the same noise; an unknown key is refused by name."""
    import dataclasses

    from conftest import stacked_noise

    p, _, fd = block(dict(sizes="equal(30)", m=3, mu=2.0, K=4, methods=[name]), (0,))
    meth, record = methods.REGISTRY[name], p.method_settings[name]
    s = meth.settings(record)
    assert isinstance(s, meth.settings_class) and meth.settings(s) is s
    assert {k: getattr(s, k) for k in record} == record
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.eta = 1.0  # type: ignore[misc]
    _, noise = stacked_noise(p, name, (0,))
    np.testing.assert_array_equal(meth.fit(fd, record, noise).theta, meth.fit(fd, s, noise).theta)
    with pytest.raises(ValueError, match="has no setting 'bogus'"):
        meth.settings({**record, "bogus": 1})
