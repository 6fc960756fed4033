"""Image data sets for the real-data study and their federated client layout (docs/methods.md §5).

- ``digits``: scikit-learn's bundled 8x8 digits (1,797 images), the offline default.
- ``mnist``: the 70,000 MNIST images (train and test pooled), from a folder holding the
  four IDX files (gzip or not) or Keras' ``mnist.npz``, checked against the published
  sums (`read_mnist`); `fetch_mnist` downloads them (docs/real-data.md, "Real data").

Features are the pixels scaled to [0, 1] with an intercept column first: ``d = 65``
(digits) or ``785`` (MNIST). Client layout (paper section 5.1): each of ``m`` clients
gets ``n_min`` shuffled images, the rest shared by Dirichlet(alpha) proportions
(`allocate_total`), each client's images split into ``folds`` folds; split ``s`` draws
from ``SeedSequence([base_seed, stable_hash(layout_key), s])`` (`fedgdp.core.seeds`).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import struct
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.seeds import derived_rng

__all__ = [
    "Dataset", "DATASETS", "load_dataset", "load_digits", "load_mnist", "fetch_mnist", "read_idx",
    "write_idx", "read_mnist", "MNIST_FILES", "MNIST_RAW_MD5", "MNIST_NPZ_SHA256", "MNIST_MIRRORS",
    "ClientLayout", "client_layout", "layout_key",
]

MNIST_FILES = {  # file name -> MD5 of the original gzip file
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
#: file name -> MD5 of its uncompressed IDX content (the published sums of the four files)
MNIST_RAW_MD5 = {
    "train-images-idx3-ubyte.gz": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte.gz": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637",
}
#: SHA256 of Keras' ``mnist.npz`` (tf-keras-datasets), as Keras' ``get_file`` checks it
MNIST_NPZ_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)


@dataclass(frozen=True)
class Dataset:
    """Images as a design matrix.

    Attributes
    ----------
    name : str
    X : ndarray of shape (N, d)
        Intercept column first, then the pixels scaled to [0, 1].
    labels : ndarray of int of shape (N,)
        Digit 0..9.
    """

    name: str
    X: np.ndarray
    labels: np.ndarray

    @property
    def N(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    def targets(self, task: str) -> np.ndarray:
        """Labels (N,) of a task: ``binary`` (1 = odd digit, paper section 5.1) or ``multiclass`` (0..9).

        Parameters
        ----------
        task : {"binary", "multiclass"}
            The task (ValueError otherwise).
        """
        if task == "binary":
            return (self.labels % 2).astype(np.int64)
        if task == "multiclass":
            return self.labels.astype(np.int64)
        raise ValueError(f"unknown task {task!r}; choose 'binary' or 'multiclass'")


def check_finite(X: np.ndarray, source: str) -> None:
    """ValueError naming ``source`` and the first row of X that holds a non-finite value.

    Parameters
    ----------
    X : ndarray of shape (n, ...)
        The data, one row per sample.
    source : str
        Where the data came from (named in the error).
    """
    bad = ~np.isfinite(np.asarray(X, dtype=np.float64).reshape(X.shape[0], -1)).all(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{source}: row {row} holds a value that is not finite (NaN or inf); "
                         f"{int(bad.sum())} such rows")


def _design(pixels: np.ndarray, scale: float, source: str = "data") -> np.ndarray:
    # [1, pixels / scale] written into one array (no float copy of the pixels, no hstack)
    flat = np.asarray(pixels).reshape(pixels.shape[0], -1)
    X = np.empty((flat.shape[0], flat.shape[1] + 1))
    X[:, 0] = 1.0
    np.divide(flat, scale, out=X[:, 1:], dtype=np.float64)
    check_finite(X[:, 1:], source)
    return X


def load_digits() -> Dataset:
    """scikit-learn's bundled 8x8 digits: 1,797 images, d = 65 (no network needed)."""
    try:
        from sklearn.datasets import load_digits as _sk_load
    except ImportError:
        raise ValueError("dataset 'digits' needs scikit-learn: pip install scikit-learn") from None
    raw = _sk_load()
    return Dataset("digits", _design(raw.data, 16.0, "scikit-learn digits"), np.asarray(raw.target, dtype=np.int64))


# ---------------------------------------------------------------------- IDX
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | os.PathLike, md5: str | None = None) -> np.ndarray:
    """Read an IDX file (LeCun's MNIST format), gzip-compressed or not, in its header's shape and dtype (uint8
    (n, 28, 28) for images, (n,) for labels); ValueError for a bad magic number, a body that does not match the
    header, or a wrong MD5.

    Parameters
    ----------
    path : str or path-like
        The file; gzip when its suffix is ``.gz``.
    md5 : str, optional
        The MD5 its uncompressed content must have (`MNIST_RAW_MD5`); None: unchecked.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        blob = fh.read()
    if md5 is not None and hashlib.md5(blob).hexdigest() != md5:
        raise ValueError(f"{path}: the MD5 of its content, {hashlib.md5(blob).hexdigest()}, is not MNIST's "
                         f"published {md5}: a damaged or different file (delete it and run fedgdp fetch-mnist)")
    if len(blob) < 4 or blob[0] != 0 or blob[1] != 0 or blob[2] not in _IDX_TYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic number {blob[:4].hex()})")
    ndim = blob[3]
    dims = struct.unpack(f">{ndim}I", blob[4:4 + 4 * ndim])
    dtype = np.dtype(_IDX_TYPES[blob[2]])
    count = int(np.prod(dims)) if ndim else 1
    body = blob[4 + 4 * ndim:]
    if len(body) != count * dtype.itemsize:
        raise ValueError(f"{path}: header says {dims} but the file holds {len(body)} data bytes")
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write a uint8 array (ValueError otherwise) as an IDX file (gzip for .gz); for tests.

    Parameters
    ----------
    path : str or path-like
        The file to write.
    array : ndarray of uint8
        Any shape.
    """
    array = np.asarray(array)
    if array.dtype != np.uint8:
        raise ValueError(f"write_idx writes uint8 arrays, got dtype={array.dtype}")
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as fh:
        fh.write(_idx_bytes(array))


def _idx_bytes(array: np.ndarray) -> bytes:
    """A uint8 array as the bytes of an IDX file."""
    head = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return head + np.ascontiguousarray(array).tobytes()


def _find(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / name.removesuffix(".gz")):
        if candidate.is_file():
            return candidate
    return None


def _missing_message(folder: Path, reason: str = "") -> str:
    names = ", ".join(MNIST_FILES)
    why = f" ({reason})" if reason else ""
    return (f"MNIST not found in {folder}{why}: place the four IDX files {names} "
            f"(or an mnist.npz with x_train, y_train, x_test, y_test) in {folder}, "
            f"or run 'fedgdp fetch-mnist --dir {folder}' on a machine with network access")


def load_mnist(folder: str | os.PathLike) -> Dataset:
    """MNIST's 70,000 images (train then test) from ``folder``: X (70000, 785) (FileNotFoundError, saying which
    files to place where, when neither kind is there).

    Parameters
    ----------
    folder : str or path-like
        Holds the four IDX files (gzip or not; preferred) or ``mnist.npz``.
    """
    folder = Path(folder)
    got = read_mnist(folder)
    if got is None:
        lacking = [name for name in MNIST_FILES if _find(folder, name) is None]
        raise FileNotFoundError(_missing_message(folder, f"missing {', '.join(lacking)}"))
    (x_tr, y_tr, x_te, y_te), source = got
    images = np.concatenate([x_tr, x_te])
    labels = np.concatenate([y_tr, y_te]).astype(np.int64)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"MNIST in {folder}: {images.shape[0]} images but {labels.shape[0]} labels")
    return Dataset("mnist", _design(images, 255.0, source), labels)


def read_mnist(folder: str | os.PathLike) -> tuple[list[np.ndarray], str] | None:
    """MNIST's arrays ``[x_train, y_train, x_test, y_test]`` from ``folder`` and a description of the files and
    the check that passed, or None when neither the IDX files nor ``mnist.npz`` are there. Checked against the
    published sums: each IDX file's uncompressed content against `MNIST_RAW_MD5`, an ``mnist.npz`` against
    `MNIST_NPZ_SHA256` or, failing that, its arrays written as IDX files (ValueError naming a file whose
    checksum is not MNIST's).

    Parameters
    ----------
    folder : str or path-like
        The folder.
    """
    folder = Path(folder)
    found = {name: _find(folder, name) for name in MNIST_FILES}
    if all(found.values()):
        arrays = [read_idx(found[name], md5=MNIST_RAW_MD5[name]) for name in MNIST_FILES]  # type: ignore[arg-type]
        return arrays, (f"{found['train-images-idx3-ubyte.gz']} / {found['t10k-images-idx3-ubyte.gz']} (rows: "
                        f"train, then test; MD5 of every IDX file verified)")
    npz = folder / "mnist.npz"
    if not npz.is_file():
        return None
    digest = hashlib.sha256()
    with npz.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    with np.load(npz) as z:
        arrays = [z[k] for k in ("x_train", "y_train", "x_test", "y_test")]
    if digest.hexdigest() == MNIST_NPZ_SHA256:
        how = "Keras' published SHA256 verified"
    elif all(a.dtype == np.uint8 and hashlib.md5(_idx_bytes(a)).hexdigest() == MNIST_RAW_MD5[name]
             for a, name in zip(arrays, MNIST_FILES)):
        how = "its arrays match the published MD5s of the IDX files"
    else:
        raise ValueError(f"{npz}: neither its SHA256 is Keras' published mnist.npz nor do its arrays match the "
                         f"published MD5s of MNIST's IDX files: a damaged or different file")
    return arrays, f"{npz} (rows: x_train, then x_test; {how})"


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_mnist(folder: str | os.PathLike, *, mirrors=MNIST_MIRRORS, timeout: float = 30.0,
                files: dict | None = None) -> list[Path]:
    """Download the four MNIST IDX files into ``folder`` and verify their MD5 sums; files already there with the
    right sum are kept, each download is renamed once it matches. FileNotFoundError when no mirror is reachable
    (saying which files to place where), ValueError for a wrong checksum.

    Parameters
    ----------
    folder : str or path-like
        Where to write the files (made when absent).
    mirrors, timeout
        Base URLs tried in order for each file (default `MNIST_MIRRORS`), and seconds per
        connection attempt (default 30).
    files : dict or None, default=None
        File name -> MD5; None: `MNIST_FILES`.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = MNIST_FILES if files is None else files
    out = []
    for name, md5 in files.items():
        target = folder / name
        if target.is_file() and _md5(target) == md5:
            out.append(target)
            continue
        errors = []
        for base in mirrors:
            tmp = folder / f".{name}.{os.getpid()}.part"
            try:
                with urllib.request.urlopen(base + name, timeout=timeout) as resp, tmp.open("wb") as fh:
                    shutil.copyfileobj(resp, fh)
                got = _md5(tmp)
                if got != md5:
                    errors.append(f"{base}: checksum {got} != {md5}")
                    continue
                os.replace(tmp, target)
                break
            except OSError as exc:          # URLError, timeouts and refused connections
                errors.append(f"{base}: {getattr(exc, 'reason', exc)}")
            finally:
                if tmp.exists():
                    tmp.unlink()
        else:
            if any("checksum" in e for e in errors):
                raise ValueError(f"download of {name} failed its MD5 check: {'; '.join(errors)}")
            raise FileNotFoundError(_missing_message(folder, f"no network: {'; '.join(errors)}"))
        out.append(target)
    return out


DATASETS = ("digits", "mnist")


def load_dataset(name: str, path: str | os.PathLike | None = None) -> Dataset:
    """``digits`` (bundled) or ``mnist`` (from ``path``, `load_mnist`); ValueError for an unknown name, or
    ``mnist`` without a path.

    Parameters
    ----------
    name : {"digits", "mnist"}
        The data set.
    path : str, path-like or None, default=None
        MNIST's folder (needed for ``mnist``).
    """
    if name == "digits":
        return load_digits()
    if name == "mnist":
        if path is None:
            raise ValueError("dataset 'mnist' needs a path (the folder with the IDX files or mnist.npz)")
        return load_mnist(path)
    raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")


# ----------------------------------------------------------------- layout
@dataclass(frozen=True)
class ClientLayout:
    """One client split of a data set.

    Attributes
    ----------
    order : ndarray of int of shape (N,)
        Image indices grouped by client; within a client, in the client's random
        permutation (so any contiguous part of it is a random subset).
    sizes : ndarray of int of shape (m,)
        Images per client; client i owns ``order[offsets[i]:offsets[i + 1]]``.
    fold : ndarray of int of shape (N,)
        Fold of each image (indexed by image, like the data set's rows).
    folds : int
    """

    order: np.ndarray
    sizes: np.ndarray
    fold: np.ndarray
    folds: int

    @property
    def m(self) -> int:
        """Number of clients."""
        return int(self.sizes.shape[0])

    @property
    def offsets(self) -> np.ndarray:
        """Start of each client's images in ``order``, then N: shape (m + 1,)."""
        return np.concatenate([[0], np.cumsum(self.sizes)])

    @property
    def client(self) -> np.ndarray:
        """Client of each image, shape (N,)."""
        out = np.empty(self.order.shape[0], dtype=np.int64)
        out[self.order] = np.repeat(np.arange(self.m), self.sizes)
        return out

    def members(self, i: int) -> np.ndarray:
        """Indices of client i's images (sizes[i],), in the client's permutation order.

        Parameters
        ----------
        i : int
            The client, 0 <= i < m.
        """
        off = self.offsets
        return self.order[off[i]:off[i + 1]]

    def train_test(self, i: int, f: int) -> tuple[np.ndarray, np.ndarray]:
        """Client i's training indices (folds other than f) and test indices (fold f), in the
        client's permutation order.

        Parameters
        ----------
        i : int
            The client, 0 <= i < m.
        f : int
            The test fold, 0 <= f < folds.
        """
        idx = self.members(i)
        in_test = self.fold[idx] == f
        return idx[~in_test], idx[in_test]


def allocate_total(total: int, weights: np.ndarray, n_floor: int) -> np.ndarray:
    """Split ``total`` samples over m clients, sizes (m,): ``n_floor`` each, the rest in proportion to
    ``weights`` by largest-remainder rounding, so the sizes sum to ``total`` exactly.

    Parameters
    ----------
    total : int
        Samples to share (ValueError when below ``m * n_floor``).
    weights : ndarray of shape (m,)
        Non-negative proportions (normalised here; not all zero).
    n_floor : int
        Samples every client gets first.
    """
    m = weights.shape[0]
    rest = total - m * n_floor
    if rest < 0:
        raise ValueError(f"total={total} cannot give {m} clients n_floor={n_floor} each")
    share = rest * weights / weights.sum()
    base = np.floor(share).astype(np.int64)
    short = rest - int(base.sum())
    order = np.argsort(-(share - base), kind="stable")
    base[order[:short]] += 1
    return base + n_floor


def layout_key(dataset: str, N: int, m: int, n_min: int, alpha: float, folds: int) -> dict:
    """The parameters that define a layout (and so its seeds), as a dict of these names.

    Parameters
    ----------
    dataset : str
        The data set's name.
    N : int
        Images in the data set.
    m : int
        Number of clients.
    n_min : int
        Images every client gets first.
    alpha : float
        Dirichlet concentration of the remaining shares.
    folds : int
        Cross-validation folds within each client.
    """
    return {"dataset": dataset, "N": int(N), "m": int(m), "n_min": int(n_min),
            "alpha": float(alpha), "folds": int(folds)}


def client_layout(rng: np.random.Generator, N: int, *, m: int, n_min: int, alpha: float = 1.0,
                  folds: int = 5) -> ClientLayout:
    """Random client split of N images (the module's layout); ValueError when ``m * n_min > N`` or a client
    would have fewer images than folds.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the permutation, the Dirichlet shares and each client's permutation.
    N, m, n_min, alpha, folds
        As in `layout_key` (m >= 1, n_min >= 0, alpha > 0 (default 1), folds >= 2 (default 5)).
    """
    if m < 1 or n_min < 0 or folds < 2:
        raise ValueError(f"need m >= 1, n_min >= 0, folds >= 2; got m={m}, n_min={n_min}, folds={folds}")
    if m * n_min > N:
        raise ValueError(f"m * n_min = {m} * {n_min} = {m * n_min} exceeds the {N} images")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got alpha={alpha}")
    perm = rng.permutation(N)
    sizes = allocate_total(N, rng.dirichlet(np.full(m, float(alpha))), n_min)
    if sizes.min() < folds:
        raise ValueError(f"a client got {sizes.min()} images, fewer than folds={folds}; raise n_min")
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    order = np.empty(N, dtype=np.int64)
    fold = np.empty(N, dtype=np.int64)
    for i in range(m):
        members = perm[offsets[i]:offsets[i + 1]][rng.permutation(sizes[i])]
        order[offsets[i]:offsets[i + 1]] = members
        fold[members] = np.arange(sizes[i]) * folds // sizes[i]
    return ClientLayout(order, sizes, fold, folds)


def split_layout(base_seed: int, key: dict, split: int) -> ClientLayout:
    """The `ClientLayout` of split ``split``, drawn from its own generator.

    Parameters
    ----------
    base_seed : int
        The run's base seed.
    key : dict
        The layout's parameters (`layout_key`).
    split : int
        The split index.
    """
    return client_layout(derived_rng(base_seed, key, split), key["N"], m=key["m"],
                         n_min=key["n_min"], alpha=key["alpha"], folds=key["folds"])


__all__ += ["split_layout", "allocate_total", "check_finite"]
