"""Data sets and client layouts: partition invariants, the IDX/npz readers on files the
tests write, the offline error, and checksum-verified fetching from a local mirror."""
import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from fedgdp.commands.cli import main
from fedgdp.common.datasets import (
    MNIST_FILES,
    client_layout,
    fetch_mnist,
    layout_key,
    load_dataset,
    load_digits,
    load_mnist,
    read_idx,
    split_layout,
    write_idx,
)
from paths import ROOT


@pytest.mark.parametrize("N,m,n_min", [(1797, 10, 150), (1000, 7, 100), (500, 20, 25), (70, 3, 0)])
def test_layout_invariants(N, m, n_min):
    L = client_layout(np.random.default_rng(N + m), N, m=m, n_min=n_min, folds=5)
    # every image in exactly one client
    assert np.array_equal(np.sort(L.order), np.arange(N))
    assert L.sizes.sum() == N and L.m == m and (L.sizes >= max(n_min, 5)).all()
    assert np.array_equal(np.bincount(L.client, minlength=m), L.sizes)
    for i in range(m):
        members = L.members(i)
        assert (L.client[members] == i).all()
        counts = np.bincount(L.fold[members], minlength=5)
        assert counts.sum() == L.sizes[i] and counts.max() - counts.min() <= 1     # near-equal folds
        tests = []
        for f in range(5):
            train, test = L.train_test(i, f)
            assert len(np.intersect1d(train, test)) == 0                          # disjoint
            assert np.array_equal(np.sort(np.concatenate([train, test])), np.sort(members))
            tests.append(test)
        all_tests = np.concatenate(tests)
        assert np.array_equal(np.sort(all_tests), np.sort(members))               # folds cover the client


def test_layout_seeding_is_reproducible_and_splits_differ():
    key = layout_key("digits", 1797, 10, 150, 1.0, 5)
    a, b, c = split_layout(2026, key, 0), split_layout(2026, key, 0), split_layout(2026, key, 1)
    assert np.array_equal(a.order, b.order) and np.array_equal(a.fold, b.fold)
    assert not np.array_equal(a.order, c.order)
    assert not np.array_equal(a.sizes, split_layout(7, key, 0).sizes)


def test_layout_errors_name_the_bad_values():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"m \* n_min = 10 \* 200 = 2000 exceeds the 1797 images"):
        client_layout(rng, 1797, m=10, n_min=200)
    with pytest.raises(ValueError, match="fewer than folds=5"):
        client_layout(rng, 30, m=10, n_min=0)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        client_layout(rng, 100, m=2, n_min=10, alpha=0)


def test_digits_features_and_task_labels():
    ds = load_digits()
    assert ds.X.shape == (1797, 65) and np.all(ds.X[:, 0] == 1)
    assert ds.X[:, 1:].min() == 0 and ds.X[:, 1:].max() == 1
    assert np.array_equal(ds.targets("binary"), ds.labels % 2)
    assert set(ds.targets("binary")[ds.labels == 7]) == {1} and set(ds.targets("binary")[ds.labels == 4]) == {0}
    with pytest.raises(ValueError, match="unknown task"):
        ds.targets("regression")


#: a folder with real MNIST copies (the checkout's data/mnist, or FEDGDP_MNIST_DIR); the test skips without
SHARED_MNIST = Path(os.environ.get("FEDGDP_MNIST_DIR", ROOT / "data" / "mnist"))


def _trust(monkeypatch, arrays):
    """Make the test-made arrays MNIST's published sums (the loader checks every file)."""
    from fedgdp.common import datasets

    sums = {name + ("" if name.endswith(".gz") else ".gz"): hashlib.md5(datasets._idx_bytes(a)).hexdigest()
            for name, a in arrays.items()}
    monkeypatch.setattr(datasets, "MNIST_RAW_MD5", sums)


def _fixture(folder, n_train=6, n_test=4, gz=True, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for name, arr in arrays.items():
        write_idx(folder / (name + (".gz" if gz else "")), arr)
    return arrays


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_reader_on_a_test_made_idx_fixture(tmp_path, gz, monkeypatch):
    arrays = _fixture(tmp_path, gz=gz)
    _trust(monkeypatch, arrays)
    img = read_idx(tmp_path / ("train-images-idx3-ubyte" + (".gz" if gz else "")))
    assert img.shape == (6, 28, 28) and img.dtype == np.uint8
    assert np.array_equal(img, arrays["train-images-idx3-ubyte"])
    ds = load_dataset("mnist", tmp_path)
    assert ds.name == "mnist" and ds.X.shape == (10, 785) and np.all(ds.X[:, 0] == 1)
    pixels = np.concatenate([arrays["train-images-idx3-ubyte"], arrays["t10k-images-idx3-ubyte"]])
    assert np.allclose(ds.X[:, 1:], pixels.reshape(10, -1) / 255.0)
    assert np.array_equal(ds.labels, np.concatenate([arrays["train-labels-idx1-ubyte"],
                                                     arrays["t10k-labels-idx1-ubyte"]]))


def test_mnist_reader_on_an_npz(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    x_tr, x_te = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8), rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    y_tr, y_te = np.arange(5, dtype=np.uint8), np.arange(3, dtype=np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=x_tr, y_train=y_tr, x_test=x_te, y_test=y_te)
    with pytest.raises(ValueError, match=r"mnist.npz: neither its SHA256 is Keras' published") as err:
        load_mnist(tmp_path)                                 # not MNIST: refused, the file named
    assert "\n" not in str(err.value)
    _trust(monkeypatch, dict(zip(MNIST_FILES, [x_tr, y_tr, x_te, y_te])))
    ds = load_mnist(tmp_path)                                # its arrays match the (patched) published sums
    assert ds.X.shape == (8, 785) and np.array_equal(ds.labels, [0, 1, 2, 3, 4, 0, 1, 2])


def test_mnist_idx_checksum_mismatch_is_one_line_naming_the_file(tmp_path, monkeypatch):
    arrays = _fixture(tmp_path)
    _trust(monkeypatch, arrays)
    damaged = arrays["t10k-labels-idx1-ubyte"].copy()
    damaged[0] ^= 1
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", damaged)
    with pytest.raises(ValueError) as err:
        load_mnist(tmp_path)
    msg = str(err.value)
    assert msg.startswith(str(tmp_path / "t10k-labels-idx1-ubyte.gz")) and "MD5" in msg and "\n" not in msg


@pytest.mark.skipif(not all((SHARED_MNIST / n).is_file() for n in MNIST_FILES), reason="no MNIST copy here")
def test_real_mnist_copies_match_the_published_sums():
    """The shared copies are re-compressed (their .gz MD5s differ from the published
    ones), their content is MNIST's: the loader checks the uncompressed content."""
    ds = load_mnist(SHARED_MNIST)
    assert ds.X.shape == (70000, 785)
    assert np.bincount(ds.labels[:60000]).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


def test_idx_reader_rejects_damaged_files(tmp_path):
    bad = tmp_path / "x.gz"
    with gzip.open(bad, "wb") as fh:
        fh.write(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 9, 1, 2]))
    with pytest.raises(ValueError, match=r"header says \(9,\) but the file holds 2 data bytes"):
        read_idx(short)


def test_offline_error_says_which_files_to_place_where(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("mnist", tmp_path)
    msg = str(err.value)
    assert str(tmp_path) in msg and all(name in msg for name in MNIST_FILES)
    assert "mnist.npz" in msg and "fedgdp fetch-mnist" in msg
    # fetching with no reachable mirror: the same advice (port 9 refuses at once)
    with pytest.raises(FileNotFoundError, match="no network") as err:
        fetch_mnist(tmp_path / "dl", mirrors=("http://127.0.0.1:9/",), timeout=2)
    assert "train-images-idx3-ubyte.gz" in str(err.value) and not list((tmp_path / "dl").iterdir())


def test_cli_offline_error_is_one_line(tmp_path, capsys):
    assert main(["realdata", "--dataset", "mnist", "--path", str(tmp_path), "--split", "0",
                 "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedgdp: error: MNIST not found in")
    assert "t10k-labels-idx1-ubyte.gz" in err and not (tmp_path / "x.parquet").exists()


def test_fetch_verifies_checksums_from_a_local_mirror(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    _trust(monkeypatch, _fixture(mirror))
    files = {name: hashlib.md5((mirror / name).read_bytes()).hexdigest() for name in MNIST_FILES}
    out = fetch_mnist(tmp_path / "data", mirrors=(mirror.as_uri() + "/",), files=files)
    assert [p.name for p in out] == list(MNIST_FILES)
    assert load_mnist(tmp_path / "data").N == 10
    wrong = dict(files, **{"t10k-labels-idx1-ubyte.gz": "0" * 32})
    with pytest.raises(ValueError, match="failed its MD5 check"):
        fetch_mnist(tmp_path / "bad", mirrors=(mirror.as_uri() + "/",), files=wrong)
    assert not (tmp_path / "bad" / "t10k-labels-idx1-ubyte.gz").exists()
