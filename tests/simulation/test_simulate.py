"""Client-size schemes, data generation and seed derivation (docs/methods.md §1)."""
import numpy as np
import pytest

from fedgdp.common.datasets import allocate_total
from fedgdp.core.seeds import stable_hash
from fedgdp.simulation.data import parse_size_slug, parse_sizes, replicate_rng, simulate_replicate, size_slug


def _draws(text, m=200, reps=50, seed=0):
    scheme = parse_sizes(text)
    rng = np.random.default_rng(seed)
    return np.stack([scheme.draw(rng, m) for _ in range(reps)])


def test_equal_sizes():
    s = _draws("equal(37)", m=11, reps=3)
    assert s.shape == (3, 11) and np.all(s == 37)


def test_uniform_support_and_mean():
    s = _draws("uniform(10,90)")
    assert s.min() == 10 and s.max() == 90          # inclusive endpoints are reached
    assert set(np.unique(s)) == set(range(10, 91))
    # mean 50, sd of one draw sqrt((81^2-1)/12) ~ 23.4; 10,000 draws -> SE 0.234; 4 SE
    assert abs(s.mean() - 50) < 4 * 23.4 / np.sqrt(s.size)


def test_lognormal_floor_and_median():
    s = _draws("lognormal(5.5,1)")
    assert s.min() >= 10 and s.dtype == np.int64
    # median of round(exp(Z)) is exp(5.5) ~ 244.7; 10,000 draws: the sample median's
    # log has SE ~ 1.25/sqrt(n) = 0.0125, so 5% is > 3 SE
    assert abs(np.log(np.median(s)) - 5.5) < 0.05
    low = _draws("lognormal(0,1)")
    # exp(Z) < 10 unless Z > log(10) = 2.30, which has probability 1.07%
    assert low.min() == 10 and 0.97 < np.mean(low == 10) < 0.999


@pytest.mark.parametrize("inner", ["equal", "uniform(0.5,1.5)", "lognormal(0,1)"])
@pytest.mark.parametrize("m", [20, 125, 200])
def test_total_allocates_exactly(inner, m):
    s = _draws(f"total(20000,{inner})", m=m, reps=20)
    assert np.all(s.sum(axis=1) == 20000)
    assert s.min() >= 10
    if inner == "equal":
        assert s.max() - s.min() <= 1


def test_allocate_total_largest_remainder():
    out = allocate_total(100, np.array([1.0, 1.0, 1.0]), n_floor=0)
    assert sorted(out) == [33, 33, 34] and out.sum() == 100
    out = allocate_total(50, np.array([3.0, 1.0]), n_floor=10)
    assert list(out) == [33, 17]      # 10 each, then 30 split 22.5/7.5 -> 22/7, tie -> first
    with pytest.raises(ValueError, match="total=5"):
        allocate_total(5, np.ones(3), n_floor=10)


@pytest.mark.parametrize("bad", ["unif(1,2)", "uniform(9,3)", "equal(0)", "equal(2.5)", "lognormal(1,-1)",
                                 "total(100,total(50,equal))", "equal()", ""])
def test_bad_schemes_are_named(bad):
    with pytest.raises(ValueError) as err:
        parse_sizes(bad)
    assert repr(bad) in str(err.value)


def test_total_too_small_for_floor():
    with pytest.raises(ValueError, match="n_floor"):
        parse_sizes("total(100,equal)").check(20)


@pytest.mark.parametrize("text", ["equal(400)", "uniform(100,700)", "lognormal(5.5,1)",
                                  "total(20000,lognormal(0,1))", "total(20000,equal)"])
def test_slug_round_trip(text):
    slug = size_slug(text)
    assert "(" not in slug and "," not in slug
    assert parse_size_slug(slug) == text


def test_stable_hash_is_fixed_across_runs():
    # a literal: a change here would silently change every published number
    assert stable_hash({"model": "logistic", "m": 10}) == 15588968231615329002


def test_replicate_data_depend_only_on_replicate():
    key = {"model": "logistic", "m": 4}
    kw = dict(model="logistic", scheme=parse_sizes("uniform(5,9)"), m=4,
              beta_true=np.array([0.5, -0.5, 1.0]), sigma_c=1.0)
    a = simulate_replicate(replicate_rng(7, key, 3), **kw)
    b = simulate_replicate(replicate_rng(7, key, 3), **kw)
    c = simulate_replicate(replicate_rng(7, key, 4), **kw)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.X.shape[0] == a.sizes.sum() and np.all(a.X[:, 0] == 1)
    assert not np.array_equal(a.sizes, c.sizes) or not np.array_equal(a.X, c.X)


def test_halves_split_every_client():
    kw = dict(model="poisson", scheme=parse_sizes("uniform(5,9)"), m=6,
              beta_true=np.array([0.5, 0.3, -0.3]), sigma_c=1.0)
    rep = simulate_replicate(np.random.default_rng(0), **kw)
    h1, h2 = rep.halves()
    np.testing.assert_array_equal(h1.sizes, rep.sizes // 2)
    np.testing.assert_array_equal(h1.sizes + h2.sizes, rep.sizes)
    for i in range(6):
        X, _ = rep.client(i)
        np.testing.assert_array_equal(np.vstack([h1.client(i)[0], h2.client(i)[0]]), X)


def test_responses_follow_the_model():
    """Logistic responses have mean sigmoid(x'beta): 200k draws, 4 SE tolerance."""
    beta = np.array([0.5, -0.5, 1.0, -1.0, 0.5])
    rep = simulate_replicate(np.random.default_rng(5), model="logistic", scheme=parse_sizes("equal(2000)"),
                             m=100, beta_true=beta, sigma_c=1.0)
    p = 1 / (1 + np.exp(-rep.X @ beta))
    se = np.sqrt(np.sum(p * (1 - p))) / p.size
    assert abs(rep.y.mean() - p.mean()) < 4 * se
