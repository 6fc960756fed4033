"""Cell parameters (docs/methods.md §3): `CellSettings` (defaults, checks, flags) and
`resolve`, which fills derived values (``tau1: auto``, each method's settings: the
simulation's presets, `PRESETS` and `DERIVE`, resolved by `method_settings`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from ..core.glm import MODELS, population_min_eigenvalue
from ..core.privacy import (
    DEFAULT_CLIP,
    DEFAULT_PRIVACY,
    RELEASES,
    Fixed,
    PrivateQuantile,
    Quantile,
    check_clip,
    check_privacy,
    clip_rule,
    parse_mu,
)
from ..core.settings import Settings, choice, integer, name_list, number, plain, setting
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


def _clip(key, value) -> Fixed | Quantile | PrivateQuantile:
    """The clipping rule object of a rule's dict form, a number (a fixed bound) or a rule (`check_clip`)."""
    return clip_rule(check_clip(plain(value)))


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
    """The parameters of one simulation cell (docs/methods.md §3); `resolve`. Built (`build`), ``beta_true``
    is a list of floats and ``tau1`` a float (``None`` and ``auto`` given are filled in by `derived`), ``clip``
    a rule object (`fedgdp.core.privacy.clip_rule`; ``as_dict()`` gives its dict form)."""

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
    beta_true: list = setting(None, "true coefficients, intercept first (None: BETA_TRUE[model])")
    n_floor: int = setting(10, "smallest client size of the lognormal and total schemes", parse=integer(1))
    clip: Fixed | Quantile | PrivateQuantile = setting(help="clipping rule (check_clip)", parse=_clip,
                                                       factory=lambda: dict(DEFAULT_CLIP))
    privacy: dict = setting(help="privacy mode and FedNewton's Hessian bound (check_privacy)",
                            factory=lambda: dict(DEFAULT_PRIVACY))
    tau1: float = setting("auto", "FedNewton eigenvalue floor, or auto", parse=_tau1, flag=str)
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
    def build(cls, mapping: dict | None = None) -> CellSettings:
        """`Settings.build` (each field checked), then the checks across fields and the derived values
        (`derived`).

        Parameters
        ----------
        mapping : dict or None
            Overrides of the defaults.
        """
        return super().build(mapping).derived()

    def derived(self) -> CellSettings:
        """Check the sizes scheme, ``beta_true`` and the privacy mode; the canonical ``sizes``, ``beta_true``
        as floats (default `BETA_TRUE` of the model) and ``tau1: auto`` computed, in a copy."""
        scheme = parse_sizes(self.sizes, self.n_floor)
        scheme.check(self.m)
        check_halves(self.methods, scheme)
        beta = [float(b) for b in (BETA_TRUE[self.model] if self.beta_true is None else self.beta_true)]
        if len(beta) < 2:
            raise ValueError(f"beta_true needs an intercept and at least one slope, got {beta}")
        privacy = check_privacy(self.privacy, self.clip, self.release)
        tau1 = float(_tau1_auto(self.model, tuple(beta), float(self.sigma_c))) if self.tau1 == "auto" else self.tau1
        return self.replace(sizes=scheme.text, beta_true=beta, privacy=privacy, tau1=tau1)


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
def _fedavg_derive(s: dict, K: int, schedule: str) -> None:
    """FedAvg's ``K`` unless given: the cell's K (schedule ``paper``), else ``ceil(K / R)`` (at least 1)."""
    if "K" not in s:
        s["K"] = K if schedule == "paper" else max(1, -(-K // s["R"]))


def _fedhybrid_derive(s: dict, K: int, schedule: str) -> None:
    """FedHybrid's ``K1 = split(K, share1)`` and ``K2 = K - K1`` unless given (K: the cell's)."""
    if s.get("R1", 1) != 1:              # its noise is drawn for one stage-1 round (FedHybrid.noise_shapes)
        raise ValueError(f"fedhybrid.R1: the simulation runs one stage-1 round, got fedhybrid.R1={s['R1']!r}")
    if "K1" not in s:
        s["K1"] = FedHybrid.split(K, s["share1"])
    if "K2" not in s:
        s["K2"] = K - s["K1"]


#: The simulation's defaults of a cell per method, in the resolved order, from the cell's
#: ``K``; a method not listed: its settings' defaults with the cell's ``K``
#: (FedSGD, FedNewton: ``K`` and ``eta = 0.5``).
PRESETS = {
    "fedavg": lambda K: {"R": 2, "eta": 0.5},                     # K: DERIVE
    "fedhybrid": lambda K: {"eta1": 0.5, "eta2": 0.5, "share1": FedHybrid.SHARE1},   # K1, K2: DERIVE
}

#: The simulation's derived settings per method, ``derive(s, K, schedule)`` filling the method's
#: settings ``s`` (a mapping before its checks) in place (none for a method not listed).
DERIVE = {"fedavg": _fedavg_derive, "fedhybrid": _fedhybrid_derive}


def preset(meth: Method, K: int) -> dict:
    """The simulation's defaults of a method in a cell, in the resolved order (`PRESETS`).

    Parameters
    ----------
    meth : Method
        The method.
    K : int
        The cell's iteration budget.
    """
    if meth.name in PRESETS:
        return PRESETS[meth.name](K)
    assert meth.settings_class is not None
    s = meth.settings_class.defaults()
    return {**s, "K": K} if "K" in s else s


def method_settings(meth: Method, K: int, schedule: str = "paper", given: dict | None = None) -> dict:
    """A method's simulation settings: the cell's `preset`, the study's settings of the method
    (``given``), derived values (`DERIVE`); checked (`fedgdp.methods.Method.resolve_settings`).

    Parameters
    ----------
    meth : Method
        The method.
    K : int
        The cell's iteration budget.
    schedule : str
        How K maps to FedAvg's local steps (``paper`` or ``budget``; `CellSettings`).
    given : dict or None
        The study's ``method_settings`` of this method.
    """
    derive = DERIVE.get(meth.name)
    return meth.resolve_settings(preset(meth, K), dict(given or {}),
                                 None if derive is None else lambda s: derive(s, K, schedule))


def resolve(overrides: dict | None = None) -> CellSettings:
    """Fully resolved parameters of one cell: `CellSettings` from ``overrides``, with each method's
    checked settings in ``method_settings`` (ValueError naming the first bad key and value).

    Parameters
    ----------
    overrides : dict or None
        Cell parameters over the defaults (`CellSettings` fields).

    Returns
    -------
    CellSettings
        Frozen; its ``as_dict()`` is the plain dict the seeds and the Parquet metadata hold.
    """
    from .backend import get_method

    cell = CellSettings.build(overrides)
    given = cell.method_settings
    return cell.replace(method_settings={name: method_settings(get_method(name), cell.K, cell.schedule,
                                                               given.get(name)) for name in cell.methods})


def data_key(p: CellSettings) -> dict:
    """The parameters that define a cell's data (and so its seeds).

    Parameters
    ----------
    p : CellSettings
        Resolved cell parameters.
    """
    return {k: plain(getattr(p, k)) for k in ("model", "sizes", "m", "sigma_c", "beta_true", "n_floor")}
