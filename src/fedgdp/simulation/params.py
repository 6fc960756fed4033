"""Cell parameters (docs/methods.md §3): `CellSettings` (defaults, checks, flags) and
`resolve`, which fills derived values (``tau1: auto``, each method's settings: the
simulation's presets, `PRESETS` and `DERIVE`, resolved by `method_settings`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from ..core.glm import MODELS, population_min_eigenvalue
from ..core.privacy import DEFAULT_CLIP, DEFAULT_PRIVACY, RELEASES, check_clip, check_privacy, parse_mu
from ..core.settings import Settings, choice, integer, name_list, number, setting
from ..methods import FedHybrid, Method
from .data import parse_sizes

__all__ = ["CellSettings", "DEFAULTS", "BETA_TRUE", "resolve", "data_key", "parse_seeds", "check_halves",
           "PRESETS", "DERIVE", "preset", "method_settings"]


# Not stated in the paper, chosen here (docs/methods.md §1).
BETA_TRUE = {
    "logistic": [0.5, -0.5, 1.0, -1.0, 0.5],
    "poisson": [0.5, 0.3, -0.3, 0.2, -0.2],
}



def _methods(key, value) -> list:
    from .backend import get_method

    names = name_list(key, value)
    if not names:
        raise ValueError("methods must name at least one method")
    for name in names:
        get_method(name)
    return names


def _tau1(key, value):
    if value == "auto":
        return value
    try:
        ok = float(value) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"tau1 must be > 0 or 'auto', got tau1={value!r}")
    return float(value)


def check_halves(methods: list, scheme) -> None:
    """ValueError unless every client can be split into two non-empty halves (n_i >= 2) when
    a method reads halves (FedNewton).

    Parameters
    ----------
    methods : list of str
        The cell's methods.
    scheme : fedgdp.simulation.data.SizeScheme
        The client-size scheme.
    """
    from .backend import get_method

    newton = [name for name in methods if get_method(name).tags.halves]
    if newton and scheme.min_size() < 2:
        floor = " (n_floor)" if scheme.kind in ("lognormal", "total") else ""
        raise ValueError(f"sizes {scheme.text!r} can give a client fewer than 2 samples{floor}, but "
                         f"{', '.join(newton)} needs n_i >= 2 (both halves non-empty)")


@dataclass(frozen=True)
class CellSettings(Settings):
    """The parameters of one simulation cell (docs/methods.md §3); `resolve`."""

    WHAT: ClassVar[str] = "parameter"

    model: str = setting("logistic", "logistic | poisson", parse=choice(*MODELS), flag=str)
    sizes: str = setting("equal(400)", "equal(n) | uniform(a,b) | lognormal(mu_log,sd_log) | total(N,scheme)",
                         flag=str)
    m: int = setting(100, "number of clients", parse=integer(1), flag=int)
    mu: float = setting(2.0, "privacy parameter mu > 0, or inf", parse=lambda k, v: parse_mu(v), flag=str)
    K: int = setting(50, "the study's iteration budget (paper section 4)", parse=integer(1), flag=int)
    schedule: str = setting("paper", "paper | budget (how K maps to FedAvg's local steps: paper runs K "
                            "local steps per round, budget ceil(K/R))", parse=choice("paper", "budget"), flag=str)
    sigma_c: float = setting(1.0, "covariates C ~ N(0, sigma_c^2)", parse=number(0, keep=True))
    beta_true: list | None = setting(None, "true coefficients, intercept first (None: BETA_TRUE[model])")
    n_floor: int = setting(10, "smallest client size of the lognormal and total schemes", parse=integer(1))
    clip: dict = setting(help="clipping rule (check_clip)", parse=lambda k, v: check_clip(v),
                         factory=lambda: dict(DEFAULT_CLIP))
    privacy: dict = setting(help="privacy mode and FedNewton's Hessian bound (check_privacy)",
                            factory=lambda: dict(DEFAULT_PRIVACY))
    tau1: float | str = setting("auto", "FedNewton eigenvalue floor, or auto", parse=_tau1, flag=str)
    weights: str = setting("size", "size | optimal", parse=choice("size", "optimal"), flag=str)
    base_seed: int = setting(2026, "root of every replicate's random draws", parse=integer(0), flag=int)
    diverge_factor: float = setting(5.0, "flag a run whose ||theta_hat - beta_true|| > factor * "
                                    "max(1, ||beta_true||)", parse=number(0, keep=True))
    methods: list = setting(help="comma-separated method names", parse=_methods, flag=str,
                            factory=lambda: ["fedsgd", "fedhybrid", "fedavg", "fednewton"])
    method_settings: dict = setting(help="per method, e.g. {fedsgd: {eta: 0.5}, fedavg: {R: 2}}", factory=dict)
    study: str = setting("", "study label stored in the output rows", flag=str)
    release: str = setting("private", "what the fits release: private (clipped and noisy), clip_only (the same "
                           "bound, no noise) or plain (neither); docs/methods.md §9", parse=choice(*RELEASES), flag=str)

    @classmethod
    def finish(cls, p: dict) -> dict:
        """Check the sizes scheme, ``beta_true`` and the privacy mode; compute ``tau1: auto``."""
        scheme = parse_sizes(p["sizes"], p["n_floor"])
        scheme.check(p["m"])
        check_halves(p["methods"], scheme)
        p["sizes"] = scheme.text
        if p["beta_true"] is None:
            p["beta_true"] = list(BETA_TRUE[p["model"]])
        p["beta_true"] = [float(b) for b in p["beta_true"]]
        if len(p["beta_true"]) < 2:
            raise ValueError(f"beta_true needs an intercept and at least one slope, got {p['beta_true']}")
        p["privacy"] = check_privacy(p["privacy"], p["clip"], p["release"])
        if p["tau1"] == "auto":
            p["tau1"] = float(_tau1_auto(p["model"], tuple(p["beta_true"]), float(p["sigma_c"])))
        return p


#: the defaults as a plain dict (e.g. for --help)
DEFAULTS: dict = CellSettings.defaults()


def parse_seeds(text: str) -> list[int]:
    """``"0-99"``, ``"7"`` or ``"0-9,20-29"`` -> sorted unique replicate indices.

    Parameters
    ----------
    text : str
        The replicate ranges.
    """
    out: list[int] = []
    for part in str(text).split(","):
        a, dash, b = part.strip().partition("-")
        try:
            if dash and not b:          # "0-": a range without its end, not seed 0
                raise ValueError
            lo, hi = int(a), int(b) if b else int(a)
        except ValueError:
            raise ValueError(f"bad seeds {text!r}: use 'first-last' with integers, e.g. 0-99") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"bad seeds {text!r}: need 0 <= first <= last, got {part.strip()!r}")
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


@lru_cache(maxsize=16)
def _tau1_auto(model: str, beta: tuple, sigma_c: float) -> float:
    return population_min_eigenvalue(model, beta, sigma_c)


# ------------------------------------------------------------ method presets
def _fedavg_derive(s: dict, params: dict) -> None:
    """FedAvg's ``K`` unless given: the cell's K (schedule ``paper``), else ``ceil(K / R)`` (at least 1)."""
    if "K" not in s:
        s["K"] = params["K"] if params["schedule"] == "paper" else max(1, -(-params["K"] // s["R"]))


def _fedhybrid_derive(s: dict, params: dict) -> None:
    """FedHybrid's ``K1 = split(K, share1)`` and ``K2 = K - K1`` unless given (K: the cell's)."""
    if s.get("R1", 1) != 1:              # its noise is drawn for one stage-1 round (FedHybrid.noise_shapes)
        raise ValueError(f"fedhybrid.R1: the simulation runs one stage-1 round, got fedhybrid.R1={s['R1']!r}")
    if "K1" not in s:
        s["K1"] = FedHybrid.split(params["K"], s["share1"])
    if "K2" not in s:
        s["K2"] = params["K"] - s["K1"]


#: The simulation's defaults of a cell per method, in the resolved order, from the cell's
#: parameters; a method not listed: its settings' defaults with the cell's ``K``
#: (FedSGD, FedNewton: ``K`` and ``eta = 0.5``).
PRESETS = {
    "fedavg": lambda params: {"R": 2, "eta": 0.5},                     # K: DERIVE
    "fedhybrid": lambda params: {"eta1": 0.5, "eta2": 0.5, "share1": FedHybrid.SHARE1},   # K1, K2: DERIVE
}

#: The simulation's derived settings per method, ``derive(s, params)`` filling ``s`` in place
#: (none for a method not listed).
DERIVE = {"fedavg": _fedavg_derive, "fedhybrid": _fedhybrid_derive}


def preset(meth: Method, params: dict) -> dict:
    """The simulation's defaults of a method in a cell, in the resolved order (`PRESETS`).

    Parameters
    ----------
    meth : Method
        The method.
    params : dict
        Resolved cell parameters (``K``, ``schedule``).
    """
    if meth.name in PRESETS:
        return PRESETS[meth.name](params)
    assert meth.settings_class is not None
    s = meth.settings_class.defaults()
    return {**s, "K": params["K"]} if "K" in s else s


def method_settings(meth: Method, params: dict) -> dict:
    """A method's simulation settings: the cell's `preset`, the study's ``method_settings`` of
    the method, derived values (`DERIVE`); checked (`fedgdp.methods.Method.resolve_settings`).

    Parameters
    ----------
    meth : Method
        The method.
    params : dict
        Cell parameters: ``K``, ``schedule`` and ``method_settings`` are read.
    """
    derive = DERIVE.get(meth.name)
    given = dict(params.get("method_settings", {}).get(meth.name, {}))
    return meth.resolve_settings(preset(meth, params), given,
                                 None if derive is None else lambda s: derive(s, params))


def resolve(overrides: dict | None = None) -> dict:
    """Fully resolved parameters of one cell (a new dict): `CellSettings` from ``overrides``, then each method's
    checked settings in ``method_settings`` (ValueError naming the first bad key and value).

    Parameters
    ----------
    overrides : dict or None
        Cell parameters over the defaults (`CellSettings` fields).
    """
    from .backend import get_method

    p = CellSettings.build(overrides).as_dict()
    p["method_settings"] = {name: method_settings(get_method(name), p) for name in p["methods"]}  # checked there
    return p


def data_key(p: dict) -> dict:
    """The parameters that define a cell's data (and so its seeds).

    Parameters
    ----------
    p : dict
        Resolved cell parameters.
    """
    return {k: p[k] for k in ("model", "sizes", "m", "sigma_c", "beta_true", "n_floor")}
