"""fedgdp.core.normals: the compiled normal draws are numpy's own numbers (exactly, not within a
tolerance: the simulations' and real-data fits' outputs must not change), and leave the
generator where numpy's draw would."""
import numpy as np
import pytest

from fedgdp.core.normals import COMPILED_FROM, standard_normal
from fedgdp.core.seeds import derived_rng

# numpy's ziggurat: a draw lands in the tail (|x| > R, the idx == 0 branch that draws
# through log1p) about once in 3,600 draws, and in a wedge (the exp test) about once in
# 100; 2 million draws take each branch hundreds of times.
R = 3.6541528853610088
N = 2_000_000


def test_many_draws_are_numpys_draws_and_state():
    mine, ref = np.random.default_rng(11), np.random.default_rng(11)
    got = standard_normal(mine, N)
    want = ref.standard_normal(N)
    assert np.array_equal(got, want)
    assert mine.bit_generator.state == ref.bit_generator.state
    assert np.sum(np.abs(want) > R) > 100          # the tail branch was taken (and matched)
    # and the draws after it still agree: the stream was advanced identically
    assert np.array_equal(standard_normal(mine, (300, 7)), ref.standard_normal((300, 7)))


@pytest.mark.parametrize("shape", [0, 1, (3,), (2, 5), COMPILED_FROM - 1, COMPILED_FROM, (50, 20, 5),
                                   (4, 11, 30, 5), (0, 7)])
def test_every_shape_matches_numpy(shape):
    mine, ref = derived_rng(2026, {"k": 1}, 3, stream="fedsgd"), derived_rng(2026, {"k": 1}, 3, stream="fedsgd")
    got, want = standard_normal(mine, shape), ref.standard_normal(shape)
    assert got.shape == want.shape and got.dtype == np.float64
    assert np.array_equal(got, want)
    assert mine.bit_generator.state == ref.bit_generator.state


def test_interleaved_with_other_draws_of_the_same_generator():
    """The simulations draw sizes, then normals, then responses from one generator."""
    mine, ref = np.random.default_rng(5), np.random.default_rng(5)
    for k in (10, 20_000, 3, 50_000):
        assert np.array_equal(mine.integers(0, 100, k), ref.integers(0, 100, k))
        assert np.array_equal(standard_normal(mine, (k, 4)), ref.standard_normal((k, 4)))
        assert np.array_equal(mine.random(k), ref.random(k))


def test_falls_back_to_numpy_where_the_compiled_draws_differ(monkeypatch):
    """The first-use check: a compiled loop that does not reproduce numpy is dropped (with a
    warning) and numpy draws, so no number changes."""
    import fedgdp.core.normals as normals

    monkeypatch.setattr(normals, "_FILL", [])
    import fedgdp.core.compiled as compiled

    real = compiled.njit

    def broken(fastmath, inline="never"):
        def wrap(func):
            def fill(rng, out):
                out[:] = rng.standard_normal(out.shape[0]) + 1e-12      # off by a little
            return fill
        return wrap

    monkeypatch.setattr(compiled, "njit", broken)
    with pytest.warns(RuntimeWarning, match="differs from numpy"):
        got = normals.standard_normal(np.random.default_rng(3), 50_000)
    assert normals._FILL == [None]
    assert np.array_equal(got, np.random.default_rng(3).standard_normal(50_000))
    monkeypatch.setattr(compiled, "njit", real)
