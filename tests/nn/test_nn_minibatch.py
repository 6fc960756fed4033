"""``local_batch``: a local epoch as one pass of minibatches, each a noisy step
(`fedgdp.nn.backend.TorchBackend`, `fedgdp.nn.settings.reduced_plan`). Held to a loop
oracle written here (per-sample gradients by `torch.func`, clipped one by one, the same
permutations and noise draws) in float64 at 1e-10, and to the full-batch path when a
minibatch holds a client's images."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.func import functional_call, grad, vmap  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from fedgdp.core import privacy  # noqa: E402
from fedgdp.nn.backend import minibatches  # noqa: E402
from fedgdp.nn.settings import METHODS, release_plan, resolve, smallest_batch  # noqa: E402
from fedgdp.nn.train import ClientData, train  # noqa: E402

SIZES = [6, 4, 9, 5, 7, 3, 8, 6]


def _clients(seed=0):
    g = torch.Generator().manual_seed(seed)
    return ClientData([torch.randn((s, 1, 4, 4), generator=g, dtype=torch.float64) for s in SIZES],
                      [torch.randint(0, 3, (s,), generator=g) for s in SIZES])


def _model():
    from fedgdp.nn.models import ConvNet

    torch.manual_seed(0)
    return ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3).double()


def _settings(**over):
    return resolve({"figure": "fig10", "q": 1.0, "rounds": 1, "local_epochs": 2, "clip": 0.05, "lr": 0.3,
                    "local_batch": 3, "newton_cycles": 1, **over})


def _train(method, p, noise_seed=5):
    params = {k: v.detach() for k, v in _model().named_parameters()}
    return train("fedavg" if method is None else method, params, _clients(), p, np.random.default_rng(11),
                 torch.Generator().manual_seed(noise_seed))


def _oracle(p):
    """One FedAvg round with every client drawn (q = 1), K passes of minibatches each; every
    per-sample gradient clipped at B by itself; noise in the backend's draw order (per
    step, the stepping clients stacked, parameter by parameter)."""
    model, clients = _model(), _clients()
    theta = {k: v.detach() for k, v in model.named_parameters()}
    sd = privacy.calibrate(release_plan("fedavg", p, clients.n.astype(float)), mu=p.mu).sigmas[0][0]
    gen, batch_rng = torch.Generator().manual_seed(5), np.random.default_rng(11).spawn(1)[0]

    def loss(prm, x, y):
        return F.nll_loss(functional_call(model, prm, (x[None],)), y[None])

    local = [{k: v.clone() for k, v in theta.items()} for _ in SIZES]
    for _ in range(p.local_epochs):
        passes = [minibatches(batch_rng, n, p.local_batch) for n in SIZES]
        for t in range(max(len(b) for b in passes)):
            sub = [j for j, b in enumerate(passes) if t < len(b)]
            steps = {}
            for j in sub:
                ix = torch.as_tensor(passes[j][t])
                g = vmap(grad(loss), in_dims=(None, 0, 0))(local[j], clients.x[j][ix], clients.y[j][ix])
                norms = torch.sqrt(sum((v.flatten(1) ** 2).sum(1) for v in g.values()))
                c = torch.clamp(p.clip / norms, max=1.0)
                steps[j] = {k: local[j][k] - p.lr * (c.view(-1, *[1] * (v.dim() - 1)) * v).mean(0)
                            for k, v in g.items()}
            for k in theta:                          # the noise: one draw per parameter, stacked clients
                z = torch.randn((len(sub), *theta[k].shape), generator=gen, dtype=torch.float64)
                for row, j in enumerate(sub):
                    local[j][k] = steps[j][k] + sd[j] * z[row]
    w = clients.n / clients.n.sum()
    return {k: theta[k] + sum(float(w[j]) * (local[j][k] - theta[k]) for j in range(len(SIZES))) for k in theta}


def test_a_pass_of_minibatches_matches_the_loop_oracle():
    p = _settings()
    fit = _train(None, p)
    want = _oracle(p)
    assert fit.info.clipped > 0                                  # B = 0.05 clips
    for k in want:
        np.testing.assert_allclose(fit.params[k].numpy(), want[k].numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_a_minibatch_holding_every_image_is_the_full_batch_step(method):
    """local_batch >= every client's size: one minibatch per pass, the full-batch step up to
    the order of the sum (float64, 1e-10), with the same client and noise draws."""
    p = _settings(q=0.25, rounds=4, newton_cycles=2)
    full, one = _train(method, p.replace(local_batch=None)), _train(method, p.replace(local_batch=9))
    for k in full.params:
        np.testing.assert_allclose(one.params[k].numpy(), full.params[k].numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(one.ledger.composed_mu(), full.ledger.composed_mu(), rtol=1e-12)


def test_a_pass_is_one_release_of_the_mean_over_the_smallest_minibatch():
    p = _settings(clip=2.0, lr=0.1)
    n = np.array([6.0, 4.0, 9.0, 3.0])
    np.testing.assert_array_equal(smallest_batch(n, 3), [3, 2, 3, 3])        # 6 = 3+3, 4 = 2+2, 9 = 3x3, 3
    (spec,) = release_plan("fedavg", p, n)
    assert spec.count == p.rounds * p.local_epochs                       # a release per pass
    np.testing.assert_allclose(spec.sensitivity, [[2 * 2.0 * 0.1 / b for b in (3, 2, 3, 3)]])
    gradient = {s.stage: s for s in release_plan("fedhybrid", p, n)}["gradient"]
    np.testing.assert_allclose(gradient.sensitivity, [2 * 2.0 / n])            # server steps: full batch


def test_the_passes_draw_no_client_and_every_client_spends_mu():
    p = _settings(q=0.25, rounds=4)
    one, full = _train("fedavg", p), _train("fedavg", p.replace(local_batch=None))
    assert all(np.array_equal(one.counts[k], full.counts[k]) for k in full.counts)   # the same clients drawn
    assert one.ledger.composed_mu().max() == pytest.approx(p.mu, rel=1e-12)


@pytest.mark.parametrize("value", [0, -3, "x", 2.5])
def test_a_bad_local_batch_is_refused_by_name(value):
    with pytest.raises(ValueError, match="local_batch"):
        resolve({"local_batch": value})
