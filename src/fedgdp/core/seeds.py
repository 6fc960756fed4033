"""Seed derivation, the same for every experiment (docs/methods.md §1, Seeds).

Every random generator of the package is derived, never taken from the clock:

    SeedSequence([base_seed, stable_hash(key), *indices])                  data
    SeedSequence([base_seed, stable_hash(key), *indices, stable_hash(M)])  stream M

``key`` is a mapping of the settings that define the data (a simulation cell's model,
sizes, m, ...; a real-data layout plus task; a CNN run's data settings), ``indices``
say which draw (replicate; split and fold; run) and ``M`` names a noise stream (a
method, or the clipping histogram). Runs that differ only in settings outside ``key``
(mu, K, the methods) share their data (common random numbers), and adding a method
never changes another method's numbers.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

__all__ = ["stable_hash", "seed_sequence", "derived_rng", "CLIP_STREAM"]

#: The stream of the private clipping rule's noisy histograms (every experiment)
CLIP_STREAM = "clip_histogram"


def stable_hash(obj) -> int:
    """A 64-bit hash of a JSON-serialisable object, identical across Python runs.

    Parameters
    ----------
    obj : object
        JSON-serialisable (keys sorted; other objects by ``str``).

    Returns
    -------
    int
        The first 8 bytes of its SHA-256, little-endian.
    """
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little")


def seed_sequence(base_seed: int, key, *indices: int, stream: str | None = None) -> np.random.SeedSequence:
    """``SeedSequence([base_seed, stable_hash(key), *indices(, stable_hash(stream))])``.

    Parameters
    ----------
    base_seed : int
        The root seed.
    key : object
        The settings that define the data (JSON-serialisable).
    *indices : int
        Which draw (replicate; split and fold; run).
    stream : str or None
        The noise stream (None: the data).

    Returns
    -------
    numpy.random.SeedSequence
        The seed sequence.
    """
    entropy = [base_seed, stable_hash(key), *indices]
    if stream is not None:
        entropy.append(stable_hash(stream))
    return np.random.SeedSequence(entropy)


def derived_rng(base_seed: int, key, *indices: int, stream: str | None = None) -> np.random.Generator:
    """The generator of `seed_sequence`.

    Parameters
    ----------
    base_seed : int
        The root seed.
    key : object
        The settings that define the data (JSON-serialisable).
    *indices : int
        Which draw.
    stream : str or None
        The noise stream (None: the data).

    Returns
    -------
    numpy.random.Generator
        The generator.
    """
    return np.random.default_rng(seed_sequence(base_seed, key, *indices, stream=stream))
