"""Seed derivation (fedgdp.core.seeds): every experiment's generators come from one formula,
and that formula is the documented SeedSequence (so moving it changed no draw)."""
import hashlib
import json

import numpy as np

from fedgdp.core.seeds import derived_rng, seed_sequence, stable_hash

KEY = {"model": "logistic", "m": 10}


def _documented_hash(obj) -> int:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little")


def _draws(rng, k=5):
    return rng.standard_normal(k)


def test_seed_sequence_is_the_documented_entropy():
    assert stable_hash(KEY) == _documented_hash(KEY)
    assert seed_sequence(7, KEY, 3).entropy == [7, _documented_hash(KEY), 3]
    assert seed_sequence(7, KEY, 3, 1, stream="fedavg").entropy == [7, _documented_hash(KEY), 3, 1,
                                                                     _documented_hash("fedavg")]
    assert seed_sequence(7, KEY, 3).entropy != seed_sequence(7, KEY, 4).entropy


def test_every_experiment_derives_through_the_one_formula():
    from fedgdp.nn.run import run_seeds
    from fedgdp.realdata.run import noise_rng as realdata_noise
    from fedgdp.simulation.data import noise_rng, replicate_rng

    np.testing.assert_array_equal(_draws(replicate_rng(7, KEY, 3)), _draws(derived_rng(7, KEY, 3)))
    np.testing.assert_array_equal(_draws(noise_rng(7, KEY, 3, "fedsgd")),
                                  _draws(derived_rng(7, KEY, 3, stream="fedsgd")))
    from fedgdp.realdata import resolve

    p = resolve({"base_seed": 7, "task": "binary"})
    np.testing.assert_array_equal(_draws(realdata_noise(p, KEY, 2, 1, "fedavg")),
                                  _draws(derived_rng(7, {**KEY, "task": "binary"}, 2, 1, stream="fedavg")))
    from fedgdp.nn.settings import NNSettings

    q = NNSettings(**dict(NNSettings.defaults(), run=4))
    from fedgdp.nn.run import data_key

    assert run_seeds(q).entropy == [q.base_seed, _documented_hash(data_key(q)), 4]
    assert run_seeds(q, "fedavg").entropy[-1] == _documented_hash("fedavg")
    # different streams of one replicate differ
    assert not np.array_equal(_draws(derived_rng(7, KEY, 3, stream="a")), _draws(derived_rng(7, KEY, 3, stream="b")))
