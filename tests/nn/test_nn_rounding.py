"""Noise before rounding (docs/methods.md §2): a float32 local step forms ``-eta g + sd Z``
before it meets the parameters, so the parameters' coarser float grid cannot absorb the
noise; a plan whose noise the signal's own grid could absorb is refused before any image
is read."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedgdp.commands.empirical import gdp_lower_bound  # noqa: E402
from fedgdp.core import privacy  # noqa: E402
from fedgdp.nn.models import ConvNet  # noqa: E402
from fedgdp.nn.settings import release_plan, resolve  # noqa: E402
from fedgdp.nn.train import ClientData, train  # noqa: E402


def _digits(n):
    from fedgdp.nn.data import load_images

    d = load_images("digits")
    return torch.as_tensor(d.x_train[:n + 1]).float(), torch.as_tensor(d.y_train[:n + 1]), d.x_train.shape[1:]


def _releases(clip, n=240, fits=200):
    """Every parameter of ``fits`` one-step FedAvg releases of one client of n images (float32,
    lr 0.3, mu 2) on D and on D' (image 0 replaced by image n)."""
    x, y, shape = _digits(n)
    torch.manual_seed(0)
    net = ConvNet(in_shape=tuple(shape), channels=(2,), hidden=4, classes=10)
    params0 = {k: v.detach() for k, v in net.named_parameters()}
    p = resolve({"figure": "fig10", "q": 1.0, "rounds": 1, "local_epochs": 1, "lr": 0.3, "mu": 2.0,
                 "clip": clip, "methods": "fedavg"})
    data = {"D": ClientData([x[:n]], [y[:n]]), "D'": ClientData([x[1:n + 1]], [y[1:n + 1]])}
    out = {}
    for name, clients in data.items():
        rows = []
        for seed in range(fits):
            fit = train("fedavg", params0, clients, p, np.random.default_rng(0), torch.Generator().manual_seed(seed))
            rows.append(torch.cat([v.flatten() for v in fit.params.values()]).numpy())
        out[name] = np.array(rows)
    return out


@pytest.mark.parametrize("clip", [1e-6, 3e-6])
def test_a_tiny_clip_in_float32_stays_within_its_mu(clip):
    """A threshold test on each parameter, chosen on the first half of the fits and scored on
    the second, cannot tell D from D' beyond the certified mu = 2. Before the noise joined the
    step first, one parameter took one value on D and the adjacent float on D' in every fit
    (an empirical mu >= 4 at this size). Tolerance: the Clopper-Pearson bound holds with
    probability 0.95 for the chosen test; choosing it on separate fits keeps that true."""
    r = _releases(clip)
    a, b = r["D"], r["D'"]
    half = len(a) // 2
    best = (0.0, 0, 0.0, 1)
    for k in range(a.shape[1]):
        vals = np.unique(np.concatenate([a[:half, k], b[:half, k]]))
        for t in vals:
            for sign in (1, -1):
                acc = np.mean(sign * a[:half, k] < sign * t) + np.mean(sign * b[:half, k] >= sign * t)
                if acc > best[0]:
                    best = (acc, k, t, sign)
    _, k, t, sign = best
    fp = int(np.sum(sign * a[half:, k] >= sign * t))        # D called D'
    fn = int(np.sum(sign * b[half:, k] < sign * t))         # D' called D
    assert gdp_lower_bound(fp, fn, len(a) - half, 0.05) <= 2.0


def test_noise_the_signal_grid_could_absorb_is_refused():
    """``sd >= NOISE_ULPS ulp(A)``: accepted at the paper's settings, refused where the
    noise is a few ulps of the largest signal (a huge mu), naming the stage."""
    p = resolve({"figure": "fig10", "mu": 2.0, "methods": "fedavg"})
    plan = release_plan("fedavg", p, [480, 480])
    n = np.array([[480.0, 480.0]])
    privacy.check_noise_resolves(plan, privacy.calibrate(plan, mu=2.0).sigmas, n, torch.float32)
    with pytest.raises(ValueError, match=r"'local step' release is below 256 ulps.*float32"):
        privacy.check_noise_resolves(plan, privacy.calibrate(plan, mu=1e6).sigmas, n, torch.float32)
    privacy.check_noise_resolves(plan, privacy.calibrate(plan, mu=1e6).sigmas, n, torch.float64)


def test_a_run_is_refused_before_any_image_when_a_method_fails_the_check(monkeypatch):
    """nn-run checks every method at the partition's sizes before training any."""
    from fedgdp.nn import run as nn_run
    from fedgdp.nn import train as nn_train
    from fedgdp.nn.data import load_images

    trained = []
    monkeypatch.setattr(nn_train, "train", lambda *a, **k: trained.append(a))
    p = resolve({"figure": "fig10", "m": 4, "mu": 1e12, "methods": ["fedsgd", "fedavg"]})
    with pytest.raises(ValueError, match="256 ulps"):
        nn_run.run_nn(p, data=load_images("digits"), device="cpu")
    assert not trained
