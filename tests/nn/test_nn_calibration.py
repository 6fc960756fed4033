"""CNN methods: schedules, noise calibration, ledger, settings, data files, plots (no torch needed)."""
import math
import pickle

import numpy as np
import pandas as pd
import pytest

from fedgdp.core import privacy
from fedgdp.methods import get_method
from fedgdp.nn.data import DataUnavailable, load_images, write_idx
from fedgdp.nn.settings import METHODS, cnn_settings, release_plan, resolve

SIZES = np.array([8, 40, 41, 480, 4000])


def calibrate(method, p, n):
    """Noise sds per ledger stage (1-d over clients) and the ledger of a CNN method."""
    plan = release_plan(method, p, n)
    cal = privacy.calibrate(plan, mu=p.mu)
    return {spec.stage: np.asarray(sig)[0] for spec, sig in zip(plan, cal.sigmas)}, cal.ledger, plan


@pytest.mark.parametrize("dataset", ["digits", "mnist", "cifar10"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("mu", [0.5, 2.0, 7.0])
def test_ledger_composes_to_mu(dataset, method, mu):
    p = resolve({"dataset": dataset, "mu": mu, "figure": "fig10", "ridge": 0.3, "damping": 0.7})
    _, ledger, plan = calibrate(method, p, SIZES)
    np.testing.assert_allclose(ledger.composed_mu(), mu, rtol=0, atol=1e-12)
    # a client drawn in every round spends exactly mu; one never drawn spends 0
    every = {spec.stage: np.full(SIZES.shape, spec.count) for spec in plan}
    np.testing.assert_allclose(ledger.spent_mu(every), mu, atol=1e-12)
    assert np.all(ledger.spent_mu({spec.stage: np.zeros(SIZES.shape, int) for spec in plan}) == 0)


@pytest.mark.parametrize("share,R", [(0.0, 10), (0.6, 10), (1.0, 10), (0.5, 3)])
def test_hybrid_ledger_and_compute_match(share, R):
    p = resolve({"hybrid_local_share": share, "rounds": R, "figure": "fig10", "methods": "fedhybrid"})
    K = p.local_epochs
    s = cnn_settings(get_method("fedhybrid", "nn"), p)
    # compute-matched: as many gradient steps per drawn client as FedAvg's R K
    assert s.R1 * s.K1 + s.K2 == R * K
    np.testing.assert_allclose(calibrate("fedhybrid", p, SIZES)[1].composed_mu(), p.mu, atol=1e-12)


def test_sigmas_match_the_paper():
    p = resolve({"dataset": "mnist", "figure": "fig10", "mu": 2.0})
    B, eta, R, K, mu = p.clip, p.lr, p.rounds, p.local_epochs, p.mu
    n = SIZES.astype(float)
    # Algorithm 3: 2 B eta sqrt(R K) / (mu n) per local step
    np.testing.assert_allclose(calibrate("fedavg", p, n)[0]["local step"], 2 * B * eta * math.sqrt(R * K) / (mu * n))
    # compute-matched Algorithm 1 over R K rounds
    np.testing.assert_allclose(calibrate("fedsgd", p, n)[0]["gradient"], 2 * B * math.sqrt(R * K) / (mu * n))
    # Algorithm 5: stage 1 noise 2 B eta sqrt(2 R K) / (mu n)
    sig, _, plan = calibrate("fednewton_iter", p, n)
    np.testing.assert_allclose(sig["local step"], 2 * B * eta * math.sqrt(2 * R * K) / (mu * n))
    lam, alpha, C = p.ridge, p.damping, p.newton_cycles
    sens = alpha * B / (lam * n) * (2 + B * B / lam)
    np.testing.assert_allclose(plan[1].sensitivity[0], sens)
    np.testing.assert_allclose(sig["newton"], sens * math.sqrt(2 * C) / mu)
    # Algorithm 2 halves
    sig, _, _ = calibrate("fedhybrid", p, n)
    R1 = round(0.6 * R)
    np.testing.assert_allclose(sig["local step"], 2 * B * eta * math.sqrt(2 * R1 * K) / (mu * n))
    np.testing.assert_allclose(sig["gradient"], 2 * B * math.sqrt(2 * (R - R1) * K) / (mu * n))


def test_newton_iter_rounds():
    p = resolve({"dataset": "mnist", "figure": "fig10"})
    meth = get_method("fednewton_iter", "nn")
    s = cnn_settings(meth, p)
    assert (s.R, s.cycles, meth.rounds(s)) == (10, 2, 12)       # 2 x (5 FedAvg rounds + 1 Newton round)


def test_non_private_ledger():
    p = resolve({"mu": float("inf"), "figure": "fig10"})
    sig, ledger, _ = calibrate("fedavg", p, SIZES)
    assert np.all(np.isinf(ledger.composed_mu())) and np.all(sig["local step"] == 0)


@pytest.mark.parametrize("bad,word", [
    ({"mu": 0}, "mu"), ({"q": 0}, "q"), ({"q": 1.5}, "q"), ({"m": -5}, "m"), ({"methods": "fedfoo"}, "fedfoo"),
    ({"figure": "fig11"}, "figure"), ({"figure": "fig09", "n": None}, "n"), ({"figure": "fig10", "n": 50}, "n"),
    ({"rounds": 9}, "newton_cycles"), ({"dataset": "imagenet"}, "imagenet"), ({"lr": -1}, "lr"),
    ({"colour": 1}, "colour"), ({"m": 2.5}, "m"),
])
def test_bad_settings_name_the_key(bad, word):
    with pytest.raises(ValueError, match=word):
        resolve({"figure": "fig10", **bad} if "figure" not in bad else bad)


def test_paper_defaults():
    mn = resolve({"dataset": "mnist", "figure": "fig10"})
    assert (mn.q, mn.rounds, mn.local_epochs, mn.lr, mn.server_lr, mn.clip, mn.mu) == \
        (0.1, 10, 10, 0.01, 1.0, 1.0, 2.0)
    cf = resolve({"dataset": "cifar10", "figure": "fig10"})
    assert (cf.local_epochs, cf.lr, cf.server_lr, cf.clip) == (30, 0.005, 0.75, 0.75)


# ------------------------------------------------------------------ data files
def test_mnist_reader_on_idx_fixture(tmp_path, monkeypatch):
    import hashlib

    from fedgdp.common import datasets

    folder = tmp_path / "mnist"
    folder.mkdir()
    rng = np.random.default_rng(0)
    tr, te = rng.integers(0, 256, (6, 28, 28), dtype=np.uint8), rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    arrays = [tr, np.arange(6, dtype=np.uint8), te, np.array([7, 8, 9], dtype=np.uint8)]
    monkeypatch.setattr(datasets, "MNIST_RAW_MD5", {n: hashlib.md5(datasets._idx_bytes(a)).hexdigest()
                                                    for n, a in zip(datasets.MNIST_FILES, arrays)})
    write_idx(folder / "train-images-idx3-ubyte.gz", tr)
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.arange(6, dtype=np.uint8))
    write_idx(folder / "t10k-images-idx3-ubyte", te)           # uncompressed also read
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.array([7, 8, 9], dtype=np.uint8))
    d = load_images("mnist", tmp_path)
    assert d.x_train.shape == (6, 1, 28, 28) and d.x_test.shape == (3, 1, 28, 28)
    assert d.y_train.tolist() == list(range(6)) and d.y_test.tolist() == [7, 8, 9]
    np.testing.assert_allclose(d.x_train[2, 0] * 0.3081 + 0.1307, tr[2] / 255.0, atol=1e-6)


def test_cifar_reader_on_pickle_fixture(tmp_path):
    folder = tmp_path / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8), b"labels": [1, 2]}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch, fh)
    d = load_images("cifar10", tmp_path)
    assert d.x_train.shape == (10, 3, 32, 32) and d.x_test.shape == (2, 3, 32, 32)
    assert d.y_train.tolist() == [1, 2] * 5


def test_missing_files_give_a_clear_error(tmp_path):
    with pytest.raises(DataUnavailable, match="train-images-idx3-ubyte.gz.*nn-fetch"):
        load_images("mnist", tmp_path)
    with pytest.raises(DataUnavailable, match="data_batch_1.*cifar-10-python.tar.gz"):
        load_images("cifar10", tmp_path)


def test_digits_split():
    d = load_images("digits")
    assert d.x_train.shape == (1437, 1, 8, 8) and d.x_test.shape == (360, 1, 8, 8)
    assert set(np.unique(d.y_test)) == set(range(10))


# ------------------------------------------------------------------------ plots
def _fake_runs():
    rows = []
    for fig, xs in (("fig09", [30, 60]), ("fig10", [5, 10])):
        for x in xs:
            for run in range(3):
                for k, meth in enumerate(METHODS):
                    rows.append({"figure": fig, "dataset": "digits", "method": meth, "label": meth, "x": x,
                                 "m": 10 if fig == "fig09" else x, "n": x if fig == "fig09" else None,
                                 "mu": 2.0, "q": 0.5, "run": run, "test_accuracy": 0.1 * k + 0.01 * run,
                                 "local_test_accuracy": 0.5, "rounds": 10, "elapsed_s": 1.0, "mu_composed": 2.0})
    return pd.DataFrame(rows)


def test_summary_medians_and_figures(tmp_path):
    from fedgdp.nn.plots import plot_nn_figure, summarise_runs

    s = summarise_runs(_fake_runs())
    assert len(s) == 2 * 2 * len(METHODS) and (s["runs"] == 3).all()
    np.testing.assert_allclose(s[s["method"] == "fedavg"]["median_accuracy"], 0.21)
    for fig in ("fig09", "fig10"):
        paths = plot_nn_figure(s, fig, tmp_path / f"{fig}.pdf")
        assert all(p.stat().st_size > 1000 for p in paths)
        import matplotlib.image

        assert matplotlib.image.imread(paths[1]).ndim == 3


def test_cifar_archive_is_unpacked(tmp_path):
    import io
    import tarfile

    (tmp_path / "cifar10").mkdir()
    with tarfile.open(tmp_path / "cifar10" / "cifar-10-python.tar.gz", "w:gz") as tar:
        for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
            blob = pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, 4]})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    d = load_images("cifar10", tmp_path)
    assert d.x_train.shape == (10, 3, 32, 32) and d.y_test.tolist() == [3, 4]
    assert (tmp_path / "cifar10" / "cifar-10-batches-py" / "test_batch").exists()
