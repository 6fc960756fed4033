"""Simulated federated GLM data: client sizes, designs, responses, seeds (docs/methods.md §1).

One replicate holds ``X`` (N, d) (intercept first), ``y`` (N,) and ``sizes`` (m,),
redrawn in every replicate; client ``i`` owns rows ``offsets[i]:offsets[i+1]``.
Replicate ``r`` draws its data from ``SeedSequence([base_seed, stable_hash(data_key), r])``
and method ``M``'s noise with ``stable_hash(M)`` appended, so cells differing only in
mu or K share their data (docs/ARCHITECTURE.md, "Randomness").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..common.datasets import allocate_total
from ..core.glm import get_model
from ..core.normals import standard_normal
from ..core.seeds import derived_rng

__all__ = [
    "SizeScheme", "parse_sizes", "replicate_rng", "noise_rng",
    "Replicate", "simulate_replicate", "size_slug", "parse_size_slug",
]


def replicate_rng(base_seed: int, data_key: dict, replicate: int) -> np.random.Generator:
    """The data generator of one replicate (`fedgdp.core.seeds.derived_rng`).

    Parameters
    ----------
    base_seed, data_key, replicate
        The study's base seed, the parameters that define the data, the replicate's index r.
    """
    return derived_rng(base_seed, data_key, replicate)


def noise_rng(base_seed: int, data_key: dict, replicate: int, method: str) -> np.random.Generator:
    """The privacy-noise generator of one method in one replicate (stream ``method``).

    Parameters
    ----------
    base_seed, data_key, replicate
        As in `replicate_rng`.
    method : str
        The method's noise stream (its ``noise_stream``).
    """
    return derived_rng(base_seed, data_key, replicate, stream=method)


# --------------------------------------------------------------------------- sizes
_NUM = r"\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*"
_PATTERNS = {
    "equal": re.compile(rf"^equal\({_NUM}\)$"),
    "uniform": re.compile(rf"^uniform\({_NUM},{_NUM}\)$"),
    "lognormal": re.compile(rf"^lognormal\({_NUM},{_NUM}\)$"),
    "total": re.compile(r"^total\(\s*(\d+)\s*,\s*(.+)\)$"),
}


@dataclass(frozen=True)
class SizeScheme:
    """A rule that draws the m client sample sizes of one replicate.

    Parameters
    ----------
    kind : {"equal", "uniform", "lognormal", "total"}
    args : tuple of float
        ``equal(n)``, ``uniform(a, b)`` (discrete, inclusive), ``lognormal(mu_log,
        sd_log)`` (``max(n_floor, round(exp(Z)))``); for ``total`` the first entry is
        N and ``inner`` is the scheme whose draws are used as allocation weights
        (``equal`` -> equal weights, ``uniform(a, b)`` -> continuous uniform weights,
        ``lognormal(mu, sd)`` -> ``exp(Z)`` weights).
    n_floor : int
        Smallest allowed client size for ``lognormal`` and ``total``.
    """

    kind: str
    args: tuple
    n_floor: int = 10
    inner: SizeScheme | None = None
    text: str = ""

    def draw(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """Client sizes, int64 of shape (m,).

        Parameters
        ----------
        rng, m
            The replicate's data generator and the number of clients.
        """
        if self.kind == "equal":
            return np.full(m, int(self.args[0]), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.args[0]), int(self.args[1]), endpoint=True, size=m)
        if self.kind == "lognormal":
            z = rng.normal(self.args[0], self.args[1], size=m)
            return np.maximum(self.n_floor, np.round(np.exp(z))).astype(np.int64)
        return allocate_total(int(self.args[0]), self.inner.weights(rng, m), self.n_floor)  # type: ignore[union-attr]

    def weights(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """Positive allocation weights (m,) of a scheme inside ``total(N, scheme)`` (ValueError for ``total``).

        Parameters
        ----------
        rng, m
            As in `draw`.
        """
        if self.kind == "equal":
            return np.ones(m)
        if self.kind == "uniform":
            return rng.uniform(self.args[0], self.args[1], size=m)
        if self.kind == "lognormal":
            return np.exp(rng.normal(self.args[0], self.args[1], size=m))
        raise ValueError(f"total() cannot nest {self.text!r}")

    def mean_size(self, m: int) -> float:
        """Expected client size (for planning work, not for statistics).

        Parameters
        ----------
        m : int
            Clients (``total``: N / m).
        """
        if self.kind == "equal":
            return float(self.args[0])
        if self.kind == "uniform":
            return (self.args[0] + self.args[1]) / 2
        if self.kind == "lognormal":
            return max(self.n_floor, float(np.exp(self.args[0] + self.args[1] ** 2 / 2)))
        return self.args[0] / m

    def min_size(self) -> int:
        """The smallest client size the scheme can draw (``total``: its ``n_floor``)."""
        if self.kind == "equal":
            return int(self.args[0])
        if self.kind == "uniform":
            return int(np.ceil(self.args[0]))
        return int(self.n_floor)

    def check(self, m: int) -> None:
        """Raise ValueError when the scheme cannot produce m clients.

        Parameters
        ----------
        m : int
            Clients.
        """
        if self.kind == "total" and self.args[0] < m * self.n_floor:
            raise ValueError(f"sizes {self.text!r}: N={self.args[0]} < m*n_floor={m * self.n_floor}")


def parse_sizes(text: str, n_floor: int = 10) -> SizeScheme:
    """Parse a sizes scheme such as ``equal(400)`` or ``total(20000, lognormal(0,1))``; ValueError naming the
    bad string (unknown scheme, malformed arguments, non-positive sizes, a uniform range with a > b).

    Parameters
    ----------
    text : str
        The scheme (spaces ignored).
    n_floor : int
        Smallest client size of ``lognormal`` and ``total``.
    """
    s = str(text).strip().replace(" ", "")
    for kind, pat in _PATTERNS.items():
        hit = pat.match(s)
        if not hit:
            continue
        if kind == "total":
            text_in = hit.group(2)
            inner = SizeScheme("equal", (1.0,), n_floor, None, "equal") if text_in == "equal" \
                else parse_sizes(text_in, n_floor)
            if inner.kind == "total":
                raise ValueError(f"bad sizes {text!r}: total() cannot be nested")
            return SizeScheme("total", (int(hit.group(1)),), n_floor, inner, s)
        args = tuple(float(g) for g in hit.groups())
        if kind == "equal" and (args[0] < 1 or args[0] != int(args[0])):
            raise ValueError(f"bad sizes {text!r}: n must be a positive integer")
        if kind == "uniform":
            if args[0] > args[1]:
                raise ValueError(f"bad sizes {text!r}: uniform range needs a <= b, got a={args[0]:g} > b={args[1]:g}")
            if args[0] < 0:
                raise ValueError(f"bad sizes {text!r}: uniform range must be non-negative")
        if kind == "lognormal" and args[1] < 0:
            raise ValueError(f"bad sizes {text!r}: sd_log must be >= 0")
        return SizeScheme(kind, args, n_floor, None, s)
    raise ValueError(
        f"unknown size scheme {text!r}; use equal(n), uniform(a,b), lognormal(mu_log,sd_log) or total(N,scheme)"
    )


def size_slug(text: str) -> str:
    """A path-safe label for a sizes scheme: ``uniform(100,700)`` -> ``uniform-100-700``.

    Parameters
    ----------
    text : str
        The sizes scheme.
    """
    s = str(text).replace(" ", "")
    return re.sub(r"[(),]+", "-", s).strip("-")


def parse_size_slug(slug: str) -> str:
    """Inverse of `size_slug` for the schemes it produces.

    Parameters
    ----------
    slug : str
        A slug from `size_slug`.
    """
    parts = slug.split("-")
    if parts[0] == "total":
        return f"total({parts[1]},{parse_size_slug('-'.join(parts[2:]))})"
    if len(parts) == 1:
        return parts[0]
    return f"{parts[0]}({','.join(parts[1:])})"


# ------------------------------------------------------------------------- data
@dataclass
class Replicate:
    """One replicate of federated data.

    Attributes
    ----------
    X : ndarray of shape (N, d)
    y : ndarray of shape (N,)
    sizes : ndarray of int of shape (m,)
    """

    X: np.ndarray
    y: np.ndarray
    sizes: np.ndarray

    @cached_property
    def offsets(self) -> np.ndarray:
        """Row offsets of the clients, shape ``(m + 1,)``."""
        return np.concatenate([[0], np.cumsum(self.sizes)])

    def client(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows of client i: views ``X_i`` (n_i, d) and ``y_i`` (n_i,).

        Parameters
        ----------
        i : int
            The client.
        """
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.X[a:b], self.y[a:b]

    def halves(self) -> tuple[Replicate, Replicate]:
        """Every client split into half 1 (first floor(n_i/2) rows) and half 2: rows are i.i.d. (Algorithm 4)."""
        h1 = self.sizes // 2
        # row j of client i is in half 1 when its index within the client is below h1[i]
        within = np.arange(self.X.shape[0]) - np.repeat(self.offsets[:-1], self.sizes)
        mask = within < np.repeat(h1, self.sizes)
        return (Replicate(self.X[mask], self.y[mask], h1),
                Replicate(self.X[~mask], self.y[~mask], self.sizes - h1))


def simulate_replicate(rng: np.random.Generator, *, model: str, scheme: SizeScheme, m: int,
                       beta_true: np.ndarray, sigma_c: float) -> Replicate:
    """Draw one `Replicate`: sizes, then ``C ~ N(0, sigma_c^2)``, then ``y`` (docs/methods.md §1).

    Parameters
    ----------
    rng : numpy.random.Generator
        The replicate's own generator (`replicate_rng`).
    model, scheme, m
        ``logistic`` or ``poisson``, the client sizes' `SizeScheme` and the number of clients.
    beta_true : ndarray of shape (p,)
        True coefficients, intercept first.
    sigma_c : float
        The covariates' standard deviation.
    """
    glm = get_model(model)
    sizes = scheme.draw(rng, m)
    n_total = int(sizes.sum())
    p = beta_true.shape[0]
    X = np.empty((n_total, p))
    X[:, 0] = 1.0
    X[:, 1:] = sigma_c * standard_normal(rng, (n_total, p - 1))
    y = glm.sample(rng, X @ beta_true)
    return Replicate(X, y, sizes)
