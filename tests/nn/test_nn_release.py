"""The CNN backend's exposed releases (`TorchBackend.release`, what the audit runs) are the
training's own: without noise, chaining one client's exposed releases reproduces its local
steps, server step and Newton release bit for bit, for every clipping unit, ``sum``, and a
pass of minibatches; `release_args` reads each stage's arguments from the method's run."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedgdp.methods import CNN, get_method  # noqa: E402
from fedgdp.nn.backend import TorchBackend  # noqa: E402
from fedgdp.nn.settings import cnn_settings, resolve  # noqa: E402
from fedgdp.nn.train import ClientData  # noqa: E402

ETA = 0.3


def _net():
    from fedgdp.nn.models import ConvNet

    torch.manual_seed(0)
    net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3).double()
    return {k: v.detach().clone() for k, v in net.named_parameters()}


def _backend(n=7, **over):
    g = torch.Generator().manual_seed(1)
    clients = ClientData([torch.randn((n, 1, 4, 4), generator=g, dtype=torch.float64)],
                         [torch.randint(0, 3, (n,), generator=g)])
    p = resolve({"figure": "fig10", "q": 1.0, "release": "clip_only", "clip": 0.05, "local_epochs": 2, **over})
    return TorchBackend(_net(), clients, p, np.random.default_rng(3), None, stack=False)


def _plus(theta, flat, scale=1.0):
    out, at = {}, 0
    for k, v in theta.items():
        out[k] = v + scale * flat[at:at + v.numel()].reshape(v.shape).to(v.dtype)
        at += v.numel()
    assert at == flat.numel()
    return out


def _same(a, b):
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("over", [{}, {"reduction": "sum"}, {"clip_unit": "client"}, {"local_batch": 3},
                                  {"local_batch": 3, "reduction": "sum"}, {"local_batch": 3, "clip_unit": "client"}])
def test_chained_local_step_releases_are_the_local_steps(over):
    be, twin = _backend(**over), _backend(**over)
    theta = be.start()
    got = {k: v[0] for k, v in be.local_steps(theta, K=2, eta=ETA, sigma=np.zeros(1), noise=None).params.items()}
    state = theta
    for _ in range(2):
        batches = twin.pass_batches(0)
        for rows in batches if batches is not None else [None]:
            state = _plus(state, twin.release("local step", state, 0, eta=ETA, batches=None if rows is None
                                              else [rows]))
    _same(got, state)


@pytest.mark.parametrize("over", [{}, {"local_batch": 3}])
def test_an_update_release_is_the_clipped_round(over):
    be, twin = _backend(clip_unit="update", **over), _backend(clip_unit="update", **over)
    theta = be.start()
    got = {k: v[0] for k, v in be.local_steps(theta, K=2, eta=ETA, sigma=np.zeros(1), noise=None).params.items()}
    delta = twin.release("local step", theta, 0, eta=ETA, K=2)
    assert float(delta.norm()) <= 0.05
    _same(got, _plus(theta, delta))


@pytest.mark.parametrize("over", [{}, {"reduction": "sum"}, {"clip_unit": "client"}])
def test_a_gradient_release_is_the_server_step(over):
    be, twin = _backend(**over), _backend(**over)
    theta = be.start()
    got = be.server_steps(theta, be.weights(1), K=1, eta=ETA, sigma=np.zeros(1), noise=None)
    slr = float(be.p.server_lr)
    _same(got, _plus(theta, twin.release("gradient", theta, 0), -slr * ETA))


def test_a_newton_release_is_the_head_release():
    be, twin = _backend(), _backend()
    theta = be.start()
    got = be.head_newton_release(theta, ridge=0.5, damping=0.8).head[0]
    assert torch.equal(got, twin.release("newton", theta, 0, ridge=0.5, damping=0.8))


def test_release_args_are_the_methods_own():
    be = _backend(local_epochs=3, lr=0.2, ridge=0.5, damping=0.7)
    for name in ("fedsgd", "fedavg", "fedhybrid", "fednewton_iter"):
        meth = get_method(name, CNN)
        args = be.release_args(meth, cnn_settings(meth, be.p))
        assert set(args) == {spec.stage for spec in meth.plan(be, cnn_settings(meth, be.p)) if spec.count}, name
        assert all(a["eta"] == 0.2 and a["K"] == 3 for a in args.get("local step", [])), (name, args)
        assert args.get("newton", [{"ridge": 0.5, "damping": 0.7}]) == [{"ridge": 0.5, "damping": 0.7}]
