"""CNN methods with torch: the methods of the core on the torch backend against the former
loop (tests/nn_oracle.py), head-only Newton, sampling, reproducibility, CLI."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nn_oracle as oracle  # noqa: E402
from fedgdp.nn.backend import head_newton_step, head_vector, newton_direction, sample_clients  # noqa: E402
from fedgdp.nn.models import ConvNet, build_model  # noqa: E402
from fedgdp.nn.settings import METHODS, cnn_settings, resolve  # noqa: E402
from fedgdp.nn.train import ClientData, resolve_device, train  # noqa: E402


def tiny_net(seed=0, hidden=3):
    torch.manual_seed(seed)
    return ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=hidden, classes=3).double()


def tiny_data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, 1, 4, 4), generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


def params_of(net):
    return {k: v.detach() for k, v in net.named_parameters()}


def digits_clients(sizes, seed=0, dtype=torch.float64):
    from fedgdp.nn.data import load_images

    data = load_images("digits")
    idx = np.random.default_rng(seed).permutation(len(data.y_train))
    xs, ys, o = [], [], 0
    for s in sizes:
        xs.append(torch.as_tensor(data.x_train[idx[o:o + s]]).to(dtype))
        ys.append(torch.as_tensor(data.y_train[idx[o:o + s]]))
        o += s
    return ClientData(xs, ys)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("mu", [2.0, float("inf")])
@pytest.mark.parametrize("stack", [True, False])
def test_core_methods_equal_the_former_loop(method, mu, stack):
    """Each CNN method of fedgdp.methods on the torch backend equals the former training
    loop (materialised per-sample gradients, phases by kind, the old closed-form sds) with
    the same client draws and noise: float64, 1e-12 (only summation order differs), and
    the same rounds, clipped counts, gradient evaluations, floats and releases."""
    p = resolve({"dataset": "digits", "m": 6, "n": 30, "rounds": 4, "local_epochs": 3, "mu": mu, "q": 0.5,
                 "newton_cycles": 2, "server_lr": 0.8})
    net = build_model("digits", seed=1).double()
    params0 = params_of(net)
    clients = digits_clients([30, 20, 25, 10, 30, 15])
    cal = oracle.calibrate(method, p, clients.n)
    want, info = oracle.train(method, net, params0, clients, p, cal, np.random.default_rng(3),
                              torch.Generator().manual_seed(5))
    got = train(method, params0, clients, p, np.random.default_rng(3), torch.Generator().manual_seed(5), stack=stack)
    for k in want:
        torch.testing.assert_close(got.params[k], want[k], rtol=1e-12, atol=1e-12)
    assert (got.info.rounds, got.info.clipped, got.info.grad_evals, got.info.floats_up, got.info.floats_down) == \
        (info.rounds, info.clipped, info.grad_evals, info.floats_up, info.floats_down)
    stage = {"avg": "local step", "sgd": "gradient", "newton": "newton"}
    assert {stage[k]: v.tolist() for k, v in info.releases.items()} == {k: v.tolist() for k, v in got.counts.items()}
    np.testing.assert_allclose(got.ledger.composed_mu(), mu, rtol=1e-12)


def _closed_form_newton(net, x, y, B, lam, alpha):
    """Algorithm 5's head step in numpy: softmax-regression gradients (p - e_y) [z, 1]."""
    with torch.no_grad():
        z = net.features(x).numpy()
    W, b = net.head.weight.detach().numpy(), net.head.bias.detach().numpy()
    logits = z @ W.T + b
    P = np.exp(logits - logits.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    R = P - np.eye(W.shape[0])[y.numpy()]
    G = np.hstack([(R[:, :, None] * z[:, None, :]).reshape(len(y), -1), R])     # [W row-major, b]
    norms = np.linalg.norm(G, axis=1)
    G = G * np.minimum(1.0, B / norms)[:, None]
    h = G.T @ G / len(y)
    return alpha * np.linalg.solve(h + lam * np.eye(G.shape[1]), G.mean(0))


@pytest.mark.parametrize("n", [4, 40])          # n < D (Woodbury) and n > D (dense) for D = 3 * 4 = 12
@pytest.mark.parametrize("B", [0.2, np.inf])
def test_head_newton_step_equals_closed_form(n, B):
    net = tiny_net(hidden=3)
    x, y = tiny_data(n, seed=3)
    step, _ = head_newton_step(params_of(net), x, y, B=B, lam=0.3, alpha=0.7)
    np.testing.assert_allclose(step.numpy(), _closed_form_newton(net, x, y, B, 0.3, 0.7), rtol=1e-9, atol=1e-12)


def test_newton_direction_branches_agree():
    g = torch.Generator().manual_seed(0)
    G = torch.randn((6, 6), generator=g, dtype=torch.float64)
    dense = newton_direction(G, 0.5)
    wood = newton_direction(G[:5], 0.5)
    h = G[:5].T @ G[:5] / 5 + 0.5 * torch.eye(6, dtype=torch.float64)
    torch.testing.assert_close(wood, torch.linalg.solve(h, G[:5].mean(0)))
    assert dense.shape == (6,)


def test_newton_round_moves_only_the_head():
    """One client, every round drawn, mu = inf: FedNewton-Iter's Newton round is head - step."""
    net = tiny_net()
    x, y = tiny_data(9)
    clients = ClientData([x], [y])
    p = resolve({"figure": "fig10", "mu": float("inf"), "q": 1.0, "rounds": 1, "newton_cycles": 1,
                 "local_epochs": 1, "ridge": 0.4, "damping": 0.9, "methods": "fednewton_iter"})
    params0 = params_of(net)
    gen = torch.Generator().manual_seed(0)
    fit = train("fednewton_iter", params0, clients, p, np.random.default_rng(0), gen)
    theta = fit.params
    assert fit.info.rounds == 2
    # replay: one plain gradient step (FedAvg round), then the closed-form head step
    g, _ = oracle.clipped_mean_grad(net, params0, x, y, float("inf"))
    mid = {k: params0[k] - p.lr * g[k] for k in params0}
    net.load_state_dict(mid)
    want = head_vector(mid).numpy() - _closed_form_newton(net, x, y, np.inf, 0.4, 0.9)
    np.testing.assert_allclose(head_vector(theta).numpy(), want, rtol=1e-9, atol=1e-12)
    for k in params0:
        if not k.startswith("head."):
            torch.testing.assert_close(theta[k], mid[k])


@pytest.mark.parametrize("m,q", [(50, 0.1), (7, 0.5), (3, 0.01), (10, 1.0)])
def test_client_sampling_draws_the_fraction(m, q):
    rng = np.random.default_rng(1)
    k = max(1, round(q * m))
    counts = np.zeros(m)
    rounds = 3000
    for _ in range(rounds):
        S = sample_clients(rng, m, q)
        assert len(S) == k and len(set(S.tolist())) == k and np.all(np.diff(S) > 0)
        counts[S] += 1
    frac = k / m
    se = np.sqrt(frac * (1 - frac) / rounds) + 1e-12
    assert np.all(np.abs(counts / rounds - frac) <= 5 * se + 1e-12)


def test_training_records_sampled_releases():
    net = tiny_net()
    xs = [tiny_data(5, seed=s) for s in range(10)]
    clients = ClientData([a for a, _ in xs], [b for _, b in xs])
    p = resolve({"figure": "fig10", "q": 0.3, "rounds": 4, "local_epochs": 2, "methods": "fedavg"})
    fit = train("fedavg", params_of(net), clients, p, np.random.default_rng(0), torch.Generator().manual_seed(0))
    assert fit.counts["local step"].sum() == 4 * 3 * 2          # rounds x round(q m) clients x K steps
    spent = fit.ledger.spent_mu(fit.counts)
    assert np.all(spent <= p.mu + 1e-12) and np.any(spent < p.mu - 1e-3)


def test_run_is_reproducible_on_cpu():
    from fedgdp.nn.data import load_images
    from fedgdp.nn.run import run_nn

    data = load_images("digits")
    p = resolve({"figure": "fig09", "m": 4, "n": 20, "rounds": 2, "local_epochs": 2, "newton_cycles": 2})
    a = run_nn(p, device="cpu", threads=1, data=data)
    b = run_nn(p, device="cpu", threads=1, data=data)
    keys = ["method", "test_accuracy", "test_loss", "local_test_accuracy", "grad_evals", "mu_composed"]
    assert [[r[k] for k in keys] for r in a] == [[r[k] for k in keys] for r in b]
    c = run_nn(p.replace(run=1), device="cpu", threads=1, data=data)
    assert [r["test_loss"] for r in c] != [r["test_loss"] for r in a]
    assert all(abs(r["mu_composed"] - 2.0) < 1e-12 for r in a)


def test_models_and_device():
    counts = {d: sum(v.numel() for v in build_model(d, seed=0).parameters()) for d in ("mnist", "cifar10", "digits")}
    assert counts == {"mnist": 421_642, "cifar10": 620_362, "digits": 3_658}
    a, b = build_model("digits", seed=5), build_model("digits", seed=5)
    assert all(torch.equal(u, v) for u, v in zip(a.parameters(), b.parameters()))
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device"):
        resolve_device("nonsense")


def test_each_init_draws_the_named_distribution_within_one_from_the_seed():
    """`init` redraws conv and linear weights from the run's seed: He's and Glorot's uniform
    bounds (sqrt(6 / fan_in), sqrt(6 / (fan_in + fan_out))) hold for every weight, biases
    are 0, the same seed gives the same weights, the default is PyTorch's own draw, and every
    parameter starts in [-1, 1] (the starting magnitude parameter_bound assumes)."""
    base = build_model("mnist", seed=4)
    for init in ("he", "xavier"):
        net = build_model("mnist", seed=4, init=init)
        again = build_model("mnist", seed=4, init=init)
        assert all(torch.equal(u, v) for u, v in zip(net.parameters(), again.parameters()))
        assert not torch.equal(net.fc.weight, base.fc.weight)
        for layer in (*net.convs, net.fc, net.head):
            w = layer.weight.detach()
            fan_in = w[0].numel()
            fan_out = w.shape[0] * w[0, 0].numel()
            bound = math.sqrt(6 / fan_in) if init == "he" else math.sqrt(6 / (fan_in + fan_out))
            assert float(w.abs().max()) <= bound
            assert float(w.abs().max()) > 0.9 * bound       # a uniform draw of >= 1,000 values nears its bound
            assert not layer.bias.any()
        assert max(float(v.detach().abs().max()) for v in net.parameters()) <= 1.0
    with pytest.raises(ValueError, match="init='orthogonal'"):
        build_model("mnist", seed=4, init="orthogonal")
    with pytest.raises(ValueError, match="init"):
        resolve({"dataset": "mnist", "init": "orthogonal"})


def test_cli_run_summarise_plot(tmp_path):
    from fedgdp.commands.cli import main
    from fedgdp.nn.run import read_runs

    outs = []
    for n in (15, 20):
        out = tmp_path / f"n~{n}.parquet"
        rc = main(["nn-run", "--figure", "fig09", "--dataset", "digits", "--m", "4", "--n", str(n), "--run", "0",
                   "--rounds", "2", "--local-epochs", "1", "--newton-cycles", "1", "--threads", "1",
                   "--device", "cpu", "--out", str(out)])
        assert rc == 0
        outs.append(str(out))
    df = read_runs(outs)
    assert len(df) == 8 and set(df["x"]) == {15, 20}
    summ = tmp_path / "summary.parquet"
    assert main(["nn-summarise", *outs, "--out", str(summ)]) == 0
    assert main(["nn-plot", str(summ), "--figure", "fig09", "--out", str(tmp_path / "fig09.pdf")]) == 0
    assert (tmp_path / "fig09.png").stat().st_size > 1000


def test_cli_errors(tmp_path, capsys):
    from fedgdp.commands.cli import main

    rc = main(["nn-run", "--figure", "fig09", "--dataset", "mnist", "--m", "4", "--n", "20",
               "--data-dir", str(tmp_path), "--out", str(tmp_path / "x.parquet")])
    assert rc == 2 and "nn-fetch" in capsys.readouterr().err
    rc = main(["nn-run", "--figure", "fig09", "--m", "400", "--n", "20", "--out", str(tmp_path / "x.parquet")])
    assert rc == 2 and "exceeds" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_nn_bench_times_every_step_against_the_plain_gradient(tmp_path):
    """One tiny bench run: every method's time and ratio, plain = 1, the vmap path equal to
    fedgdp's step within float32 rounding (1e-5 relative), JSON and Markdown written."""
    import json

    from fedgdp.commands.cli import main

    out, md = tmp_path / "b.json", tmp_path / "b.md"
    assert main(["nn-bench", "--datasets", "digits", "--sizes", "5,10", "--repeats", "1", "--rounds", "1",
                 "--device", "cpu", "--threads", "1", "--out", str(out), "--md", str(md)]) == 0
    res = json.loads(out.read_text())
    rows = res["networks"]["digits"]["by_n"]
    assert set(rows) == {"5", "10"}
    for row in rows.values():
        assert {"plain", "fedgdp", "vmap"} <= set(row["seconds"]) and row["ratio_to_plain"]["plain"] == 1.0
        assert row["max_rel_diff_to_fedgdp"]["fedgdp"] == 0.0 and row["max_rel_diff_to_fedgdp"]["vmap"] < 1e-5
        assert all(v > 0 for v in row["seconds"].values())
    assert "| digits | 10 | fedgdp |" in md.read_text()
    assert all(v > 0 for v in res["networks"]["digits"]["estimate"]["run_s_fig10"].values())


def test_pooling_before_relu_is_the_former_block_exactly():
    """ConvNet's blocks pool then apply ReLU; ReLU is monotone, so this is max_pool(relu(z))
    bit for bit (values and gradients), ties and exact zeros included (rounded inputs make
    many)."""
    from torch.nn import functional as F

    net = build_model("digits", seed=3)
    x = torch.round(torch.randn(64, 1, 8, 8, generator=torch.Generator().manual_seed(1)) * 2) / 2
    x[:4] = 0.0                                                   # whole windows of equal values
    h_new, h_old = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    new = net(h_new)
    old = h_old
    for conv in net.convs:
        old = F.max_pool2d(F.relu(conv(old)), 2)
    old = F.log_softmax(net.head(F.relu(net.fc(old.flatten(1)))), dim=-1)
    assert torch.equal(new, old)
    (g_new,) = torch.autograd.grad(new[:, 0].sum(), h_new)
    (g_old,) = torch.autograd.grad(old[:, 0].sum(), h_old)
    assert torch.equal(g_new, g_old)


@pytest.mark.parametrize("method", METHODS)
def test_progress_reports_every_round(method):
    """train(progress=...) reports after each of the method's rounds, 1 .. Method.rounds, and
    Progress writes one line per report with the method, round r of R and the time left."""
    import io

    from fedgdp.methods import CNN, get_method
    from fedgdp.nn.train import Progress

    net = tiny_net()
    xs = [tiny_data(5, seed=s) for s in range(6)]
    clients = ClientData([a for a, _ in xs], [b for _, b in xs])
    p = resolve({"figure": "fig10", "q": 0.5, "rounds": 4, "local_epochs": 2, "newton_cycles": 2})
    done: list = []
    train(method, params_of(net), clients, p, np.random.default_rng(0), torch.Generator().manual_seed(0),
          progress=done.append)
    meth = get_method(method, CNN)
    assert done == list(range(1, meth.rounds(cnn_settings(meth, p)) + 1))
    out = io.StringIO()
    report = Progress(method, 4, stream=out)
    report(1)
    report(4)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{method}: round 1 of 4, ") and lines[1].endswith("about 0 s left")


def test_keep_freed_memory_changes_no_number():
    """The allocator setting of fedgdp nn-run takes on glibc (Linux) and a clipped gradient
    call after it equals the same call before it exactly."""
    import platform

    from fedgdp.nn.clipping import clipped_grad_sums
    from fedgdp.nn.train import keep_freed_memory

    net = build_model("digits", seed=2)
    clients = digits_clients([40], dtype=torch.float32)
    X, Y, M = clients.batch([0])
    before = clipped_grad_sums(params_of(net), X, Y, M, 0.5, shared=True)[0]
    took = keep_freed_memory()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert took is True
    after = clipped_grad_sums(params_of(net), X, Y, M, 0.5, shared=True)[0]
    assert all(torch.equal(before[k], after[k]) for k in before)
