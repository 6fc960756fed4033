"""The cell parameter ``release``: private, clip_only (same bound, no noise) and plain
(neither), paired on the same replicate data (docs/methods.md §9)."""
import numpy as np
import pytest

from conftest import make_block
from fedgdp.core import privacy
from fedgdp.core.glm import get_model
from fedgdp.simulation.backend import REGISTRY, FitData
from fedgdp.simulation.params import resolve
from fedgdp.simulation.run import clip_bounds, draw_noises, run_cell
from oracle import ORACLE

METHODS = list(REGISTRY)
SEEDS = [0, 1, 2]


def rows_of(**over):
    return run_cell(resolve(dict(dict(m=5, sizes="uniform(12,40)", K=7, methods=METHODS), **over)), SEEDS)


def _key(r):
    return r["replicate"], r["method"]


def assert_same_fits(a, b):
    """Same replicates, methods, data and estimates, bit for bit."""
    assert [_key(r) for r in a] == [_key(r) for r in b]
    for x, y in zip(a, b):
        assert x["N"] == y["N"] and x["n_min"] == y["n_min"]
        np.testing.assert_array_equal(x["theta_hat"], y["theta_hat"])
        assert x["sq_error"] == y["sq_error"]


# ------------------------------------------------------------ against the oracle
ORACLE_CASES = [
    dict(model="logistic", release="clip_only"),
    dict(model="poisson", release="clip_only",      # every step size 0.1, whatever the method calls it
         method_settings={m: {k: 0.1 for k in ("eta", "eta1", "eta2") if k in REGISTRY[m].setting_names()}
                          for m in METHODS}),
    dict(model="logistic", release="clip_only", weights="optimal", clip={"rule": "private_quantile", "q": 0.9}),
    dict(model="logistic", release="plain"),
]


@pytest.mark.parametrize("case", range(len(ORACLE_CASES)))
def test_fast_equals_the_oracle_for_every_release(case):
    """The loop oracle expresses clip_only as the private fit with no noise arrays (the
    bound B of the private run) and plain as mu = inf; the fast path matches it (1e-10)."""
    p = resolve(dict(dict(m=5, sizes="uniform(12,40)", K=7, methods=METHODS), **ORACLE_CASES[case]))
    fast, ref = run_cell(p, SEEDS), run_cell(p, SEEDS, **ORACLE)
    assert [_key(r) for r in fast] == [_key(r) for r in ref]
    for a, b in zip(fast, ref):
        assert np.all(np.isfinite(a["theta_hat"]))
        np.testing.assert_allclose(a["theta_hat"], b["theta_hat"], rtol=0, atol=1e-10)
        assert a["B"] == pytest.approx(b["B"], rel=1e-12)


# ------------------------------------------------------------------- pairing
@pytest.mark.parametrize("model", ["logistic", "poisson"])
def test_plain_equals_the_nonprivate_rows_exactly(model):
    plain, nonpriv = rows_of(model=model, mu=2, release="plain"), rows_of(model=model, mu="inf")
    assert_same_fits(plain, nonpriv)
    assert all(r["mu"] == 2 and np.isinf(r["B"]) and np.isinf(r["mu_composed"]) for r in plain)


def test_clip_only_with_an_infinite_bound_equals_plain():
    """A fixed bound B = inf clips nothing: clip_only then gives the plain fit bit for bit
    (the clipping kernel's path with bounds, not the unclipped one)."""
    clip_inf = rows_of(release="clip_only", clip={"rule": "fixed", "value": float("inf")})
    assert all(np.isinf(r["B"]) for r in clip_inf)
    assert_same_fits(clip_inf, rows_of(release="plain"))


@pytest.mark.parametrize("clip", [{"rule": "quantile", "q": 0.9}, {"rule": "private_quantile", "q": 0.9}])
def test_clip_only_is_the_private_fit_without_its_noise(clip):
    """Same data and the same bound B as the private rows (the private_quantile rule's
    histogram noise comes from its own stream), no noise, composed mu inf. At mu = 1e12 the
    private noise is ~1e-12 of the clipped gradient, so the two fits agree to 1e-8; at
    mu = 2 they differ (the noise is there)."""
    priv, clip_only = rows_of(mu=2, clip=clip), rows_of(mu=2, clip=clip, release="clip_only")
    for a, b in zip(priv, clip_only):
        assert _key(a) == _key(b) and a["N"] == b["N"] and a["B"] == b["B"] and np.isfinite(a["B"])
        assert np.isfinite(a["mu_composed"]) and np.isinf(b["mu_composed"]) and np.isinf(b["mu_certified"])
    assert max(abs(a["sq_error"] - b["sq_error"]) for a, b in zip(priv, clip_only)) > 1e-3
    if clip["rule"] == "quantile":   # the bound does not depend on mu
        tiny = rows_of(mu=1e12, clip=clip)
        for a, b in zip(tiny, clip_only):
            np.testing.assert_allclose(a["theta_hat"], b["theta_hat"], rtol=0, atol=1e-8)


def test_clip_only_differs_from_plain_by_clipping():
    a, b = rows_of(release="clip_only"), rows_of(release="plain")
    assert all(x["N"] == y["N"] for x, y in zip(a, b))
    assert max(abs(x["sq_error"] - y["sq_error"]) for x, y in zip(a, b)) > 1e-3


@pytest.mark.parametrize("release, mu, clipped, noisy", [
    ("private", 2.0, True, True), ("clip_only", 2.0, True, False), ("plain", 2.0, False, False),
    ("private", np.inf, False, False), ("clip_only", np.inf, False, False), ("plain", np.inf, False, False)])
def test_one_rule_decides_clipping_and_noise(release, mu, clipped, noisy):
    """The table of docs/methods.md §9, asked of privacy and of the fit data that use it."""
    assert privacy.clips(mu, release) is clipped and privacy.adds_noise(mu, release) is noisy
    p, reps, fd = make_block(dict(mu=mu, release=release, m=4, sizes="equal(20)"), [0])
    assert fd.clipped is clipped and fd.private is noisy
    assert bool(np.isfinite(clip_bounds(p, fd.glm, reps, [0])).all()) is clipped
    assert all((z is not None) is noisy for z in draw_noises(p, "fedsgd", [0], 5)[0].values())


def test_private_is_the_default_release():
    assert resolve({}).release == "private"
    assert_same_fits(rows_of(), rows_of(release="private"))


def test_bad_release_is_named():
    with pytest.raises(ValueError, match="unknown release 'clipped'; choose from private, clip_only, plain"):
        resolve({"release": "clipped"})
    with pytest.raises(ValueError, match="release=.noisy"):
        FitData([], get_model("logistic"), np.zeros(0), 2.0, 1.0, release="noisy")


def test_simulate_command_takes_the_release(tmp_path):
    import json

    import pyarrow.parquet as pq

    from fedgdp.commands.cli import main

    out = tmp_path / "cell.parquet"
    assert main(["simulate", "--m", "4", "--sizes", "equal(20)", "--K", "3", "--methods", "fedsgd",
                 "--seeds", "0-1", "--release", "clip_only", "--out", str(out)]) == 0
    t = pq.read_table(out)
    assert json.loads(t.schema.metadata[b"params"])["release"] == "clip_only"
    assert all(np.isinf(t.column("mu_composed").to_numpy())) and all(np.isfinite(t.column("B").to_numpy()))
