"""opacus against fedgdp's clipped step (`fedgdp nn-bench`): opacus collects per-sample gradients by module
hooks, which `ConvNet`'s functional forward never fires, so it runs on `module_twin` (the same network, its
layers called as modules). The twin gives the same outputs; opacus on it gives the same per-sample clipped
sum as `fedgdp.nn.clipping.clipped_grad_sums`. The opacus tests skip where opacus is not installed; CI
installs it (.ci/run)."""
import pytest

torch = pytest.importorskip("torch", reason="the nn extra (torch) is not installed")

from fedgdp.nn.models import ModuleConvNet, build_model, module_twin  # noqa: E402

#: float32 sums of n <= 24 terms in another order, and opacus' clip factor B / (norm + 1e-6)
#: against B / norm (relative 1e-6 / norm): 1e-5 of the largest entry bounds both with room
TOL = 1e-5


@pytest.mark.parametrize("dataset", ["digits", "mnist"])
def test_the_module_twin_is_the_same_network(dataset):
    """Same parameter names and values (a copy, not shared), same log-probabilities bit for bit."""
    net = build_model(dataset, seed=4)
    twin = module_twin(net)
    assert isinstance(twin, ModuleConvNet)
    ours, theirs = dict(net.named_parameters()), dict(twin.named_parameters())
    assert list(ours) == list(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert all(ours[k].data_ptr() != theirs[k].data_ptr() for k in ours)
    shape = {"digits": (1, 8, 8), "mnist": (1, 28, 28)}[dataset]
    x = torch.randn((7, *shape), generator=torch.Generator().manual_seed(0))
    assert torch.equal(net(x), twin(x))


@pytest.mark.parametrize("clip", [0.05, 1.5, 100.0])   # norms 1.24-1.79 here: all clipped, some, none
def test_opacus_on_the_twin_gives_fedgdps_per_sample_clipped_sum(clip):
    """opacus' GradSampleModule + DPOptimizer (noise 0) on the twin: its gradient times n is the sum over
    images of each one's clipped gradient, as `clipped_grad_sums` computes it on the ConvNet (within TOL)."""
    pytest.importorskip("opacus", reason="opacus is not installed (pip install opacus; CI installs it)")
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    from fedgdp.nn.clipping import clipped_grad_sums

    g = torch.Generator().manual_seed(1)
    n = 24
    x, y = torch.randn((n, 1, 8, 8), generator=g), torch.randint(0, 10, (n,), generator=g)
    net = build_model("digits", seed=2)
    params = {k: v.detach() for k, v in net.named_parameters()}
    total, _ = clipped_grad_sums(params, x[None], y[None], torch.ones((1, n)), clip, shared=True)
    model = GradSampleModule(module_twin(net))
    opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), noise_multiplier=0.0, max_grad_norm=clip,
                      expected_batch_size=n)
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.nll_loss(model(x), y).backward()
    opt.step()
    got = {k.removeprefix("_module."): v.grad * n for k, v in model.named_parameters()}
    assert set(got) == set(total)
    for k, ref in total.items():
        assert float((got[k] - ref[0]).abs().max() / ref[0].abs().max()) < TOL, k


def test_nn_bench_runs_against_opacus(tmp_path):
    """The CI smoke run of `fedgdp nn-bench` with opacus installed, at small n: opacus' hooks and ghost
    clipping are timed, and each gives fedgdp's clipped step within TOL."""
    import json

    pytest.importorskip("opacus", reason="opacus is not installed (pip install opacus; CI installs it)")
    from fedgdp.commands.cli import main

    out = tmp_path / "b.json"
    assert main(["nn-bench", "--datasets", "digits", "--sizes", "5,10", "--repeats", "1", "--rounds", "1",
                 "--device", "cpu", "--threads", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["opacus"]
    for row in res["networks"]["digits"]["by_n"].values():
        assert {"opacus_hooks", "opacus_ghost"} <= set(row["seconds"])
        assert row["max_rel_diff_to_fedgdp"]["opacus_hooks"] < TOL
        assert row["max_rel_diff_to_fedgdp"]["opacus_ghost"] < TOL
