"""One parser for every entry point (issue 45, item 4): the estimator, the simulation,
real-data and CNN settings and the GDP conversions read numbers through
`fedgdp.core.settings.as_float`, so a boolean is never a number; mu, clip and q have one
range on every path (`fedgdp.core.privacy`: MU_FLOOR, MU_MAX, CLIP_MIN, parse_fraction);
the GDP conversions refuse non-finite and out-of-range inputs; an empty CNN client is
refused before any work. Every refusal is one line naming the key and the value.
(The command-line cases of the same mistakes: tests/commands/test_careless.py.)"""
import math

import numpy as np
import pytest
import yaml

from fedgdp import FederatedGLM
from fedgdp.core import privacy
from fedgdp.core.settings import as_float, integer, number
from fedgdp.realdata import resolve as realdata_resolve
from fedgdp.simulation.params import CellSettings
from paths import ROOT

BOOLS = [True, np.True_, False]


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    return X, (X[:, 0] > 0).astype(int), np.repeat(np.arange(4), 20)


def glm(**params):
    return lambda: FederatedGLM(**({"method": "fedsgd", "clip": 1.0, "classes": [0, 1]} | params)).fit(*_data())


def nn(**over):
    nn_settings = pytest.importorskip("fedgdp.nn.settings")
    return lambda: nn_settings.resolve({"figure": "fig10", "m": 5, **over})


def one_line(fn, *words):
    """fn() raises ValueError with one line holding every word."""
    with pytest.raises(ValueError) as exc:
        fn()
    msg = str(exc.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    return msg


# ------------------------------------------------------------------ booleans
BOOL_CASES = {
    "parse_mu": lambda v: lambda: privacy.parse_mu(v),
    "clip value": lambda v: lambda: privacy.check_clip({"rule": "fixed", "value": v}),
    "clip q": lambda v: lambda: privacy.check_clip({"rule": "quantile", "q": v}),
    "clip share": lambda v: lambda: privacy.check_clip({"rule": "private_quantile", "q": 0.5, "share": v}),
    "clip grid bins": lambda v: lambda: privacy.check_clip({"rule": "private_quantile", "q": 0.5,
                                                            "grid": [0.01, 10, v]}),
    "hessian_clip": lambda v: lambda: privacy.check_privacy({"hessian_clip": v}, privacy.check_clip(1.0)),
    "number": lambda v: lambda: number(0)("x", v),
    "integer": lambda v: lambda: integer(0, strict=False)("x", v),
    "simulation mu": lambda v: lambda: CellSettings.build({"mu": v}),
    "simulation m": lambda v: lambda: CellSettings.build({"m": v}),
    "simulation clip": lambda v: lambda: CellSettings.build({"clip": v}),
    "realdata mu": lambda v: lambda: realdata_resolve({"mu": [v]}),
    "realdata tau1": lambda v: lambda: realdata_resolve({"tau1": v}),
    "realdata eta": lambda v: lambda: realdata_resolve({"methods": ["fedsgd"],
                                                       "method_settings": {"fedsgd": {"eta": v}}}),
    "glm mu": lambda v: glm(mu=v),
    "glm tau1": lambda v: glm(tau1=v),
    "glm hessian_clip": lambda v: glm(hessian_clip=v),
    "glm eta": lambda v: glm(method_settings={"eta": v}),
    "glm clip": lambda v: glm(clip=v),
    "glm clip q": lambda v: glm(clip={"rule": "private_quantile", "q": v}),
    "nn mu": lambda v: nn(mu=v),
    "nn clip": lambda v: nn(clip=v),
    "nn q": lambda v: nn(q=v),
    "nn rounds": lambda v: nn(rounds=v),
    "nn local_batch": lambda v: nn(local_batch=v),
    "nn lr": lambda v: nn(lr=v),
    "nn m": lambda v: nn(m=v),
}


@pytest.mark.parametrize("value", BOOLS, ids=repr)
@pytest.mark.parametrize("where", list(BOOL_CASES))
def test_a_boolean_is_never_a_number(where, value):
    """`mu: true` (YAML's yes) was mu = 1, `rounds: true` one round, `eta: True` stored as
    True: each is refused, in one line naming the value."""
    one_line(BOOL_CASES[where](value), repr(value))


def test_the_number_reader_accepts_what_it_did():
    """Numbers, numpy numbers and the strings float reads (``inf``) still pass."""
    assert as_float("x", 2) == 2.0 and as_float("x", np.float32(0.5)) == 0.5
    assert as_float("x", "inf") == math.inf and as_float("x", np.int64(3)) == 3.0
    assert math.isnan(as_float("x", "nan"))           # (the range checks refuse it)
    one_line(lambda: as_float("x", "abc"), "x='abc'")
    one_line(lambda: as_float("x", None), "x=None")


# ------------------------------------------------------------------ one range per value, every path
MU_PATHS = {
    "parse_mu": lambda mu: lambda: privacy.parse_mu(mu),
    "simulation": lambda mu: lambda: CellSettings.build({"mu": mu}),
    "realdata": lambda mu: lambda: realdata_resolve({"mu": [mu]}),
    "glm": lambda mu: glm(mu=mu, method="fedsgd" if math.isfinite(float(mu)) else "np_pooled"),
    "nn": lambda mu: nn(mu=mu),
}


@pytest.mark.parametrize("path", list(MU_PATHS))
def test_mu_has_one_range_on_every_path(path):
    """[MU_FLOOR, MU_MAX] or inf: the CNN path took 1e300 (a clip-only run reported as
    mu-GDP at 1e40 and 1e50); now every path refuses what parse_mu refuses."""
    for mu in (privacy.MU_FLOOR, 2.0, privacy.MU_MAX, math.inf):
        if path == "glm" and mu == privacy.MU_MAX:
            # parsed, then refused by the fit's noise check: at mu = 1e100 the noise is far
            # below the float grid of the signal (docs/methods.md, "Noise before rounding")
            one_line(MU_PATHS[path](mu), "256 ulps", "'gradient' release")
            continue
        MU_PATHS[path](mu)()
    for mu in (1e40 * privacy.MU_MAX, privacy.MU_FLOOR / 2, 0.0, -1.0, math.nan, True):
        one_line(MU_PATHS[path](mu), "mu")


CLIP_PATHS = {
    "check_clip": lambda B: lambda: privacy.check_clip(B),
    "simulation": lambda B: lambda: CellSettings.build({"clip": {"rule": "fixed", "value": B}}),
    "realdata": lambda B: lambda: realdata_resolve({"clip": {"rule": "fixed", "value": B}}),
    "glm": lambda B: glm(clip=B),
    "glm certified": lambda B: glm(clip=B, privacy_mode="certified"),
    "private quantile grid": lambda B: lambda: privacy.check_clip({"rule": "private_quantile", "q": 0.5,
                                                                   "grid": [B, 10.0, 8]}),
    "nn": lambda B: nn(clip=B),
}


@pytest.mark.parametrize("path", list(CLIP_PATHS))
def test_clip_has_one_floor_above_the_subnormals_on_every_path(path):
    """B = 1e-320 (subnormal) was accepted and certified with a ledger composing to 1.98;
    every path now refuses a bound below CLIP_MIN and accepts CLIP_MIN itself."""
    CLIP_PATHS[path](privacy.CLIP_MIN)()
    for B in (1e-320, 5e-324, privacy.CLIP_MIN / 2, 0.0, -1.0, math.nan):
        one_line(CLIP_PATHS[path](B), "clip", "1e-10")


def test_the_cnn_path_and_the_config_schema_restate_the_core_constants():
    """The CNN clip floor is the core's; the config schema's clip floors (nn settings,
    simulation defaults, realdata) and the CNN mu cap agree with the code's."""
    from fedgdp.nn import settings as nn_settings

    assert nn_settings.CLIP_MIN == privacy.CLIP_MIN
    s = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    sim, real = s["properties"]["defaults"]["properties"]["clip"], s["properties"]["realdata"]["properties"]["clip"]
    floors = [s["$defs"]["nn_settings"]["properties"]["clip"]["minimum"], sim["properties"]["value"]["minimum"],
              sim["properties"]["grid"]["prefixItems"][0]["minimum"], real["properties"]["value"]["minimum"]]
    assert floors == [privacy.CLIP_MIN] * 4
    assert s["$defs"]["nn_settings"]["properties"]["clip"]["maximum"] == nn_settings.CLIP_MAX


Q_PATHS = {
    "clip q": lambda q: lambda: privacy.check_clip({"rule": "quantile", "q": q}),
    "private clip q": lambda q: lambda: privacy.check_clip({"rule": "private_quantile", "q": q}),
    "glm clip q": lambda q: glm(clip={"rule": "private_quantile", "q": q}),
    "nn q": lambda q: nn(q=q),
}


@pytest.mark.parametrize("path", list(Q_PATHS))
def test_q_has_one_range_on_every_path(path):
    """(0, 1] (`privacy.parse_fraction`): a clipping quantile and the CNN's share of clients."""
    Q_PATHS[path](1.0)()
    for q in (0.0, 1.5, -0.1, math.nan, math.inf, True, "half"):
        one_line(Q_PATHS[path](q), "q", "(0, 1]")


# ------------------------------------------------------------------ GDP conversions
@pytest.mark.parametrize("fn, args, words", [
    (privacy.gdp_delta, (2, math.nan), ["epsilon=nan"]),
    (privacy.gdp_delta, (2, -math.inf), ["epsilon=-inf"]),
    (privacy.gdp_delta, (2, -500), ["epsilon=-500"]),
    (privacy.gdp_delta, (2, True), ["epsilon=True"]),
    (privacy.gdp_delta, (math.nan, 1), ["mu=nan"]),
    (privacy.gdp_delta, (0, 1), ["mu=0"]),
    (privacy.gdp_delta, (1e300, 1), ["mu=1e+300"]),
    (privacy.gdp_delta, (math.inf, math.inf), ["mu=inf and epsilon=inf"]),
    (privacy.gdp_epsilon, (math.nan, 1e-5), ["mu=nan"]),
    (privacy.gdp_epsilon, (2, math.nan), ["delta=nan"]),
    (privacy.gdp_epsilon, (2, 1.0), ["delta=1.0"]),
    (privacy.gdp_epsilon, (-math.inf, 1e-5), ["mu=-inf"]),
    (privacy.gdp_mu, (math.nan, 1e-5), ["epsilon=nan"]),
    (privacy.gdp_mu, (1, math.nan), ["delta=nan"]),
    (privacy.gdp_mu, (1, True), ["delta=True"]),
    (privacy.gdp_mu, (-1, 1e-5), ["epsilon=-1"]),
    (privacy.gdp_mu, (1e300, 1e-5), ["epsilon=1e+300", "MU_MAX"]),
])
def test_gdp_conversions_refuse_bad_inputs_naming_them(fn, args, words):
    """gdp_delta(2, nan), (2, -inf) and (2, -500) returned 0.0 (pure DP, read wrongly)."""
    one_line(lambda: fn(*args), *words)


def test_gdp_conversions_return_the_limits():
    """epsilon = inf: delta = 0 (every mechanism is (inf, 0)-DP) and the mu through (inf,
    delta) is inf (mu -> inf as epsilon -> inf); mu = inf: delta = 1 at finite epsilon,
    epsilon = inf. These failed with "math domain error" (gdp_delta(2, inf), gdp_mu(inf, 1e-5))."""
    assert privacy.gdp_delta(2, math.inf) == 0.0
    assert privacy.gdp_mu(math.inf, 1e-5) == math.inf
    assert privacy.gdp_delta(math.inf, 1.0) == 1.0
    assert privacy.gdp_epsilon(math.inf, 1e-5) == math.inf
    # and the finite ones round-trip (relative 1e-8: brentq's tolerances are 1e-14)
    eps = privacy.gdp_epsilon(2.0, 1e-5)
    assert privacy.gdp_delta(2.0, eps) == pytest.approx(1e-5, rel=1e-8)
    assert privacy.gdp_mu(eps, 1e-5) == pytest.approx(2.0, rel=1e-8)
    assert 0 < privacy.gdp_delta(privacy.MU_MAX, 1.0) <= 1 and math.isfinite(privacy.gdp_epsilon(privacy.MU_MAX, 1e-5))


# ------------------------------------------------------------------ the CNN's empty client
@pytest.mark.parametrize("sizes", [(3, 0, 2), (0,), ()], ids=["middle", "only", "none"])
def test_clientdata_refuses_an_empty_client(sizes):
    torch = pytest.importorskip("torch")
    from fedgdp.nn.train import ClientData

    xs = [torch.zeros((n, 1, 4, 4)) for n in sizes]
    ys = [torch.zeros(n, dtype=torch.int64) for n in sizes]
    one_line(lambda: ClientData(xs, ys), *(["client 1 has 0 images"] if sizes == (3, 0, 2) else []))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_train_refuses_an_empty_client_before_any_work(reduction, monkeypatch):
    """A client emptied after ClientData was built (a reshape error, numpy's "number
    sections", or a silent release under sum before) is refused by train() itself,
    before the backend is built."""
    torch = pytest.importorskip("torch")
    from fedgdp.nn import train as nn_train
    from fedgdp.nn.models import ConvNet
    from fedgdp.nn.settings import resolve

    net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3)
    params0 = {k: v.detach().clone() for k, v in net.named_parameters()}
    clients = nn_train.ClientData([torch.zeros((4, 1, 4, 4))] * 3, [torch.zeros(4, dtype=torch.int64)] * 3)
    clients.x[1], clients.y[1] = torch.zeros((0, 1, 4, 4)), torch.zeros(0, dtype=torch.int64)
    clients.n[1] = 0
    monkeypatch.setattr(nn_train, "TorchBackend", lambda *a, **k: pytest.fail("work started"))
    p = resolve({"dataset": "digits", "m": 3, "n": 4, "rounds": 1, "local_epochs": 1, "q": 1.0,
                 "methods": "fedavg", "reduction": reduction})
    one_line(lambda: nn_train.train("fedavg", params0, clients, p, np.random.default_rng(0), None),
             "client 1 has 0 images")


# ------------------------------------------------------------------ fedgdp fit --features
def test_features_refuse_empty_and_duplicate_names():
    pd = pytest.importorskip("pandas")
    from fedgdp.api.fitting import fit_table, parse_features

    assert parse_features(None) is None and parse_features(" a , b ") == ["a", "b"]
    for text in ("", " ", ",", "a,,b", "a,"):
        one_line(lambda text=text: parse_features(text), "--features", repr(text))
    X, y, c = _data()
    df = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y, "c": c})
    one_line(lambda: fit_table(df, target="y", client="c", features=["a", "a"], clip=1.0),
             "--features", "'a' more than once")
    one_line(lambda: fit_table(df, target="y", client="c", features=[], clip=1.0), "--features", "[]")
