"""Book-keeping per-sample clipping (fedgdp.nn.clipping) against materialised per-sample gradients."""
import math

import pytest

torch = pytest.importorskip("torch")

import nn_oracle as oracle  # noqa: E402
from fedgdp.nn.clipping import clipped_grad_sums, floats_per_image, head_grads  # noqa: E402
from fedgdp.nn.models import ConvNet, build_model  # noqa: E402
from fedgdp.nn.train import ClientData  # noqa: E402

SHAPES = {"mnist": (1, 28, 28), "cifar10": (3, 32, 32), "digits": (1, 8, 8)}


def images(n, shape, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, *shape), generator=g, dtype=dtype), torch.randint(0, 10, (n,), generator=g)


def params_of(net):
    return {k: v.detach() for k, v in net.named_parameters()}


def mean_of(total, mask):
    n = mask.sum(1)
    return {k: v / n.view(-1, *[1] * (v.dim() - 1)) for k, v in total.items()}


@pytest.mark.parametrize("dataset", ["mnist", "cifar10", "digits"])
@pytest.mark.parametrize("B", [0.05, 1.0, math.inf])
def test_equals_the_vmap_reference_in_float64(dataset, B):
    """The three architectures, every image clipped / some / none: equal to the
    materialised-then-clipped mean within 1e-10 (float64: only summation order differs)."""
    net = build_model(dataset, seed=1).double()
    params = params_of(net)
    x, y = images(6, SHAPES[dataset], seed=2)
    want, n_clipped = oracle.clipped_mean_grad(net, params, x, y, B)
    total, c = clipped_grad_sums(params, x[None], y[None], torch.ones(1, 6, dtype=torch.float64), B, shared=True)
    got = mean_of(total, torch.ones(1, 6))
    for k in want:
        torch.testing.assert_close(got[k][0], want[k], rtol=1e-10, atol=1e-12)
    assert int((c < 1).sum()) == n_clipped


def test_equals_an_autograd_loop_over_images():
    """Independent of the oracle: one backward pass per image, clipped by hand."""
    net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3).double()
    g = torch.Generator().manual_seed(0)
    x = torch.randn((7, 1, 4, 4), generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (7,), generator=g)
    B = 0.3
    want = {k: torch.zeros_like(v) for k, v in net.named_parameters()}
    for j in range(7):
        net.zero_grad()
        torch.nn.functional.nll_loss(net(x[j:j + 1]), y[j:j + 1]).backward()
        gj = {k: v.grad.detach().clone() for k, v in net.named_parameters()}
        norm = math.sqrt(sum(float((v ** 2).sum()) for v in gj.values()))
        for k in want:
            want[k] += min(1.0, B / norm) * gj[k]
    total, _ = clipped_grad_sums(params_of(net), x[None], y[None], torch.ones(1, 7, dtype=torch.float64), B,
                                 shared=True)
    for k in want:
        torch.testing.assert_close(total[k][0], want[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("B", [0.3, math.inf])
@pytest.mark.parametrize("shared", [True, False])
def test_padded_stacks_equal_each_client_alone(B, shared):
    """Clients of unequal sizes, each with its own parameters (or shared), padded into one
    stack: every client's clipped mean, and the clipped count, as if it were alone."""
    base = build_model("digits", seed=0).double()
    sizes = [3, 7, 5]
    data = [images(n, SHAPES["digits"], seed=10 + n) for n in sizes]
    clients = ClientData([a for a, _ in data], [b for _, b in data])
    X, Y, M = clients.batch([0, 1, 2])
    g = torch.Generator().manual_seed(4)
    ps = [{k: v + (0 if shared else 0.05) * torch.randn(v.shape, generator=g, dtype=v.dtype)
           for k, v in params_of(base).items()} for _ in sizes]
    params = ps[0] if shared else {k: torch.stack([p[k] for p in ps]) for k in ps[0]}
    total, c = clipped_grad_sums(params, X, Y, M, B, shared=shared)
    got = mean_of(total, M)
    clipped = 0
    for i in range(3):
        want, ci = oracle.clipped_mean_grad(base, ps[0] if shared else ps[i], *data[i], B)
        clipped += ci
        for k in want:
            torch.testing.assert_close(got[k][i], want[k], rtol=1e-10, atol=1e-12)
    assert int((c < M).sum()) == clipped
    assert torch.all(c[M == 0] == 0)


def test_float32_within_its_stated_tolerance():
    """float32 (the training precision) against the float64 reference on the MNIST network:
    relative error at most 1e-4 of each parameter's largest entry. Justification: sums of up
    to 3,136 x 600 products in float32 (unit roundoff 6e-8) carry a relative error of order
    sqrt(terms) x 6e-8 ~ 1e-4 in the worst case; measured errors are about 1e-6."""
    net = build_model("mnist", seed=0)
    x, y = images(40, SHAPES["mnist"], seed=1, dtype=torch.float32)
    want, _ = oracle.clipped_mean_grad(net.double(), params_of(net.double()), x.double(), y, 0.5)
    net = net.float()
    total, _ = clipped_grad_sums(params_of(net), x[None], y[None], torch.ones(1, 40), 0.5, shared=True)
    for k, v in mean_of(total, torch.ones(1, 40)).items():
        scale = float(want[k].abs().max())
        assert float((v[0].double() - want[k]).abs().max()) <= 1e-4 * scale


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1.7e308])
def test_a_non_finite_image_contributes_zero(bad):
    """An image with a NaN, an inf or a float-maximum pixel (its gradient overflows)
    contributes exactly zero, and the others' clipped sum is unchanged: the clipped sum
    stays finite and every contribution has norm at most B."""
    net = build_model("digits", seed=0).double()
    params = params_of(net)
    x, y = images(5, SHAPES["digits"], seed=3)
    ones = torch.ones(1, 5, dtype=torch.float64)
    clean, _ = clipped_grad_sums(params, x[None, 1:], y[None, 1:], ones[:, 1:], 0.5, shared=True)
    x = x.clone()
    x[0, 0, 2, 3] = bad
    total, c = clipped_grad_sums(params, x[None], y[None], ones, 0.5, shared=True)
    assert float(c[0, 0]) == 0.0
    for k in clean:
        assert torch.isfinite(total[k]).all()
        torch.testing.assert_close(total[k], clean[k], rtol=1e-12, atol=1e-14)


def test_head_gradients_equal_the_vmap_reference():
    net = build_model("digits", seed=2).double()
    x, y = images(9, SHAPES["digits"], seed=5)
    want = oracle.head_per_sample_grads(net, params_of(net), x, y)
    torch.testing.assert_close(head_grads(params_of(net), x, y), want, rtol=1e-10, atol=1e-12)


def test_working_memory_per_image():
    net = build_model("mnist", seed=0)
    # conv 1: 3 * 32 * 28 * 28 + 32 * 1 * 9; conv 2: 3 * 64 * 14 * 14 + 64 * 32 * 9; fc 3136 + 128; head 138
    want = 3 * 32 * 784 + 288 + 3 * 64 * 196 + 18432 + 3136 + 128 + 128 + 10
    assert floats_per_image(params_of(net), SHAPES["mnist"]) == want


def test_one_forward_serves_the_network_and_the_clipping():
    """`convnet_forward` is the ConvNet's forward (bit for bit, under functional_call too),
    and its stacked form, which the clipping records, gives each client's log-probabilities."""
    from torch.func import functional_call

    from fedgdp.nn.models import convnet_forward

    net = build_model("digits", seed=1).double()
    P = params_of(net)
    x, _ = images(5, SHAPES["digits"], seed=2)
    assert torch.equal(net(x), convnet_forward(P, x))
    assert torch.equal(functional_call(net, P, (x,)), convnet_forward(P, x))
    assert torch.equal(net.features(x), convnet_forward(P, x, head=False))
    stack = {k: torch.stack([v, 2 * v]) for k, v in P.items()}
    both = convnet_forward(stack, torch.stack([x, x]), stacked=True)
    torch.testing.assert_close(both[0], net(x), rtol=1e-12, atol=1e-12)     # batched vs plain products
    torch.testing.assert_close(both[1], convnet_forward({k: 2 * v for k, v in P.items()}, x), rtol=1e-12, atol=1e-12)
