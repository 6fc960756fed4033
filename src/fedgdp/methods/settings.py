"""The methods' settings: one frozen dataclass per family of settings (each field's
default, check and help, by `fedgdp.core.settings.setting`); a method names its class
(``settings_class``); each study holds its defaults per method (its ``PRESETS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..core.settings import Settings, integer, number, setting


@dataclass(frozen=True)
class MethodSettings(Settings):
    """Base of the methods' settings dataclasses (one field per setting: its check and
    help; the defaults per experiment are each study's ``PRESETS``)."""

    WHAT: ClassVar[str] = "setting"

    @classmethod
    def of(cls, s: Mapping | MethodSettings) -> MethodSettings:
        """The frozen settings of a resolved record ``s`` (a field it lacks keeps its default); ``s`` if frozen.

        Parameters
        ----------
        s : mapping or MethodSettings
            Resolved settings (`fedgdp.methods.Method.resolve_settings`): their keys are this class's fields.
        """
        if isinstance(s, MethodSettings):
            return s
        unknown = sorted(set(s) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"{cls.__name__} has no setting {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(cls.__dataclass_fields__)}")
        return cls(**s)


def _steps(low: int = 1):
    return integer(low)                      # an int (no bool, float or string)


_POSITIVE = number(0, keep=True)             # > 0, kept as given (it enters the seeds' parameters)


@dataclass(frozen=True)
class StepSettings(MethodSettings):
    """FedSGD and FedNewton: K steps of size eta."""

    K: int = setting(50, "steps (simulation: the cell's K)", parse=_steps())
    eta: float = setting(0.5, "step size", parse=_POSITIVE)


@dataclass(frozen=True)
class RoundSettings(MethodSettings):
    """FedAvg: R rounds of K local steps of size eta."""

    R: int = setting(2, "rounds", parse=_steps())
    K: int = setting(50, "local steps per round (simulation: the cell's K, or ceil(K/R) on schedule budget)",
                     parse=_steps())
    eta: float = setting(0.5, "local step size", parse=_POSITIVE)


@dataclass(frozen=True)
class HybridSettings(MethodSettings):
    """FedHybrid: K1 local steps (eta1), averaged, then K2 server steps (eta2)."""

    eta1: float = setting(0.5, "stage-1 (local) step size", parse=_POSITIVE)
    eta2: float = setting(0.5, "stage-2 (server) step size", parse=_POSITIVE)
    share1: float = setting(0.6, "stage 1's share of the K steps when K1 is not given", parse=_POSITIVE)
    K1: int = setting(30, "stage-1 local steps", parse=_steps())
    K2: int = setting(20, "stage-2 server steps", parse=_steps(0))
    R1: int = setting(1, "stage-1 rounds of K1 local steps, each averaged (the paper's single averaging: 1; "
                         "the CNNs split their rounds; the simulation runs 1)", parse=_steps(0))


@dataclass(frozen=True)
class ScaffoldSettings(RoundSettings):
    """DP-SCAFFOLD: FedAvg's schedule and a server step size."""

    eta_g: float = setting(1.0, "server step size", parse=_POSITIVE)


@dataclass(frozen=True)
class IterSettings(MethodSettings):
    """FedNewton-Iter (CNNs): R FedAvg rounds of K local steps (eta) in ``cycles`` cycles,
    each followed by a head-only Newton round (ridge lambda, damping alpha)."""

    R: int = setting(10, "FedAvg rounds (a multiple of cycles)", parse=_steps())
    K: int = setting(10, "local steps per round", parse=_steps())
    eta: float = setting(0.01, "local step size", parse=_POSITIVE)
    cycles: int = setting(2, "cycles of (R / cycles FedAvg rounds + 1 Newton round)", parse=_steps())
    ridge: float = setting(1.0, "ridge lambda of the head Newton step", parse=_POSITIVE)
    damping: float = setting(1.0, "damping alpha of the head Newton step", parse=number(0, 10, closed="high"))


@dataclass(frozen=True)
class RidgeSettings(MethodSettings):
    """The plain ridge fits: penalty, Newton iterations, gradient tolerance."""

    ridge: float = setting(1.0e-3, "ridge penalty on the coefficients, not the intercept (the MLE need not exist "
                           "on images); 0: the MLE, where it exists", parse=number(0, closed="low", keep=True))
    maxiter: int = setting(200, "Newton iterations", parse=_steps())
    gtol: float = setting(1.0e-8, "stop at ||gradient||_F <= gtol", parse=_POSITIVE)


@dataclass(frozen=True)
class IRLSSettings(MethodSettings):
    """FedIRLS: T private Newton rounds on the privately whitened design, each step at most ``radius``."""

    T: int = setting(5, "Newton rounds (each a clipped gradient; rounds 2..T-1 also a clipped curvature)",
                     parse=_steps(2))
    radius: float = setting(4.0, "the largest step, in the whitened coordinates (a linear predictor's sd per "
                                 "unit)", parse=_POSITIVE)
