"""``reduction: sum``: a client's gradient release is the sum of its clipped per-sample
gradients (`fedgdp.nn.settings.reduced_plan`). With clients of n images each, that is the
mean reading at n times the learning rate, release by release: the same steps and, since
the sum's sensitivity is n times the mean's at the same mu, the same noise. The test holds
the two to each other in float64 (1e-10: a sum against n times a mean differs only in
rounding), with the same client draws and noise draws."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedgdp.nn.settings import METHODS, release_plan, resolve  # noqa: E402
from fedgdp.nn.train import ClientData, train  # noqa: E402

N = 6


def _clients(m=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return ClientData([torch.randn((N, 1, 4, 4), generator=g, dtype=torch.float64) for _ in range(m)],
                      [torch.randint(0, 3, (N,), generator=g) for _ in range(m)])


def _net():
    from fedgdp.nn.models import ConvNet

    torch.manual_seed(0)
    net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3).double()
    return {k: v.detach() for k, v in net.named_parameters()}


def _fit(method, **over):
    p = resolve({"figure": "fig10", "q": 0.25, "rounds": 4, "local_epochs": 2, "newton_cycles": 2, "clip": 0.5,
                 **over})
    return train(method, _net(), _clients(), p, np.random.default_rng(11), torch.Generator().manual_seed(5))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("release", ["private", "plain"])
def test_the_sum_is_the_mean_at_n_times_the_step(method, release):
    lr = 0.05
    summed = _fit(method, reduction="sum", lr=lr, release=release)
    mean = _fit(method, reduction="mean", lr=lr * N, release=release)
    for k in summed.params:
        np.testing.assert_allclose(summed.params[k].numpy(), mean.params[k].numpy(), rtol=1e-10, atol=1e-12)
    assert summed.info.clipped > 0 or release == "plain"
    np.testing.assert_allclose(summed.ledger.composed_mu(), mean.ledger.composed_mu(), rtol=1e-12)
    same_lr = _fit(method, reduction="mean", lr=lr, release=release)       # the reading matters
    assert not torch.allclose(summed.params["head.bias"], same_lr.params["head.bias"])


def test_a_summed_release_has_the_sensitivity_of_one_image_and_the_newton_release_keeps_its_size():
    p = resolve({"figure": "fig10", "reduction": "sum", "clip": 2.0, "lr": 0.1})
    n = np.array([10.0, 40.0])
    by_stage = {s.stage: s.sensitivity for s in release_plan("fednewton_iter", p, n)}
    np.testing.assert_allclose(by_stage["local step"], [[2 * 2.0 * 0.1] * 2])           # 2 B eta, whatever n
    mean = {s.stage: s.sensitivity for s in release_plan("fednewton_iter", p.replace(reduction="mean"), n)}
    np.testing.assert_allclose(by_stage["newton"], mean["newton"])                    # Algorithm 5's mean
    assert {s.stage: s.sensitivity[0, 0] for s in release_plan("fedsgd", p, n)} == {"gradient": 4.0}


def test_an_unknown_reduction_is_refused_by_name():
    with pytest.raises(ValueError, match="reduction"):
        resolve({"reduction": "median"})


def test_a_summed_release_moves_by_at_most_its_sensitivity_and_by_more_than_the_mean_could():
    """One record of a client of 3 images replaced (a random image relabelled): the summed
    clipped gradient moves by at most its recorded sensitivity 2 B, and by more than the
    mean's 2 B / 3 could (the release really is the sum). Audit targets keep the reading."""
    from fedgdp.commands.audit import config_targets
    from fedgdp.nn.clipping import clipped_grad_sums

    B = 1e-3                                   # every per-sample gradient clipped: norm B each
    params, g = _net(), torch.Generator().manual_seed(3)
    x, y = torch.randn((1, 3, 1, 4, 4), generator=g, dtype=torch.float64), torch.tensor([[0, 1, 2]])
    x2, y2 = x.clone(), y.clone()
    x2[0, 0], y2[0, 0] = 5 * torch.randn((1, 4, 4), generator=g, dtype=torch.float64), 1
    mask = torch.ones((1, 3), dtype=torch.float64)
    moved = [clipped_grad_sums(params, xs, ys, mask, B, shared=True)[0] for xs, ys in ((x, y), (x2, y2))]
    change = float(torch.cat([(moved[1][k] - moved[0][k]).flatten() for k in moved[0]]).norm())
    (spec,) = release_plan("fedsgd", resolve({"figure": "fig10", "reduction": "sum", "clip": B}), np.array([3.0]))
    assert 2 * B / 3 < change <= float(spec.sensitivity[0, 0]) == 2 * B
    import yaml

    from shipped_configs import ROOT

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["nn"] = dict(config["nn"], settings={"reduction": "sum"})
    assert {t.nn["reduction"] for t in config_targets(config) if t.kind == "nn"} == {"sum"}


def test_a_plain_run_that_diverges_says_so_and_records_its_loss(capsys):
    """A network that is not private may diverge (a private one is refused, tests/nn/test_nn_floors.py):
    its row keeps the loss it measured, and one line on standard error names the method."""
    from fedgdp.nn.data import load_images
    from fedgdp.nn.run import run_nn

    p = resolve({"figure": "fig09", "m": 4, "n": 20, "rounds": 2, "local_epochs": 10, "methods": ["fedavg"],
                 "mu": "inf", "reduction": "sum", "lr": 1e30})
    (row,) = run_nn(p, device="cpu", threads=1, data=load_images("digits"))
    assert not np.isfinite(row["test_loss"])
    assert "fedavg diverged: its test loss is" in capsys.readouterr().err


@pytest.mark.parametrize("method", METHODS)
def test_noise_for_mean_records_the_mu_really_spent(method):
    """``noise_for: mean`` (the paper's likely reading): the summed releases get the
    mean's noise sds, and the ledger, built on their true sensitivities, composes to ``n_i``
    times the target mu at every client for the summed stages alone (exactly; the Newton
    releases keep their size and their mu)."""
    from fedgdp.core import privacy
    from fedgdp.nn.backend import noise_for_mean

    p = resolve({"figure": "fig10", "reduction": "sum", "noise_for": "mean", "methods": method})
    n = np.array([12.0, 30.0])
    plan = release_plan(method, p, n)
    mean_plan = release_plan(method, p.replace(reduction="mean", noise_for="release"), n)
    cal = noise_for_mean(plan, mean_plan, 2.0)
    for got, want in zip(cal.sigmas, privacy.calibrate(mean_plan, mu=2.0).sigmas):
        np.testing.assert_array_equal(got, want)
    summed = [r for r in cal.ledger.releases if r.stage in ("gradient", "local step")]
    share = sum(float(spec.share) for spec in plan if spec.stage in ("gradient", "local step"))
    mu2 = sum(r.count * (np.asarray(r.sensitivity) / np.asarray(r.sigma)) ** 2 for r in summed)
    np.testing.assert_allclose(np.sqrt(mu2).ravel(), 2.0 * n * np.sqrt(share), rtol=1e-12)


def test_noise_for_mean_needs_a_sum():
    with pytest.raises(ValueError, match="noise_for=mean .* needs reduction=sum"):
        resolve({"figure": "fig10", "noise_for": "mean", "methods": "fedavg"})
    with pytest.raises(ValueError, match="noise_for"):
        resolve({"figure": "fig10", "noise_for": "median", "methods": "fedavg"})
