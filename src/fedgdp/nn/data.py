"""Image data for the CNN experiments: digits (offline default), MNIST, CIFAR-10.

Numpy only (no torch). Images are ``float32`` ``(N, C, H, W)``, normalised with fixed
public constants (no privacy cost); labels ``int64`` ``(N,)``.

Datasets
--------
``digits``
    scikit-learn's bundled 8x8 digits (1,797 images, no network). There is no
    standard split: a fixed permutation (``default_rng(0)``) puts 360 images (20%)
    in the test set and 1,437 in the training set.
``mnist``
    The four original IDX files (``train-images-idx3-ubyte.gz`` ...), gzipped or not,
    or a Keras-style ``mnist.npz``, in ``<data_dir>/mnist/`` (the folder layout and
    reader of `fedgdp.common.datasets`, shared with the real-data study): 60,000
    training and 10,000 test images, 28x28.
``cifar10``
    The python version's pickled batches in
    ``<data_dir>/cifar10/cifar-10-batches-py/`` (``data_batch_1..5``,
    ``test_batch``), or the archive ``cifar-10-python.tar.gz`` in
    ``<data_dir>/cifar10/`` (unpacked on first use): 50,000 + 10,000 images, 3x32x32.

`fetch` downloads and checks MD5s; `load_images` never downloads.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common.datasets import MNIST_FILES, MNIST_MIRRORS, fetch_mnist, read_idx, read_mnist, write_idx

__all__ = ["ImageData", "DataUnavailable", "DATASETS", "load_images", "fetch", "read_idx",
           "write_idx", "MNIST_FILES", "CIFAR10_ARCHIVE"]

DATASETS = ("digits", "mnist", "cifar10")

#: (url, file name, MD5) of the CIFAR-10 python archive.
CIFAR10_ARCHIVE = ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                   "cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a")
CIFAR10_DIR = "cifar-10-batches-py"

_MNIST_MEAN, _MNIST_STD = 0.1307, 0.3081
_CIFAR_MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)
_CIFAR_STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)
_DIGITS_MEAN, _DIGITS_STD = 0.3, 0.4      # pixel / 16; rounded population constants
DIGITS_TEST = 360


class DataUnavailable(ValueError):
    """The dataset's files are missing (and could not be fetched)."""


@dataclass(frozen=True)
class ImageData:
    """A dataset's standard training and test splits.

    Attributes
    ----------
    name : str
    x_train : ndarray of shape (N, C, H, W), float32
    y_train : ndarray of shape (N,), int64
    x_test : ndarray of shape (N_test, C, H, W), float32
    y_test : ndarray of shape (N_test,), int64
    classes : int
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int = 10

    @property
    def shape(self) -> tuple:
        """``(C, H, W)`` of one image."""
        return tuple(self.x_train.shape[1:])


def _find(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / name.removesuffix(".gz")):
        if candidate.exists():
            return candidate
    return None


def _missing_message(name: str, data_dir: Path, missing: list[str]) -> str:
    if name == "mnist":
        where = data_dir / "mnist"
        how = f"from {MNIST_MIRRORS[0]}, MD5s in fedgdp.common.datasets.MNIST_FILES; or an mnist.npz"
    else:
        where = data_dir / "cifar10"
        how = f"from {CIFAR10_ARCHIVE[0]} (MD5 {CIFAR10_ARCHIVE[2]})"
    return (f"{name} files not found: {', '.join(missing)} missing in {where}. Place them there "
            f"({how}), or run `fedgdp nn-fetch --dataset {name} --data-dir {data_dir}` on a machine "
            f"with a network. The offline default dataset is `digits`.")


# ---------------------------------------------------------------------- loaders
def _load_digits() -> ImageData:
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # pragma: no cover - depends on the environment
        raise DataUnavailable("the digits dataset needs scikit-learn (pip install scikit-learn)") from None
    bunch = load_digits()
    x = ((bunch.images.astype(np.float32) / 16.0 - _DIGITS_MEAN) / _DIGITS_STD)[:, None]
    y = bunch.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(y))
    test, train = perm[:DIGITS_TEST], perm[DIGITS_TEST:]
    return ImageData("digits", x[train], y[train], x[test], y[test])


def _load_mnist(data_dir: Path) -> ImageData:
    folder = data_dir / "mnist"
    got = read_mnist(folder)          # checked against MNIST's published sums
    if got is None:
        raise DataUnavailable(_missing_message("mnist", data_dir, [n for n in MNIST_FILES if _find(folder, n) is None]))
    x_tr, y_tr, x_te, y_te = got[0]

    def images(a):
        return ((np.asarray(a, np.float32).reshape(-1, 28, 28) / 255.0 - _MNIST_MEAN) / _MNIST_STD)[:, None]

    return ImageData("mnist", images(x_tr), np.asarray(y_tr, np.int64), images(x_te), np.asarray(y_te, np.int64))


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as fh:
        batch = pickle.load(fh, encoding="bytes")
    x = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    y = np.asarray(batch[b"labels"], dtype=np.int64)
    return x, y


def _load_cifar10(data_dir: Path) -> ImageData:
    folder = data_dir / "cifar10"
    batches = folder / CIFAR10_DIR
    names = [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]
    if not all((batches / n).exists() for n in names) and (folder / CIFAR10_ARCHIVE[1]).exists():
        _extract_cifar(folder / CIFAR10_ARCHIVE[1], folder)
    missing = [n for n in names if not (batches / n).exists()]
    if missing:
        raise DataUnavailable(_missing_message("cifar10", data_dir, [f"{CIFAR10_DIR}/{n}" for n in missing]))
    parts = [_cifar_batch(batches / n) for n in names]

    def images(a):
        return (a.astype(np.float32) / 255.0 - _CIFAR_MEAN[:, None, None]) / _CIFAR_STD[:, None, None]

    x_train = np.concatenate([p[0] for p in parts[:5]])
    y_train = np.concatenate([p[1] for p in parts[:5]])
    return ImageData("cifar10", images(x_train), y_train, images(parts[5][0]), parts[5][1])


def _extract_cifar(archive: Path, folder: Path) -> None:
    with tarfile.open(archive, "r:gz") as tar:
        members = [mb for mb in tar.getmembers()
                   if mb.isfile() and mb.name.startswith(CIFAR10_DIR + "/") and ".." not in mb.name]
        if hasattr(tarfile, "data_filter"):     # Python >= 3.11.4
            tar.extractall(folder, members=members, filter="data")
        else:  # pragma: no cover - members are already restricted to the batches folder
            tar.extractall(folder, members=members)


def load_images(name: str, data_dir: str | os.PathLike = "data") -> ImageData:
    """Load a dataset from local files (never downloads); `DataUnavailable` when they are missing, naming them
    and where to put them.

    Parameters
    ----------
    name : str
        ``digits``, ``mnist`` or ``cifar10`` (`DATASETS`).
    data_dir : str or path
        The folder holding ``mnist/`` and ``cifar10/`` (unused for ``digits``).
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    data_dir = Path(data_dir)
    if name == "digits":
        return _load_digits()
    if name == "mnist":
        return _load_mnist(data_dir)
    return _load_cifar10(data_dir)


# ------------------------------------------------------------------------ fetch
def _md5(path: Path) -> str:
    h = hashlib.md5()  # noqa: S324 - the published checksums are MD5
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download(url: str, dest: Path, md5: str, timeout: float) -> None:
    from ..common.io import atomic_path

    with atomic_path(dest) as tmp:               # renamed into place only when its MD5 matches
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:
            shutil.copyfileobj(resp, out)
        got = _md5(tmp)
        if got != md5:
            raise DataUnavailable(f"checksum mismatch for {url}: MD5 {got}, expected {md5}")


def fetch(name: str, data_dir: str | os.PathLike = "data", *, timeout: float = 30.0) -> Path:
    """Download MNIST or CIFAR-10 into ``data_dir`` and verify the MD5 checksums; the dataset's
    folder (``data_dir`` itself for ``digits``).

    Files already present with the right checksum are kept. `DataUnavailable` (naming the
    files to place where) without a network or on a bad checksum.

    Parameters
    ----------
    name : str
        ``mnist`` or ``cifar10`` (``digits``: nothing to fetch).
    data_dir : str or path
        The data folder; the files go to ``<data_dir>/<name>/``.
    timeout : float
        Seconds per connection attempt.
    """
    data_dir = Path(data_dir)
    if name == "digits":
        return data_dir          # bundled with scikit-learn: nothing to fetch
    if name == "mnist":
        try:
            fetch_mnist(data_dir / "mnist", timeout=timeout)
        except FileNotFoundError as exc:
            raise DataUnavailable(str(exc)) from None
        return data_dir / "mnist"
    if name != "cifar10":
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    folder = data_dir / "cifar10"
    folder.mkdir(parents=True, exist_ok=True)
    url, fname, md5 = CIFAR10_ARCHIVE
    dest = folder / fname
    if not (dest.exists() and _md5(dest) == md5):
        try:
            _download(url, dest, md5, timeout)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DataUnavailable(f"cannot download {url} ({reason}). "
                                  + _missing_message(name, data_dir, [fname])) from None
    _extract_cifar(dest, folder)
    return folder
