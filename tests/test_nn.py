"""CNN methods with torch: per-sample clipping, head-only Newton, sampling, reproducibility, CLI."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedgdp.nn.calibration import calibrate  # noqa: E402
from fedgdp.nn.models import ConvNet, build_model  # noqa: E402
from fedgdp.nn.settings import resolve  # noqa: E402
from fedgdp.nn.train import (ClientData, batched_clipped_mean_grads, clipped_mean_grad,  # noqa: E402
                             head_newton_step, head_vector, newton_direction, resolve_device, sample_clients,
                             train)


def tiny_net(seed=0, hidden=3):
    torch.manual_seed(seed)
    return ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=hidden, classes=3).double()


def tiny_data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, 1, 4, 4), generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


def params_of(net):
    return {k: v.detach() for k, v in net.named_parameters()}


@pytest.mark.parametrize("B", [0.05, 0.5, 50.0])
def test_per_sample_clipped_gradient_equals_loop(B):
    net = tiny_net()
    x, y = tiny_data(7)
    params = params_of(net)
    got, clipped = clipped_mean_grad(net, params, x, y, B, max_floats=3 * 100)   # several chunks
    want = {k: torch.zeros_like(v) for k, v in params.items()}
    n_clipped = 0
    for j in range(7):
        net.zero_grad()
        torch.nn.functional.nll_loss(net(x[j:j + 1]), y[j:j + 1]).backward()
        g = {k: v.grad.detach().clone() for k, v in net.named_parameters()}
        norm = torch.sqrt(sum((v ** 2).sum() for v in g.values()))
        factor = min(1.0, B / float(norm))
        n_clipped += factor < 1
        for k in want:
            want[k] += factor * g[k] / 7
    assert clipped == n_clipped
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("B", [0.3, float("inf")])
@pytest.mark.parametrize("shared", [True, False])
def test_batched_clients_equal_one_by_one(B, shared):
    """Clients of unequal sizes, padded and batched, give each client's own clipped mean."""
    sizes = [3, 7, 5]
    data = [tiny_data(n, seed=10 + n) for n in sizes]
    clients = ClientData([a for a, _ in data], [b for _, b in data])
    X, Y, M = clients.batch([0, 1, 2])
    assert X.shape[:2] == (3, 7) and M.sum().item() == 15
    nets = [tiny_net(seed=0 if shared else s) for s in range(3)]
    ps = [params_of(net) for net in nets]
    params = ps[0] if shared else {k: torch.stack([p[k] for p in ps]) for k in ps[0]}
    got, clipped = batched_clipped_mean_grads(nets[0], params, X, Y, M, B, shared=shared, max_floats=2 * 3 * 100)
    total = 0
    for i in range(3):
        want, c = clipped_mean_grad(nets[0], ps[i], *data[i], B)
        total += c
        for k in want:
            torch.testing.assert_close(got[k][i], want[k], rtol=1e-10, atol=1e-12)
    assert clipped == total


@pytest.mark.parametrize("max_floats", [10, 1 << 25])       # client loop / batched
def test_round_grads_paths_agree(max_floats):
    from fedgdp.nn.train import round_grads

    data = [tiny_data(n, seed=20 + n) for n in (4, 6)]
    clients = ClientData([a for a, _ in data], [b for _, b in data])
    net = tiny_net()
    P = params_of(net)
    got, _ = round_grads(net, P, clients, np.array([1, 0]), 0.3, shared=True, max_floats=max_floats)
    for j, i in enumerate([1, 0]):
        want, _ = clipped_mean_grad(net, P, *data[i], 0.3)
        for k in want:
            torch.testing.assert_close(got[k][j], want[k], rtol=1e-10, atol=1e-12)


def test_unclipped_gradient_is_the_mean_gradient():
    net = tiny_net()
    x, y = tiny_data(5)
    got, _ = clipped_mean_grad(net, params_of(net), x, y, float("inf"))
    net.zero_grad()
    torch.nn.functional.nll_loss(net(x), y).backward()
    for k, v in net.named_parameters():
        torch.testing.assert_close(got[k], v.grad, rtol=1e-10, atol=1e-12)


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
    step, _ = head_newton_step(net, params_of(net), x, y, B=B, lam=0.3, alpha=0.7)
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
    theta, info = train("fednewton_iter", net, params0, clients, p, calibrate("fednewton_iter", p, clients.n),
                        np.random.default_rng(0), gen)
    assert info.rounds == 2
    # replay: one plain gradient step (FedAvg round), then the closed-form head step
    g, _ = clipped_mean_grad(net, params0, x, y, float("inf"))
    mid = {k: params0[k] - p["lr"] * g[k] for k in params0}
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
    cal = calibrate("fedavg", p, clients.n)
    _, info = train("fedavg", net, params_of(net), clients, p, cal, np.random.default_rng(0),
                    torch.Generator().manual_seed(0))
    assert info.releases["avg"].sum() == 4 * 3 * 2          # rounds x round(q m) clients x K steps
    assert np.all(cal.mu_spent(info.releases) <= p["mu"] + 1e-12)


def test_run_is_reproducible_on_cpu():
    from fedgdp.nn.data import load_images
    from fedgdp.nn.run import run_nn

    data = load_images("digits")
    p = resolve({"figure": "fig09", "m": 4, "n": 20, "rounds": 2, "local_epochs": 2, "newton_cycles": 2})
    a = run_nn(p, device="cpu", threads=1, data=data)
    b = run_nn(p, device="cpu", threads=1, data=data)
    keys = ["method", "test_accuracy", "test_loss", "local_test_accuracy", "grad_evals", "mu_composed"]
    assert [[r[k] for k in keys] for r in a] == [[r[k] for k in keys] for r in b]
    c = run_nn({**p, "run": 1}, device="cpu", threads=1, data=data)
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


def test_cli_run_summarise_plot(tmp_path):
    from fedgdp.cli import main
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
    from fedgdp.cli import main

    rc = main(["nn-run", "--figure", "fig09", "--dataset", "mnist", "--m", "4", "--n", "20",
               "--data-dir", str(tmp_path), "--out", str(tmp_path / "x.parquet")])
    assert rc == 2 and "nn-fetch" in capsys.readouterr().err
    rc = main(["nn-run", "--figure", "fig09", "--m", "400", "--n", "20", "--out", str(tmp_path / "x.parquet")])
    assert rc == 2 and "exceeds" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
