"""The CNN runs' releases and noise calibration: ``release: clip_only`` (clipped at B,
no noise) and ``accounting: schedule`` (each client calibrated to the releases it makes
under a participation schedule drawn first; docs/methods.md §6)."""
from fractions import Fraction

import numpy as np
import pytest

from fedgdp.core import privacy

torch = pytest.importorskip("torch")

from fedgdp.nn.settings import METHODS, label, resolve  # noqa: E402
from fedgdp.nn.train import ClientData, train  # noqa: E402


def _clients(m=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    sizes = [6, 4, 9, 5, 7, 3, 8, 6][:m]
    return ClientData([torch.randn((s, 1, 4, 4), generator=g, dtype=torch.float64) for s in sizes],
                      [torch.randint(0, 3, (s,), generator=g) for s in sizes])


def _net():
    from fedgdp.nn.models import ConvNet

    torch.manual_seed(0)
    net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3).double()
    return {k: v.detach() for k, v in net.named_parameters()}


def _fit(method, **over):
    p = resolve({"figure": "fig10", "q": 0.25, "rounds": 4, "local_epochs": 2, "newton_cycles": 2, **over})
    return train(method, _net(), _clients(), p, np.random.default_rng(11), torch.Generator().manual_seed(5)), p


def test_calibrate_schedule_with_every_round_is_the_printed_calibration():
    n = np.array([[10.0, 20.0, 5.0]])
    plan = (privacy.ReleaseSpec("local step", 6, 2.0, n, Fraction(3, 4)),
            privacy.ReleaseSpec("newton", 2, 5.0, n, Fraction(1, 4)))
    printed = privacy.calibrate(plan, mu=2.0)
    full = privacy.calibrate_schedule(plan, mu=2.0, counts={"local step": np.full((1, 3), 6), "newton": 2})
    for a, b in zip(printed.sigmas, full.sigmas):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(full.ledger.composed_mu(), 2.0, rtol=1e-12)


def test_calibrate_schedule_spends_exactly_mu_for_every_drawn_client():
    """Clients drawn once, several times, only in one stage, or never: each drawn client's
    releases compose to mu (1e-12: only rounding), a client never drawn spends 0, and no
    client's noise is larger than under the printed calibration."""
    n = np.array([[10.0, 20.0, 5.0, 8.0]])
    plan = (privacy.ReleaseSpec("local step", 6, 2.0, n, Fraction(3, 4)),
            privacy.ReleaseSpec("newton", 2, 5.0, n, Fraction(1, 4)))
    counts = {"local step": np.array([[2, 6, 0, 0]]), "newton": np.array([[1, 0, 1, 0]])}
    cal = privacy.calibrate_schedule(plan, mu=2.0, counts=counts)
    np.testing.assert_allclose(cal.ledger.composed_mu(), [[2.0, 2.0, 2.0, 0.0]], rtol=1e-12)
    np.testing.assert_allclose(cal.ledger.spent_mu(counts), [[2.0, 2.0, 2.0, 0.0]], rtol=1e-12)
    printed = privacy.calibrate(plan, mu=2.0)
    for a, b in zip(cal.sigmas, printed.sigmas):
        assert np.all(a <= b * (1 + 1e-12))
    with pytest.raises(ValueError, match="between 0"):
        privacy.calibrate_schedule(plan, mu=2.0, counts={"local step": np.array([[7, 0, 0, 0]])})
    assert privacy.calibrate_schedule(plan, mu=np.inf, counts=counts).ledger.composed_mu().max() == np.inf


@pytest.mark.parametrize("method", METHODS)
def test_schedule_accounting_spends_mu_with_the_same_draws(method):
    """Under ``schedule`` the run draws the same clients as under ``printed`` (one stream
    that never sees the data), each client drawn at least once spends exactly mu (1e-9)
    and a client never drawn nothing; under ``printed`` none spends more than mu."""
    printed, _ = _fit(method)
    sched, _ = _fit(method, accounting="schedule")
    assert printed.counts.keys() == sched.counts.keys()
    assert all(np.array_equal(printed.counts[k], sched.counts[k]) for k in printed.counts)
    drawn = sum(v for v in sched.counts.values()) > 0
    spent = sched.ledger.spent_mu(sched.counts)[0]
    np.testing.assert_allclose(spent[drawn], 2.0, rtol=1e-9)
    assert np.all(spent[~drawn] == 0) and np.all(sched.ledger.composed_mu()[0][drawn] <= 2.0 + 1e-9)
    assert np.all(printed.ledger.spent_mu(printed.counts) <= 2.0 + 1e-12)
    for a, b in zip(sched.ledger.releases, printed.ledger.releases):    # same sensitivities, never more noise
        np.testing.assert_array_equal(a.sensitivity, b.sensitivity)
        assert np.all(a.sigma <= b.sigma * (1 + 1e-12))
    assert sched.ledger.certified == printed.ledger.certified


def test_schedule_noise_of_a_client_drawn_once_in_fedavg():
    """FedAvg, R rounds: a client drawn in r of them has sd sqrt(r / R) times the printed one."""
    printed, p = _fit("fedavg")
    sched, _ = _fit("fedavg", accounting="schedule")
    rounds = sched.counts["local step"] // p.local_epochs
    ratio = sched.ledger.releases[0].sigma[0] / printed.ledger.releases[0].sigma[0]
    drawn = rounds > 0
    np.testing.assert_allclose(ratio[drawn], np.sqrt(rounds[drawn] / p.rounds), rtol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_clip_only_clips_without_noise(method):
    """``clip_only``: the gradients are clipped at B (some are, at a small B), no noise is
    drawn (another noise seed gives the same network), and the ledger is not private
    (composed mu inf); ``plain`` clips nothing."""
    p = resolve({"figure": "fig10", "q": 0.25, "rounds": 4, "local_epochs": 2, "newton_cycles": 2,
                 "release": "clip_only", "clip": 1e-3})
    runs = [train(method, _net(), _clients(), p, np.random.default_rng(11), torch.Generator().manual_seed(s))
            for s in (5, 6)]
    assert all(torch.equal(runs[0].params[k], runs[1].params[k]) for k in runs[0].params)
    assert runs[0].info.clipped > 0 and runs[0].ledger.composed_mu().max() == np.inf
    plain = train(method, _net(), _clients(), p.replace(release="plain"), np.random.default_rng(11), None)
    assert plain.info.clipped == 0
    assert label(method, 2.0, "clip_only").startswith("Clip-") and label(method, 2.0, "plain").startswith("NP-")


def test_run_rows_record_the_release_and_the_spent_mu():
    """A run's rows: ``mu_spent_min``/``mu_spent_max`` over the drawn clients equal mu
    (1e-9) under ``schedule``; under ``printed`` the max is at most mu; the release and
    the accounting are columns."""
    from fedgdp.nn.data import load_images
    from fedgdp.nn.run import run_nn

    data = load_images("digits")
    base = {"figure": "fig09", "m": 6, "n": 20, "rounds": 2, "local_epochs": 2, "newton_cycles": 2, "q": 0.5}
    for accounting in ("printed", "schedule"):
        for r in run_nn(resolve({**base, "accounting": accounting}), device="cpu", threads=1, data=data):
            assert r["accounting"] == accounting and r["release"] == "private"
            assert r["mu_spent_min"] <= r["mu_spent_max"] <= 2.0 + 1e-9
            if accounting == "schedule":
                assert abs(r["mu_spent_min"] - 2.0) < 1e-9 and abs(r["mu_spent_max"] - 2.0) < 1e-9
