"""The GLM path's floors on the CNN path: MU_FLOOR, the clip range and the float32
parameter bound in the settings, the finite-release check, and the clip margin (no
image contributes more than B in float32; the head Newton release stays within its
recorded sensitivity at B = 1e-5 on a head that splits 50/50)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedgdp.core import privacy  # noqa: E402
from fedgdp.nn.backend import head_newton_step  # noqa: E402
from fedgdp.nn.clipping import clip_margin, clipped_grad_sums  # noqa: E402
from fedgdp.nn.models import ConvNet  # noqa: E402
from fedgdp.nn.settings import FLOAT32_BOUND, METHODS, parameter_bound, resolve  # noqa: E402
from fedgdp.nn.train import ClientData, train  # noqa: E402

TINY = {"dataset": "digits", "m": 3, "n": 8, "rounds": 2, "local_epochs": 2, "q": 1.0, "newton_cycles": 1}


def tiny_net(seed=0, classes=3, dtype=torch.float32):
    torch.manual_seed(seed)
    return ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=classes).to(dtype)


def params_of(net):
    return {k: v.detach().clone() for k, v in net.named_parameters()}


def tiny_clients(sizes, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    xs = [scale * torch.randn((n, 1, 4, 4), generator=g) for n in sizes]
    return ClientData(xs, [torch.randint(0, 3, (n,), generator=g) for n in sizes])


@pytest.mark.parametrize("key, value", [("mu", 1e-40), ("mu", 5e-324), ("clip", 3e37), ("clip", 1e-300)])
def test_floors_refuse_with_one_line(key, value):
    """mu = 1e-40 (every parameter non-finite before, ledger certified) and clip = 3e37
    (FedNewton-Iter's head non-finite before) are refused before any work."""
    with pytest.raises(ValueError) as exc:
        resolve({**TINY, key: value})
    msg = str(exc.value)
    assert "\n" not in msg and f"{key}=" in msg


def test_a_float32_overflow_is_refused_naming_the_settings():
    """Within the clip range, settings whose worst case leaves float32 are refused by the
    parameter bound (FedNewton-Iter's Newton noise grows like B^3 / ridge^2)."""
    with pytest.raises(ValueError, match=r"clip=1e\+15.*fednewton_iter could move a float32 parameter") as exc:
        resolve({**TINY, "clip": 1e15, "methods": "fednewton_iter"})
    assert "\n" not in str(exc.value)
    resolve({**TINY, "clip": 1e15, "methods": "fednewton_iter", "mu": "inf"})     # non-private: no noise


def test_shipped_and_default_settings_are_accepted():
    from fedgdp.nn.settings import DATASET_DEFAULTS

    for dataset in DATASET_DEFAULTS:
        p = resolve({"dataset": dataset, "n": 30})
        assert max(parameter_bound(m, p) for m in METHODS) < 1e-20 * FLOAT32_BOUND


@pytest.mark.parametrize("method", METHODS)
def test_training_at_the_extremes_stays_within_the_parameter_bound(method):
    """At mu = MU_FLOOR and the largest clip the bound accepts (within a factor 2), float32
    training on images with huge pixels (their gradients clipped or zeroed) releases a
    finite network whose every parameter is within parameter_bound."""
    base = {**TINY, "mu": privacy.MU_FLOOR, "methods": method}
    lo, hi = 1.0, 1e30
    while hi / lo > 2:                   # the largest accepted clip, by bisection in log scale
        mid = (lo * hi) ** 0.5
        try:
            resolve({**base, "clip": mid})
            lo = mid
        except ValueError:
            hi = mid
    p = resolve({**base, "clip": lo})
    clients = tiny_clients([8, 8, 8], scale=1e6)
    net = tiny_net(classes=10)
    fit = train(method, params_of(net), clients, p, np.random.default_rng(0), torch.Generator().manual_seed(1))
    top = max(float(v.abs().max()) for v in fit.params.values())
    assert np.isfinite(top) and top <= parameter_bound(method, p)


def test_a_non_finite_private_network_is_an_error():
    """A private release with a non-finite parameter raises, never a certified model (mu
    below the floor, set past the settings' check, makes the noise sd overflow float32)."""
    p = resolve({**TINY, "methods": "fedavg"}).replace(mu=1e-40)
    with pytest.raises(ValueError, match="not finite"):
        train("fedavg", params_of(tiny_net(classes=10)), tiny_clients([8, 8, 8]), p, np.random.default_rng(0),
              torch.Generator().manual_seed(1))


@pytest.mark.parametrize("B", [1e-5, 1e-3, 0.05])
def test_no_image_contributes_more_than_B_in_float32(B):
    """Each image alone (a client of one image): its float32 clipped gradient has float64
    norm at most B. The float32 clip without a margin left norms up to B (1 + 2.5e-7)."""
    net = tiny_net(seed=3)
    x, y = tiny_clients([200], seed=4, scale=5.0).x[0], tiny_clients([200], seed=4).y[0]
    total, c = clipped_grad_sums(params_of(net), x[:, None], y[:, None], torch.ones(200, 1), B, shared=True)
    norms = torch.cat([v.flatten(1).double() for v in total.values()], dim=1).norm(dim=1)
    assert int((c[:, 0] < 1).sum()) > 150                   # most images clipped: the case tested
    assert float(norms.max()) <= B
    D = sum(v.numel() for v in net.parameters())
    assert float(norms.max()) >= B * (1 - 3 * clip_margin(D, torch.float32))     # the margin is small


def test_head_newton_release_at_B_1e_5_on_a_50_50_head():
    """A public head of zeros splits every image 50/50 between two classes; one client of
    one image, its label flipped: the release moves by 2 alpha |c| / (lambda + |c|^2), which
    is (|c| / B)(1 - 1.5 B^2 / lambda) of the recorded sensitivity. Over 300 networks the
    ratio stays at most 1 (the float32 clip reached 1 + 1.07e-7)."""
    B, lam, alpha = 1e-5, 1.0, 1.0
    (spec,) = [s for s in privacy.plan_fednewton_iter(B=B, n=np.ones((1, 1)), eta=1.0, R=1, K=1, cycles=1,
                                                       ridge=lam, damping=alpha) if s.stage == "newton"]
    recorded = float(spec.sensitivity[0, 0])
    ratios = []
    for seed in range(300):
        p = params_of(tiny_net(seed, classes=2))
        p["head.weight"].zero_()
        p["head.bias"].zero_()
        x = 3 * torch.randn((1, 1, 4, 4), generator=torch.Generator().manual_seed(seed))
        s0, c0 = head_newton_step(p, x, torch.tensor([0]), B=B, lam=lam, alpha=alpha)
        s1, _ = head_newton_step(p, x, torch.tensor([1]), B=B, lam=lam, alpha=alpha)
        assert int(c0) == 1
        ratios.append(float((s0 - s1).norm()) / recorded)
    assert max(ratios) <= 1.0
    assert min(ratios) >= 1 - 1e-6                            # the pair is the worst case: the bound is tight
