"""``clip_unit: client``: a gradient release clips the client's mean (or summed) gradient as
one vector at B, as Algorithm 5 clips its Newton release's gradient, instead of each image's
(`fedgdp.nn.settings.reduced_plan`, `fedgdp.nn.backend.clip_client_vectors`). Replacing one
image can move the unclipped vector anywhere; both clipped vectors lie in the ball of radius
B, so the release's sensitivity is 2 B (times the step) whatever the client's size.
``clip_unit: update``: a round's local steps unclipped and noiseless, then the model update
clipped at B with noise once: one release per round, sensitivity 2 B."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedgdp.nn.backend import clip_client_vectors  # noqa: E402
from fedgdp.nn.clipping import clip_margin, clipped_grad_sums  # noqa: E402
from fedgdp.nn.settings import METHODS, parameter_bound, release_plan, resolve  # noqa: E402
from fedgdp.nn.train import ClientData, train  # noqa: E402

N = 6


def _clients(m=8, seed=0, sizes=None):
    g = torch.Generator().manual_seed(seed)
    sizes = sizes or [N] * m
    return ClientData([torch.randn((n, 1, 4, 4), generator=g, dtype=torch.float64) for n in sizes],
                      [torch.randint(0, 3, (n,), generator=g) for n in sizes])


def _net():
    from fedgdp.nn.models import ConvNet

    torch.manual_seed(0)
    net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3).double()
    return {k: v.detach() for k, v in net.named_parameters()}


def _fit(method, clients=None, **over):
    p = resolve({"figure": "fig10", "q": 0.25, "rounds": 4, "local_epochs": 2, "newton_cycles": 2, "clip": 0.5,
                 **over})
    return train(method, _net(), clients or _clients(), p, np.random.default_rng(11),
                 torch.Generator().manual_seed(5))


def _audited(p):
    """FedHybrid's releases at settings p audited (`fedgdp.audit.audit_nn`, the backend's own
    releases against its ledger; main client of 3 images): release -> ratio."""
    from fedgdp.audit import AuditTarget, audit_nn
    from fedgdp.audit.nn import NN_KEYS

    rows = audit_nn([AuditTarget("nn", "fedhybrid", "cnn", nn={k: getattr(p, k) for k in NN_KEYS})], 0, n=3)
    return {r.release: r.ratio for r in rows}


def _vector(d):
    return torch.cat([v.flatten() for v in d.values()])


def test_a_clipped_client_vector_equals_a_loop_over_images_clipped_by_hand():
    """Two clients of 5 and 3 images in one padded stack, each with its own parameters: the
    mean of one autograd gradient per image, clipped by hand at (1 - kappa) B as one vector,
    equals `clip_client_vectors` of the unclipped means to 1e-10 (float64)."""
    from fedgdp.nn.models import ConvNet

    B = 0.05
    clients = _clients(sizes=[5, 3])
    X, Y, M = clients.batch([0, 1])
    base = _net()
    g = torch.Generator().manual_seed(2)
    ps = [base, {k: v + 0.1 * torch.randn(v.shape, generator=g, dtype=v.dtype) for k, v in base.items()}]
    stacked = {k: torch.stack([p[k] for p in ps]) for k in base}
    total, _ = clipped_grad_sums(stacked, X, Y, M, math.inf)
    got, was = clip_client_vectors({k: v / M.sum(1).view(-1, *[1] * (v.dim() - 1)) for k, v in total.items()}, B)
    for s, p in enumerate(ps):
        net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3).double()
        net.load_state_dict(p)
        want = {k: torch.zeros_like(v) for k, v in p.items()}
        n = int(clients.n[s])
        for j in range(n):
            net.zero_grad()
            torch.nn.functional.nll_loss(net(clients.x[s][j:j + 1]), clients.y[s][j:j + 1]).backward()
            for k, v in net.named_parameters():
                want[k] += v.grad / n
        norm = float(_vector(want).norm())
        D = sum(v.numel() for v in want.values())
        c = min(1.0, (1 - clip_margin(D, torch.float64)) * B / norm)
        assert norm > B and float(was[s]) == 1.0
        for k in want:
            torch.testing.assert_close(got[k][s], c * want[k], rtol=1e-10, atol=1e-13)
        assert float(_vector({k: v[s] for k, v in got.items()}).norm()) <= B


def test_a_non_finite_client_vector_releases_zero():
    g = {"w": torch.tensor([[1.0, float("inf")], [3.0, 4.0]], dtype=torch.float32)}
    out, was = clip_client_vectors(g, 1.0)
    assert out["w"][0].tolist() == [0.0, 0.0] and float(out["w"][1].norm()) <= 1.0
    assert was.tolist() == [1.0, 1.0]


def test_the_plan_records_2B_per_step_whatever_the_size_and_keeps_the_newton_release():
    p = resolve({"figure": "fig10", "clip_unit": "client", "clip": 2.0, "lr": 0.1})
    n = np.array([10.0, 40.0])
    by_stage = {s.stage: s.sensitivity for s in release_plan("fednewton_iter", p, n)}
    np.testing.assert_allclose(by_stage["local step"], [[2 * 2.0 * 0.1] * 2])
    sample = {s.stage: s.sensitivity for s in release_plan("fednewton_iter", p.replace(clip_unit="sample"), n)}
    np.testing.assert_allclose(sample["local step"], [[2 * 2.0 * 0.1 / 10, 2 * 2.0 * 0.1 / 40]])
    np.testing.assert_allclose(by_stage["newton"], sample["newton"])                  # Algorithm 5's, unchanged
    for over in ({}, {"reduction": "sum"}, {"local_batch": 4}):
        assert {s.stage: s.sensitivity[0, 0] for s in release_plan("fedsgd", p.replace(**over), n)} == {"gradient": 4.0}
    # a client-clipped sum is within B however many images it adds up: the bound of the mean
    private = p.replace(mu=2.0)
    assert parameter_bound("fedavg", private.replace(reduction="sum")) == parameter_bound("fedavg", private)


def test_an_unknown_clip_unit_is_refused_by_name():
    with pytest.raises(ValueError, match="clip_unit"):
        resolve({"clip_unit": "layer"})


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("over", [{}, {"reduction": "sum"}, {"local_batch": 4}])
def test_a_bound_no_client_reaches_is_the_plain_run_bit_for_bit(method, over):
    """Clipped at a bound no client's vector reaches, without noise: the same network as the
    plain run, every number (the unit changes only what is clipped, not the steps)."""
    clipped = _fit(method, clip_unit="client", release="clip_only", clip=1e6, methods=[method], **over)
    plain = _fit(method, release="plain", methods=[method], **over)
    for k in plain.params:
        assert torch.equal(clipped.params[k], plain.params[k])
    assert clipped.info.clipped == 0


@pytest.mark.parametrize("over", [{}, {"local_batch": 4}])
def test_every_release_of_a_client_clipped_run_moves_it_by_at_most_its_step_times_B(over):
    """FedSGD without noise at a tiny B: R K server steps of the weighted mean of the drawn
    clients' clipped vectors, each of norm at most B, so the network moves by at most
    R K server_lr lr B; and each image of a clipped client counts as clipped."""
    B, lr = 1e-4, 0.5
    start = _net()
    got = _fit("fedsgd", clip_unit="client", release="clip_only", clip=B, lr=lr, **over)
    moved = float((_vector(got.params) - _vector(start)).norm())
    steps = got.info.rounds
    assert 0 < moved <= steps * lr * B * (1 + 1e-12)
    assert got.info.clipped == got.info.grad_evals            # every vector was above B
    sample = _fit("fedsgd", release="clip_only", clip=B, lr=lr, **over)
    assert not torch.allclose(sample.params["head.bias"], got.params["head.bias"])


def test_one_replaced_image_moves_a_client_release_by_more_than_the_mean_could_and_at_most_2B():
    """A client of 3 images, one replaced by a scaled image: the client-clipped mean moves by
    more than 2B/3 (the per-sample mean's bound) and at most the recorded 2 B; the audit's
    search stays within the recorded bounds and gets near them."""
    B = 1e-3
    params, g = _net(), torch.Generator().manual_seed(3)
    x, y = torch.randn((1, 3, 1, 4, 4), generator=g, dtype=torch.float64), torch.tensor([[0, 1, 2]])
    x2, y2 = x.clone(), y.clone()
    x2[0, 0], y2[0, 0] = 50 * torch.randn((1, 4, 4), generator=g, dtype=torch.float64), 1
    mask = torch.ones((1, 3), dtype=torch.float64)
    moved = []
    for xs, ys in ((x, y), (x2, y2)):
        total, _ = clipped_grad_sums(params, xs, ys, mask, math.inf, shared=True)
        moved.append(_vector(clip_client_vectors({k: v / 3 for k, v in total.items()}, B)[0]))
    change = float((moved[1] - moved[0]).norm())
    (spec,) = release_plan("fedsgd", resolve({"figure": "fig10", "clip_unit": "client", "clip": B}), np.array([3.0]))
    assert 2 * B / 3 < change <= float(spec.sensitivity[0, 0]) == 2 * B
    p = resolve({"figure": "fig10", "clip_unit": "client", "clip": 1.0, "dataset": "digits"})
    ratios = _audited(p)
    assert all(r <= 1 for r in ratios.values())
    assert ratios["gradient"] >= 0.9 and ratios["local step"] >= 0.9


def test_an_update_release_is_one_per_round_of_sensitivity_2B():
    p = resolve({"figure": "fig10", "clip_unit": "update", "clip": 2.0, "lr": 0.1, "rounds": 10, "local_epochs": 5})
    n = np.array([10.0, 40.0])
    (spec,) = release_plan("fedavg", p, n)
    assert (spec.stage, spec.count) == ("local step", 10)
    np.testing.assert_allclose(spec.sensitivity, [[4.0, 4.0]])                    # 2 B, no step size
    by_stage = {s.stage: s for s in release_plan("fednewton_iter", p, n)}
    sample = {s.stage: s for s in release_plan("fednewton_iter", p.replace(clip_unit="sample"), n)}
    assert by_stage["local step"].count * 5 == sample["local step"].count
    np.testing.assert_allclose(by_stage["newton"].sensitivity, sample["newton"].sensitivity)
    assert {s.stage: s.sensitivity[0, 0] for s in release_plan("fedsgd", p, n)} == {"gradient": 4.0}
    hybrid = {s.stage: s.count for s in release_plan("fedhybrid", p, n)}
    assert hybrid["local step"] * 5 == {s.stage: s.count for s in
                                        release_plan("fedhybrid", p.replace(clip_unit="sample"), n)}["local step"]


def test_a_clipped_update_counts_its_round_once_even_with_images_that_are_not_finite():
    """Clients with a NaN image under clip_unit: update: each clipped round counts its K n_i
    gradient evaluations as clipped, the NaN images not a second time."""
    clients = _clients()
    clients.x[0][0, 0, 0, 0] = float("nan")
    got = _fit("fedavg", clients, clip_unit="update", release="clip_only", clip=1e-4, methods=["fedavg"])
    assert got.info.clipped == got.info.grad_evals
    for over in ({}, {"local_batch": 4}):
        loose = _fit("fedavg", clients, clip_unit="update", release="clip_only", clip=1e6, methods=["fedavg"],
                     **over)
        drawn = int(loose.counts["local step"][0])          # rounds client 0 was drawn in
        assert loose.info.clipped == 2 * drawn                # K = 2 steps, its NaN image zeroed in each


@pytest.mark.parametrize("method", ["fedavg", "fedhybrid", "fednewton_iter"])
def test_an_update_no_client_reaches_is_the_plain_run_to_rounding(method):
    """Clipped at a bound no update reaches, without noise: the plain run, to 1e-12 (the
    update is added back to the round's start: one rounding per parameter), with the same
    client draws; the ledger counts one release per round a client is drawn in."""
    clipped = _fit(method, clip_unit="update", release="clip_only", clip=1e6, methods=[method])
    plain = _fit(method, release="plain", methods=[method])
    for k in plain.params:
        torch.testing.assert_close(clipped.params[k], plain.params[k], rtol=1e-12, atol=1e-12)
    assert clipped.info.clipped == 0 and clipped.info.rounds == plain.info.rounds
    assert int(clipped.counts["local step"].sum()) * 2 == int(plain.counts["local step"].sum())   # K = 2


def test_every_update_round_moves_fedavg_by_at_most_server_lr_times_B():
    """FedAvg without noise at a tiny B: each round averages clipped updates of norm at most
    B, so R rounds move the network by at most R server_lr B; every update is clipped."""
    B = 1e-4
    start = _net()
    got = _fit("fedavg", clip_unit="update", release="clip_only", clip=B, lr=0.5, methods=["fedavg"],
               server_lr=0.8)
    moved = float((_vector(got.params) - _vector(start)).norm())
    assert 0 < moved <= got.info.rounds * 0.8 * B * (1 + 1e-12)
    assert got.info.clipped == got.info.grad_evals


def test_private_update_runs_spend_their_mu_and_the_audit_bounds_the_update():
    got = _fit("fedavg", clip_unit="update", methods=["fedavg"])
    np.testing.assert_allclose(got.ledger.composed_mu(), 2.0, rtol=1e-12)
    assert 0 < got.info.clipped <= got.info.grad_evals          # a clipped round counts its images once
    assert all(np.isfinite(v.numpy()).all() for v in got.params.values())
    p = resolve({"figure": "fig10", "clip_unit": "update", "clip": 0.05, "dataset": "digits", "local_epochs": 3})
    ratios = _audited(p)
    assert all(r <= 1 for r in ratios.values())
    assert ratios["local step"] >= 0.9


@pytest.mark.parametrize("method", ["fedsgd", "fedavg"])
@pytest.mark.parametrize("over", [{}, {"reduction": "sum"}])
def test_a_clipped_client_counts_its_images_once_even_with_an_image_that_is_not_finite(method, over):
    """clip_unit: client at a tiny B, a NaN image at one client: every vector is clipped, so
    every gradient evaluation counts as clipped once, the NaN image not a second time."""
    clients = _clients()
    clients.x[0][0, 0, 0, 0] = float("nan")
    got = _fit(method, clients, clip_unit="client", release="clip_only", clip=1e-4, methods=[method], **over)
    assert got.info.clipped == got.info.grad_evals


@pytest.mark.parametrize("method", ["fedavg", "fedhybrid", "fednewton_iter"])
def test_an_update_run_reports_the_rounds_each_client_was_drawn_in(method):
    """A run's participation and spent mu under clip_unit: update count a drawn round once
    (one local-step release a round, not local_epochs): the same clients are drawn as in
    the per-sample run of the same seeds, so the rounds each was drawn in are the same, and
    the spent mu is finite and at most mu over the clients drawn."""
    from fedgdp.nn.run import _rounds_drawn, _spent

    p = resolve({"figure": "fig10", "q": 0.25, "rounds": 4, "local_epochs": 2, "newton_cycles": 2, "clip": 0.5})
    update = _fit(method, clip_unit="update", methods=[method])
    sample = _fit(method, methods=[method])
    got = _rounds_drawn(update.counts, p.replace(clip_unit="update"))
    np.testing.assert_array_equal(got, _rounds_drawn(sample.counts, p))
    assert got.sum() > 0
    spent = _spent(update.ledger, update.counts, p.replace(clip_unit="update"))
    assert 0 < spent["mu_spent_min"] <= spent["mu_spent_max"] <= 2.0 + 1e-9
