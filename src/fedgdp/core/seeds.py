"""Seed derivation, the same for every experiment (docs/ARCHITECTURE.md, "Randomness").

    SeedSequence([base_seed, stable_hash(key), *indices])                  data
    SeedSequence([base_seed, stable_hash(key), *indices, stable_hash(M)])  stream M

``key``: the settings that define the data; ``indices``: which draw (replicate; split
and fold; run); ``M``: a noise stream (a method, or the clipping histogram).
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

__all__ = ["stable_hash", "seed_sequence", "derived_rng", "CLIP_STREAM"]

#: The stream of the private clipping rule's noisy histograms (every experiment)
CLIP_STREAM = "clip_histogram"


def stable_hash(obj) -> int:
    """A 64-bit hash of a JSON-serialisable object, identical across Python runs: the first 8
    bytes, little-endian, of the SHA-256 of its JSON (keys sorted; other objects by ``str``).

    Parameters
    ----------
    obj : object
        JSON-serialisable.
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
        The settings that define the data.
    *indices : int
        Which draw.
    stream : str or None
        The noise stream (None: the data).
    """
    return np.random.default_rng(seed_sequence(base_seed, key, *indices, stream=stream))
