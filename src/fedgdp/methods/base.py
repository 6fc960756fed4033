"""The algorithm core: every federated method written once, and the one registry.

Methods (paper section 3, docs/methods.md §2-5), one class each, in `REGISTRY`:

- ``fedsgd``      Algorithm 1: K server steps on noisy clipped client gradients.
- ``fedavg``      Algorithm 3: R rounds of K noisy local steps, averaged.
- ``fedhybrid``   Algorithm 2: K1 noisy local steps, average, then K2 FedSGD steps.
- ``fednewton``   Algorithm 4: FedAvg (R = 1) on half 1 of every client, then one
  private local Newton step (Hessian on half 1, clipped gradient on half 2); in
  privacy mode ``certified`` with clipped per-sample Hessians and a ridge solve.
- ``fednewton_certified`` the certified FedNewton in every mode (FedNewton's noise stream).
- ``fednewton_iter`` Algorithm 5 (CNNs only): cycles of FedAvg rounds, each followed by
  one private head-only Newton round on the network's last layer.
- ``dp_scaffold`` SCAFFOLD (option II control variates) with FedAvg's noise; the control
  variates are post-processing of released iterates (real data only).
- ``np_scaffold``, ``np_fedavg`` the same algorithms at mu = inf (`NonPrivate`).
- ``np_localfit``, ``np_pooled`` the two plain ridge fits (real data only).

A method is written against a *backend* (`Backend`): the data of one fit and
its noise. Three backends implement it: the simulation's
(`fedgdp.simulation.backend.SimBackend`: a block of replicates in the fused kernels'
layout, noise pre-drawn per replicate) and the real data's
(`fedgdp.realdata.backend.RealBackend`: per-client matrices, J privacy levels
stacked, noise drawn from one generator in the order the computation asks for it)
and the CNNs' (`fedgdp.nn.backend.TorchBackend`: a network's parameters, client
sampling and a server learning rate, noise from a ``torch.Generator``).
A method's ``backends`` names the ones it runs on; `get_method` checks it.

Conventions
-----------
Arrays carry a leading *batch* axis ``b``: the replicates of a block (simulation) or
the privacy levels fitted in one pass (real data). Global parameters are ``(b, P)``,
per-client ones ``(b, m, P)``, where P is ``d`` (simulation) or ``d, k`` (real data);
noise sds are ``(b, m)``. ``dk`` is the number of floats of one parameter.

Settings
--------
A method declares its settings once: ``settings_class``, a `fedgdp.settings`
dataclass (each field's check and help), and ``presets``, the defaults per experiment
(``realdata``: the real-data study's; the simulation's come from the cell, e.g. K, by
`Method.simulation_preset`). `Method.resolve_settings` is the one resolution:
defaults, then the user's values (an unknown key is refused with a "did you mean"),
then derived values, each value checked by its field. ``settings_parent`` names the
method whose resolved real-data settings a method starts from (the non-private
versions, the certified FedNewton, DP-SCAFFOLD on FedAvg's schedule).

Adding a method: subclass `Method`, write `Method.plan` (its releases)
and `Method.run` (the algorithm, with backend operations), declare its settings,
and add one line to `REGISTRY` (docs/ARCHITECTURE.md, "Adding a method").
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from .. import privacy
from ..normals import standard_normal
from ..settings import Settings, integer, number, setting, suggest

__all__ = ["Backend", "Fit", "Method", "FedSGD", "FedAvg", "FedHybrid", "FedNewton", "FedNewtonCertified",
           "FedNewtonIter", "DPScaffold", "NonPrivate", "NPLocalFit", "NPPooled", "REGISTRY", "registry", "get_method",
           "RegistryView", "PreDrawnNoise", "StreamNoise", "comm_counts", "MethodSettings"]

SIMULATION, REALDATA, CNN = "simulation", "realdata", "nn"
BOTH = frozenset({SIMULATION, REALDATA})
GRADIENT_METHODS = BOTH | {CNN}       # FedSGD, FedAvg, FedHybrid also train the CNNs


# ------------------------------------------------------------------------ noise
class PreDrawnNoise:
    """Noise drawn before the fit (simulation): one standard-normal array per name,
    replicate axis first (shapes: `Method.noise_shapes`); None values when
    non-private. ``take(name, *index)`` is the array indexed after the replicate axis."""

    def __init__(self, arrays: dict):
        self.arrays = arrays

    def take(self, name: str, *index):
        """The pre-drawn array ``name``, indexed after the replicate axis.

        Parameters
        ----------
        name : str
            The array's name (a key of `Method.noise_shapes`).
        *index : int
            Indices after the replicate axis (e.g. the round).

        Returns
        -------
        ndarray or None
            The standard normals, replicate axis first; None when non-private.
        """
        Z = self.arrays[name]
        return Z if Z is None or not index else Z[(slice(None),) + index]


class StreamNoise:
    """Noise drawn from one generator in the order the computation asks (real data).

    ``take`` returns this stream (None when non-private); a backend operation then
    calls `draw` once per client and step, in its own fixed order.
    """

    def __init__(self, rng: np.random.Generator | None):
        self.rng = rng

    def take(self, name: str, *index):
        """This stream, or None when non-private.

        Parameters
        ----------
        name : str
            The draw's name (unused: the stream draws in the computation's order).
        *index : int
            Unused, as ``name``.

        Returns
        -------
        StreamNoise or None
            The stream to `draw` from.
        """
        return None if self.rng is None else self

    def draw(self, shape: tuple) -> np.ndarray:
        """Standard normals of ``shape`` from the stream.

        Parameters
        ----------
        shape : tuple
            The shape of the draw.

        Returns
        -------
        ndarray
            The draw.
        """
        return standard_normal(self.rng, shape)  # type: ignore[arg-type]  # take() hands out a private stream only


# ---------------------------------------------------------------------- backend
class Backend(Protocol):
    """What a method may ask of the data of one fit (see the module's conventions).

    ``kind`` (``simulation`` | ``realdata``), ``data`` (what `Method.plan` reads:
    ``plan_B``, ``plan_n``, ``plan_halves()``, ``tau1``, ``privacy``), ``m``, ``dk``, and
    ``noise`` (`PreDrawnNoise` or `StreamNoise`).
    """

    kind: str
    data: Any
    m: int
    dk: int

    def calibrate(self, method: Method, s: dict) -> tuple[tuple, list]:
        """The noise sds of the method's plan and the ledgers.

        Parameters
        ----------
        method : Method
            The method (its `Method.plan` is calibrated).
        s : dict
            The method's settings.

        Returns
        -------
        tuple
            One (b, m) array of sds per release spec, and the ledgers (one per privacy level).
        """

    def weights(self, releases: int) -> np.ndarray:
        """Aggregation weights (b, m) or (m,), rows summing to one.

        Parameters
        ----------
        releases : int
            Releases each client makes (the optimal weights depend on it).

        Returns
        -------
        ndarray
            The weights.
        """

    def zeros(self) -> np.ndarray:
        """A global parameter of zeros (b, P).

        Returns
        -------
        ndarray
            Zeros.
        """

    def start(self):
        """The global parameter every method starts from: zeros for the GLMs, the seeded
        initial weights for a network.

        Returns
        -------
        object
            The start (b, P), or a network's parameters.
        """

    def local_steps(self, start, *, K: int, eta: float, sigma, noise, part: str = "full",
                    drift=None) -> np.ndarray:
        """K noisy local steps of every client from the global ``start`` (b, P):
        ``theta <- theta - eta (mean_j clip(g_j(theta)) + drift_i) + sigma_i Z`` on the
        rows ``part`` (``full`` or ``half1``) of each client.

        Parameters
        ----------
        start : ndarray
            The global parameter (b, P).
        K : int
            Local steps.
        eta : float
            Step size.
        sigma : ndarray
            Noise sds (b, m).
        noise : object
            The noise (``be.noise.take(...)``), None when non-private.
        part : str
            ``full`` or ``half1``.
        drift : ndarray or None
            Per-client drift (b, m, P).

        Returns
        -------
        ndarray
            Per-client parameters (b, m, P).
        """

    def average(self, w, local) -> np.ndarray:
        """``sum_i w_i local_i``: per-client (b, m, P) -> global (b, P).

        Parameters
        ----------
        w : ndarray
            Weights (b, m) or (m,).
        local : ndarray
            Per-client parameters (b, m, P).

        Returns
        -------
        ndarray
            The global parameter (b, P).
        """

    def server_steps(self, theta, w, *, K: int, eta: float, sigma, noise) -> np.ndarray:
        """K FedSGD steps ``theta -= eta sum_i w_i (mean_j clip(g_j(theta)) + sigma_i Z_i)``.

        Parameters
        ----------
        theta : ndarray
            The global parameter (b, P).
        w : ndarray
            Weights (b, m) or (m,).
        K : int
            Server steps.
        eta : float
            Step size.
        sigma : ndarray
            Noise sds (b, m).
        noise : object
            The noise, None when non-private.

        Returns
        -------
        ndarray
            The global parameter (b, P).
        """

    def newton_release(self, theta1, *, hessian_bound) -> np.ndarray:
        """Every client's pre-noise Newton release ``theta1 - s_i`` (b, m, P), where s_i
        solves the (floored or ridge) Newton system of its half-1 Hessian and its
        clipped half-2 gradient at theta1.

        Parameters
        ----------
        theta1 : ndarray
            The stage-1 global parameter (b, P).
        hessian_bound : float or None
            Clips per-sample Hessians (certified), None: the paper's floor.

        Returns
        -------
        ndarray
            The releases (b, m, P).
        """

    def add_noise(self, local, sigma, noise) -> np.ndarray:
        """``local_i + sigma_i Z_i`` (one draw per client), or local when noise is None.

        Parameters
        ----------
        local : ndarray
            Per-client parameters (b, m, P).
        sigma : ndarray
            Noise sds (b, m).
        noise : object
            The noise, None when non-private.

        Returns
        -------
        ndarray
            The noisy releases (b, m, P).
        """

    def memo(self, key: str, inputs: tuple, compute):
        """``compute()``, reused for equal inputs when the backend keeps results.

        Parameters
        ----------
        key : str
            The result's name.
        inputs : tuple
            What the result depends on (compared for reuse).
        compute : callable
            Computes the result.

        Returns
        -------
        object
            The result.
        """

    def finish(self, theta, ledgers: list, comm: dict) -> list[Fit]:
        """The fits, one per privacy level.

        Parameters
        ----------
        theta : ndarray
            The final global parameter.
        ledgers : list
            One ledger per privacy level.
        comm : dict
            The communication (`Method.comm`).

        Returns
        -------
        list of Fit
            The fits.
        """


@dataclass
class Fit:
    """A method's result: estimates, ledger, communication of one fit.

    ``theta``: (n_rep, d) over a simulation block; (d, k) on real data, or (m, d, k) one
    model per client (``local``).
    """

    theta: np.ndarray
    ledger: privacy.Ledger
    rounds: int
    floats_up: int
    floats_down: int
    local: bool = False

    def client_theta(self, i: int) -> np.ndarray:
        """Client i's estimate: its own (``local``) or the global one.

        Parameters
        ----------
        i : int
            The client.

        Returns
        -------
        ndarray
            The estimate (d, k) on real data.
        """
        return self.theta[i] if self.local else self.theta


def comm_counts(rounds: int, m: int, dk: int, per_round: int = 1) -> dict:
    """Communication of a fit: each round every client uploads ``per_round`` parameters
    of dk floats and the server broadcasts as many to each.

    Parameters
    ----------
    rounds : int
        Communication rounds.
    m : int
        Clients.
    dk : int
        Floats of one parameter.
    per_round : int
        Parameters each client uploads per round.

    Returns
    -------
    dict
        ``rounds``, ``floats_up``, ``floats_down``.
    """
    return {"rounds": rounds, "floats_up": rounds * m * dk * per_round,
            "floats_down": rounds * m * dk * per_round}


def _method_params(params: dict, name: str) -> dict:
    return dict(params.get("method_settings", {}).get(name, {}))


# --------------------------------------------------------------------- settings
@dataclass(frozen=True)
class MethodSettings(Settings):
    """Base of the methods' settings dataclasses (one field per setting: its check and
    help; the defaults per experiment are the method's ``presets``)."""

    WHAT: ClassVar[str] = "setting"


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


# ---------------------------------------------------------------------- methods
class Method:
    """One estimator. Subclasses set the class attributes and write `plan` and
    `run`; the simulation also needs `settings` and `noise_shapes`.

    ``private`` methods run at every configured mu, the others once at mu = inf;
    ``stacks_levels``: the real-data backend may fit all mu levels in one pass.
    """

    name = ""
    label = ""
    algorithm = ""
    private = True
    backends = BOTH
    stacks_levels = True
    per_round = 1
    #: the settings (`MethodSettings` dataclass): their names, checks and help
    settings_class: type[MethodSettings] | None = None
    #: defaults per experiment, in the resolved order (the simulation's: `simulation_preset`)
    presets: dict[str, dict] = {}
    #: the method whose resolved real-data settings this one starts from (None: its own preset)
    settings_parent: str | None = None
    #: the releases read two halves of each client's rows (half 1, half 2): a client
    #: needs at least two rows, and the audit moves a record of each half
    halves = False
    #: the local steps carry a per-client drift (control variates), which the audit's
    #: local-step release is searched with
    drifts = False
    #: the row of the paper's Table 1 whose MSE bound the method has
    #: (`fedgdp.theory.upper_bound`); None: no bound
    theory_bound: str | None = None
    #: what to use instead where the method's plan has an uncertified release (the
    #: privacy-leak warning of `fedgdp.estimator.FederatedGLM`)
    certified_alternatives = "privacy_mode='certified'"
    #: the release (a stage of its plan) whose worst pair the empirical distinguishing
    #: test (`fedgdp.empirical`) runs the method on, its most sensitive one; None: untested
    tested_release: str | None = None
    #: the fit is one model per client (`Fit.local`), not one global estimate
    per_client = False
    #: the releases solve a Newton system with the configured solver (``newton``: cg,
    #: ridge or floor), so the solver's settings matter to it (checks, the audit's solvers)
    solves_newton = False

    def setting_names(self) -> list[str]:
        """The names of the method's settings (its ``settings_class`` fields).

        Returns
        -------
        list of str
            The names, in declaration order (empty when the method has no settings).
        """
        return [] if self.settings_class is None else list(self.settings_class.defaults())

    def local_step_size(self, s: dict) -> float:
        """The step size of the method's local steps (its ``local step`` release).

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        float
            ``s["eta"]`` (FedHybrid: its stage-1 ``eta1``).
        """
        return s["eta"]

    def settings_schema(self) -> dict:
        """The JSON schema of the method's settings in a config (``method_settings.<name>``):
        its ``settings_class`` fields, their types, bounds and help (`Settings.json_schema`).

        Returns
        -------
        dict
            A closed object schema (no properties when the method has no settings).
        """
        if self.settings_class is None:
            return {"type": "object", "additionalProperties": False, "properties": {}}
        return self.settings_class.json_schema()

    def resolve_settings(self, defaults: dict, given: dict | None, derive=None) -> dict:
        """The method's settings: ``defaults`` updated by ``given`` (an unknown key: ValueError
        with a "did you mean"), then ``derive(s)`` filling derived values, then every value
        checked by its field (ValueError naming ``method.key`` and the value), then the
        cross-field `check_settings`.

        Parameters
        ----------
        defaults : dict
            The defaults (a preset, or a parent's resolved settings and a preset), in order.
        given : dict or None
            The user's settings of this method.
        derive : callable or None
            ``derive(s)`` fills derived values (in place) before the checks.

        Returns
        -------
        dict
            The resolved settings (a new dict: the defaults' order, then new keys).
        """
        names = self.setting_names()
        s = dict(defaults)
        for key, value in (given or {}).items():
            if key not in names:
                raise ValueError(f"unknown setting {key!r}{suggest(key, names)} for method {self.name}; "
                                 f"known: {', '.join(names)}")
            s[key] = value
        if derive is not None:
            derive(s)
        assert self.settings_class is not None
        fields = self.settings_class.__dataclass_fields__
        for key, value in s.items():
            fields[key].metadata["parse"](f"{self.name}.{key}", value)
        self.check_settings(s)
        return s

    def simulation_preset(self, params: dict) -> dict:
        """The simulation's defaults of a cell (before the user's settings).

        Parameters
        ----------
        params : dict
            Resolved cell parameters (``K``, ``schedule``).

        Returns
        -------
        dict
            The defaults, in the resolved order.
        """
        raise NotImplementedError

    @property
    def noise_stream(self) -> str:
        """Name that seeds the method's noise generator (its own name by default).

        Returns
        -------
        str
            The stream's name.
        """
        return self.name

    # -- simulation: settings from the cell's parameters, the pre-drawn noise
    def settings(self, params: dict) -> dict:
        """The method's settings (K, eta, ...) from resolved cell parameters: the cell's
        preset, the study's ``method_settings`` of the method, derived values; checked.

        Parameters
        ----------
        params : dict
            Cell parameters: ``K``, ``schedule`` and ``method_settings`` are read.

        Returns
        -------
        dict
            The settings, in the preset's order.
        """
        return self.resolve_settings(self.simulation_preset(params), _method_params(params, self.name),
                                     lambda s: self.derive_simulation(s, params))

    def derive_simulation(self, s: dict, params: dict) -> None:
        """Fill the simulation's derived settings of ``s`` in place (none by default).

        Parameters
        ----------
        s : dict
            The settings so far (defaults and the user's).
        params : dict
            Resolved cell parameters.
        """

    def derive_realdata(self, s: dict, given: dict) -> None:
        """Fill the real data's derived settings of ``s`` in place from the user's ``given``
        (none by default).

        Parameters
        ----------
        s : dict
            The settings so far (defaults and the user's).
        given : dict
            The user's settings of the method.
        """

    def realdata_settings(self, resolved: dict, given: dict | None) -> dict:
        """The method's real-data settings: its parent's resolved settings (``resolved``
        maps a name to them), its preset, the user's ``given``; derived values; checked.

        Parameters
        ----------
        resolved : dict
            The settings of the methods resolved so far (the parent among them).
        given : dict or None
            The user's settings of this method.

        Returns
        -------
        dict
            The settings (the parent's keys first, then the preset's).
        """
        parent = resolved[self.settings_parent] if self.settings_parent else {}
        defaults = {**parent, **self.presets.get(REALDATA, {})}
        return self.resolve_settings(defaults, given, lambda s: self.derive_realdata(s, given or {}))

    def noise_shapes(self, s: dict, m: int, d: int) -> dict[str, tuple]:
        """The standard-normal arrays one replicate draws, in draw order.

        Parameters
        ----------
        s : dict
            The method's settings.
        m : int
            Clients.
        d : int
            Parameter dimension.

        Returns
        -------
        dict
            Name -> shape.
        """
        raise NotImplementedError

    def draw_noise(self, rng: np.random.Generator, s: dict, m: int, d: int, private: bool) -> dict:
        """One replicate's noise, in the order of `noise_shapes` (None if non-private).

        Parameters
        ----------
        rng : numpy.random.Generator
            The replicate's noise generator.
        s : dict
            The method's settings.
        m : int
            Clients.
        d : int
            Parameter dimension.
        private : bool
            Whether the fit adds noise.

        Returns
        -------
        dict
            Name -> standard normals (or None).
        """
        return {k: (standard_normal(rng, shape) if private else None)
                for k, shape in self.noise_shapes(s, m, d).items()}

    # -- CNNs: settings from a run's settings (fedgdp.nn.settings.NNSettings)
    def cnn_preset(self, p: dict) -> dict:
        """The CNN preset: the method's settings from a run's settings ``p``, in the
        resolved order (compute-matched: every method makes ``rounds * local_epochs``
        gradient steps per drawn client; docs/methods.md §6).

        Parameters
        ----------
        p : dict
            Resolved CNN run settings (`fedgdp.nn.settings.NNSettings`).

        Returns
        -------
        dict
            The preset.
        """
        raise NotImplementedError

    def check_settings(self, s: dict) -> None:
        """Cross-field checks of resolved settings ``s`` (ValueError; none by default).

        Parameters
        ----------
        s : dict
            The settings, each value checked by its field.
        """

    def check_step_bound(self, be, steps, *, drift_rounds: int = 0, eta_g: float = 1.0) -> None:
        """Refuse a private GLM fit whose iterates could overflow, from public inputs only
        (the bound B, the noise sds, the settings; docs/methods.md §2, "No refusal depends
        on a record"): ValueError unless the largest entry any iterate can reach is at
        most `fedgdp.privacy.RELEASE_MAX`, so no later check can fail on some data and
        not on a neighbour. A clipped gradient's entries are at most B and a noise draw
        at most ``z = NOISE_BOUND`` sds; averaging with weights summing to one moves no
        entry beyond the largest. The CNN path has its own bound
        (`fedgdp.nn.settings.parameter_bound`).

        Parameters
        ----------
        be : Backend
            The backend of the fit (``data.plan_B``; skipped when not private or on CNNs).
        steps : list of (int, float, ndarray, bool)
            ``(count, eta, sigma, on_gradient)``: ``count`` steps of size ``eta`` with noise
            sd ``sigma`` added to the iterate (local steps) or, ``on_gradient``, to the
            gradient (server steps: moved by ``eta`` times it).
        drift_rounds : int
            DP-SCAFFOLD: the rounds of local steps corrected by ``c - c_i``; the control
            variates' bound ``a`` grows per round as ``a <- 4 a + (B + 2 a) + z sigma / eta``.
        eta_g : float
            DP-SCAFFOLD's server step on the averaged update.
        """
        datas = getattr(be, "fds", [be.data])             # the real-data backend: a fold per privacy level
        if be.kind == CNN or not any(getattr(d, "private", False) for d in datas):
            return
        B, z = max(float(np.max(np.asarray(d.plan_B, float))) for d in datas), privacy.NOISE_BOUND
        with np.errstate(over="ignore", invalid="ignore"):
            if not drift_rounds:
                top = 0.0
                for count, eta, sigma, on_gradient in steps:
                    sd = float(np.max(np.asarray(sigma, float)))
                    top += count * (eta * (B + z * sd) if on_gradient else eta * B + z * sd)
            else:
                count, eta, sigma, _ = steps[0]
                K, sd, a, top = count // drift_rounds, float(np.max(np.asarray(sigma, float))), 0.0, 0.0
                for _ in range(drift_rounds):
                    move = K * (eta * (B + 2 * a) + z * sd)          # a round's local movement, drift included
                    top += eta_g * move
                    a = 4 * a + move / (K * eta)
                top = max(top, a)
        settings = ", ".join(f"eta={eta:g}, steps={count}" for count, eta, _, _ in steps)
        privacy.check_release_bound(self.name, top, f"clip B={B:g}, {settings}, mu")

    def cnn_settings(self, p: dict) -> dict:
        """The method's settings on a CNN run ``p``: its `cnn_preset`, each value
        checked by its field, then `check_settings` (`resolve_settings`).

        Parameters
        ----------
        p : dict
            Resolved CNN run settings (`fedgdp.nn.settings.NNSettings`).

        Returns
        -------
        dict
            The method's settings.
        """
        return self.resolve_settings(self.cnn_preset(p), None)

    # -- every backend
    def rounds(self, s: dict) -> int:
        """Communication rounds of a fit.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        int
            The rounds.
        """
        raise NotImplementedError

    def comm(self, s: dict, m: int, dk: int) -> dict:
        """Communication of a fit (`comm_counts` at `rounds`).

        Parameters
        ----------
        s : dict
            The method's settings.
        m : int
            Clients.
        dk : int
            Floats of one parameter.

        Returns
        -------
        dict
            ``rounds``, ``floats_up``, ``floats_down``.
        """
        return comm_counts(self.rounds(s), m, dk, self.per_round)

    def release_count(self, be: Backend, s: dict) -> int:
        """Releases each client makes: the sum of the counts of the method's plan (the
        one statement of them; the data a plan reads is ``be.data``, or the backend itself
        for the CNNs').

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings.

        Returns
        -------
        int
            The number of releases (e.g. ``R K`` for FedAvg, ``K + 1`` for FedNewton).
        """
        return sum(int(spec.count) for spec in self.plan(getattr(be, "data", be), s))

    def weights(self, be: Backend, s: dict):
        """The aggregation weights of the fit (``be.weights`` at `release_count`).

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings.

        Returns
        -------
        ndarray
            Weights (b, m) or (m,), rows summing to one.
        """
        return be.weights(releases=self.release_count(be, s))

    def plan(self, data, s: dict) -> tuple:
        """The releases (`fedgdp.privacy.ReleaseSpec`) on ``data``.

        Parameters
        ----------
        data : object
            A backend's data: ``plan_B``, ``plan_n`` broadcastable to (b, m), ``plan_halves()``,
            ``tau1``, ``privacy``.
        s : dict
            The method's settings.

        Returns
        -------
        tuple of fedgdp.privacy.ReleaseSpec
            The plan: every release each client makes, with its count and sensitivity.
        """
        raise NotImplementedError

    def run(self, be: Backend, s: dict) -> list[Fit]:
        """The algorithm on backend ``be``; one `Fit` per privacy level.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings.

        Returns
        -------
        list of Fit
            One fit per privacy level.
        """
        raise NotImplementedError

    def fit(self, data, s: dict, noise) -> Fit:
        """Fit on ``data`` with its noise.

        Parameters
        ----------
        data : object
            `fedgdp.simulation.backend.FitData` (with pre-drawn noise arrays) or
            `fedgdp.realdata.FoldData` (with a generator or None).
        s : dict
            The method's settings.
        noise : dict or numpy.random.Generator or None
            The pre-drawn arrays, or the generator (None: non-private).

        Returns
        -------
        Fit
            The fit (ValueError when a private release is not finite).
        """
        self.check_backend(data.kind)
        return check_finite_release(self.name, data, self.run(data.backend(noise), s))[0]

    def fit_many(self, data: list, s: dict, noises: list) -> list[Fit]:
        """`fit` at J privacy levels on the same data, each with its noise; one
        pass over stacked parameters when the method and the backend allow it.

        Parameters
        ----------
        data : list
            J data objects on the same clients (one per mu).
        s : dict
            The method's settings.
        noises : list
            One noise source per level.

        Returns
        -------
        list of Fit
            One fit per level.
        """
        self.check_backend(data[0].kind)
        if self.stacks_levels:
            be = data[0].stacked_backend(data, noises)
            if be is not None:
                return check_finite_release(self.name, data[0], self.run(be, s))
        return [self.fit(d, s, z) for d, z in zip(data, noises)]

    def privacy_modes(self) -> tuple[str, ...]:
        """The privacy modes in which the method's releases differ (``paper`` only, unless
        the mode changes them: FedNewton).

        Returns
        -------
        tuple of str
            ``("paper",)`` or ``("paper", "certified")``.
        """
        return ("paper",)

    def check_backend(self, kind: str) -> None:
        """ValueError unless the method runs on backend ``kind``.

        Parameters
        ----------
        kind : str
            ``simulation``, ``realdata`` or ``nn``.
        """
        if kind not in self.backends:
            raise ValueError(f"method {self.name!r} does not run on {kind} data; "
                             f"it runs on {', '.join(sorted(self.backends))}")


def check_finite_release(name: str, data, fits: list) -> list:
    """``fits``, or ValueError when a private fit's estimate is not finite: a release
    that is not finite is an error, never an output (docs/methods.md §2, "Finite
    arithmetic"; every clipped per-sample quantity is finite by construction, so this
    fires only on a bug or an uncertified step, e.g. the paper's unclipped Hessian on
    rows of huge entries). Non-private fits may diverge: their rows are flagged. A fit's
    ``theta`` is an array, or a network's parameters ``name -> tensor`` (a CNN: one
    non-finite parameter is an error).

    Parameters
    ----------
    name : str
        The method (for the message).
    data : object
        The fit's data (its ``private`` flag is read).
    fits : list of Fit
        The fits.

    Returns
    -------
    list of Fit
        ``fits``.
    """
    if getattr(data, "private", False):
        for f in fits:
            if not _all_finite(f.theta):
                raise ValueError(f"method {name}: a private release is not finite (NaN or inf); nothing is "
                                 "released")
    return fits


def _all_finite(theta) -> bool:
    """Whether every entry of an estimate is finite: an array, or a network's parameter
    dict ``name -> tensor`` (the CNN backend's)."""
    if isinstance(theta, dict):
        return all(bool(v.isfinite().all()) for v in theta.values())
    return bool(np.isfinite(theta).all())


class FedSGD(Method):
    name, label, algorithm = "fedsgd", "FedSGD", "Algorithm 1"
    theory_bound, tested_release = "fedsgd", "gradient"

    backends = GRADIENT_METHODS
    settings_class = StepSettings
    presets = {REALDATA: {"K": 50, "eta": 0.5}}

    def simulation_preset(self, params):
        """The simulation's defaults: the cell's ``K`` and ``eta = 0.5``.

        Parameters
        ----------
        params : dict
            Resolved cell parameters (``K`` is read).

        Returns
        -------
        dict
            ``K``, ``eta``.
        """
        return {"K": params["K"], "eta": 0.5}

    def cnn_preset(self, p):
        """The preset on a CNN run: ``K = rounds * local_epochs`` server steps of size ``lr``.

        Parameters
        ----------
        p : dict
            Resolved CNN run settings (``rounds``, ``local_epochs``, ``lr``).

        Returns
        -------
        dict
            ``K``, ``eta``.
        """
        return {"K": p["rounds"] * p["local_epochs"], "eta": p["lr"]}

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z`` of shape (K, m, d), one draw per step and client.

        Parameters
        ----------
        s : dict
            The method's settings (``K``).
        m : int
            Clients.
        d : int
            Parameter dimension.

        Returns
        -------
        dict
            ``{"Z": (K, m, d)}``.
        """
        return {"Z": (s["K"], m, d)}

    def rounds(self, s):
        """Communication rounds: one per server step, ``K``.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        int
            ``K``.
        """
        return s["K"]

    def plan(self, data, s):
        """The releases of Algorithm 1 (`fedgdp.privacy.plan_fedsgd`): K clipped gradients per client.

        Parameters
        ----------
        data : object
            A backend's data (``plan_B``, ``plan_n``).
        s : dict
            The method's settings (``K``).

        Returns
        -------
        tuple of fedgdp.privacy.ReleaseSpec
            The plan.
        """
        return privacy.plan_fedsgd(B=data.plan_B, n=data.plan_n, K=s["K"])

    def run(self, be, s):
        """Algorithm 1: K server steps from `Backend.start` on the weighted noisy clipped gradients.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings (``K``, ``eta``).

        Returns
        -------
        list of Fit
            One fit per privacy level.
        """
        (sigma,), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(s["K"], s["eta"], sigma, True)])
        w = self.weights(be, s)
        theta = be.server_steps(be.start(), w, K=s["K"], eta=s["eta"], sigma=sigma, noise=be.noise.take("Z"))
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))


class FedAvg(Method):
    name, label, algorithm = "fedavg", "FedAvg", "Algorithm 3"
    theory_bound, tested_release = "fedavg", "local step"
    backends = GRADIENT_METHODS

    def cnn_preset(self, p):
        """The preset on a CNN run: ``R = rounds`` rounds of ``K = local_epochs`` local steps of size ``lr``.

        Parameters
        ----------
        p : dict
            Resolved CNN run settings (``rounds``, ``local_epochs``, ``lr``).

        Returns
        -------
        dict
            ``R``, ``K``, ``eta``.
        """
        return {"R": p["rounds"], "K": p["local_epochs"], "eta": p["lr"]}

    settings_class = RoundSettings
    presets = {REALDATA: {"R": 2, "K": 50, "eta": 0.5}}

    def simulation_preset(self, params):
        """The simulation's defaults: ``R = 2``, ``eta = 0.5`` (K is derived: `derive_simulation`).

        Parameters
        ----------
        params : dict
            Resolved cell parameters (unused).

        Returns
        -------
        dict
            ``R``, ``eta``.
        """
        return {"R": 2, "eta": 0.5}

    def derive_simulation(self, s, params):
        """Fill ``K`` unless given: the cell's K (schedule ``paper``), else ``ceil(K / R)`` (at least 1).

        Parameters
        ----------
        s : dict
            The settings so far (``R`` is read; ``K`` is set in place).
        params : dict
            Resolved cell parameters (``K``, ``schedule``).
        """
        if "K" not in s:
            s["K"] = params["K"] if params["schedule"] == "paper" else max(1, -(-params["K"] // s["R"]))

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z`` of shape (R, K, m, d), one draw per round, step and client.

        Parameters
        ----------
        s : dict
            The method's settings (``R``, ``K``).
        m : int
            Clients.
        d : int
            Parameter dimension.

        Returns
        -------
        dict
            ``{"Z": (R, K, m, d)}``.
        """
        return {"Z": (s["R"], s["K"], m, d)}

    def rounds(self, s):
        """Communication rounds: ``R``.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        int
            ``R``.
        """
        return s["R"]

    def plan(self, data, s):
        """The releases of Algorithm 3 (`fedgdp.privacy.plan_fedavg`): R K noisy local iterates per client.

        Parameters
        ----------
        data : object
            A backend's data (``plan_B``, ``plan_n``).
        s : dict
            The method's settings (``eta``, ``R``, ``K``).

        Returns
        -------
        tuple of fedgdp.privacy.ReleaseSpec
            The plan.
        """
        return privacy.plan_fedavg(B=data.plan_B, n=data.plan_n, eta=s["eta"], R=s["R"], K=s["K"])

    def run(self, be, s):
        """Algorithm 3: R rounds of K noisy local steps from the global parameter, each averaged with the weights.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings (``R``, ``K``, ``eta``).

        Returns
        -------
        list of Fit
            One fit per privacy level.
        """
        (sigma,), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(s["R"] * s["K"], s["eta"], sigma, False)])
        w = self.weights(be, s)
        theta = be.start()
        for r in range(s["R"]):
            local = be.local_steps(theta, K=s["K"], eta=s["eta"], sigma=sigma, noise=be.noise.take("Z", r))
            theta = be.average(w, local)
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))


class FedHybrid(Method):
    """Algorithm 2 of the paper (noisy local steps, averaged, then FedSGD steps); not the
    first/second-order "FedHybrid" of Niu & Wei (IEEE TSP 2023).

    Stage 1 is ``R1`` rounds of ``K1`` local steps (``R1 = 1`` unless set: the paper's
    single averaging); stage 2 is ``K2`` server steps. ``share1`` of the steps go to
    stage 1: ``split(total, share1)`` (the simulations split K; the CNNs split their
    rounds R, each of ``local_epochs`` steps).
    """

    name, label, algorithm = "fedhybrid", "FedHybrid", "Algorithm 2"
    theory_bound, tested_release = "fedhybrid", "gradient"
    backends = GRADIENT_METHODS
    SHARE1 = 0.6              # stage 1's share of the steps (docs/methods.md §3: K1 = 30 of 50)

    @staticmethod
    def split(total: int, share: float) -> int:
        """Stage 1's part of ``total``: ``round(share * total)`` (half to even).

        Parameters
        ----------
        total : int
            The steps (or rounds) to split.
        share : float
            Stage 1's share.

        Returns
        -------
        int
            Stage 1's part.
        """
        return int(round(share * total))

    settings_class = HybridSettings
    presets = {REALDATA: {"K1": 30, "eta1": 0.5, "K2": 20, "eta2": 0.5}}

    def simulation_preset(self, params):
        """The simulation's defaults: ``eta1 = eta2 = 0.5`` and ``share1`` (K1, K2: `derive_simulation`).

        Parameters
        ----------
        params : dict
            Resolved cell parameters (unused).

        Returns
        -------
        dict
            ``eta1``, ``eta2``, ``share1``.
        """
        return {"eta1": 0.5, "eta2": 0.5, "share1": self.SHARE1}

    def derive_simulation(self, s, params):
        """Fill ``K1 = split(K, share1)`` and ``K2 = K - K1`` unless given (K: the cell's).

        Parameters
        ----------
        s : dict
            The settings so far (``share1`` is read; ``K1``, ``K2`` are set in place).
        params : dict
            Resolved cell parameters (``K``).
        """
        if s.get("R1", 1) != 1:              # its noise is drawn for one stage-1 round (noise_shapes)
            raise ValueError(f"fedhybrid.R1: the simulation runs one stage-1 round, got fedhybrid.R1={s['R1']!r}")
        if "K1" not in s:
            s["K1"] = self.split(params["K"], s["share1"])
        if "K2" not in s:
            s["K2"] = params["K"] - s["K1"]

    def derive_realdata(self, s, given):
        """When ``share1`` is given, split the preset's ``K1 + K2`` steps by it (K1, K2 not given are set).

        Parameters
        ----------
        s : dict
            The settings so far (set in place).
        given : dict
            The user's settings of the method.
        """
        if "share1" in given:                # split the preset's K1 + K2 steps by the given share
            total = self.presets[REALDATA]["K1"] + self.presets[REALDATA]["K2"]
            if "K1" not in given:
                s["K1"] = self.split(total, s["share1"])
            if "K2" not in given:
                s["K2"] = total - s["K1"]

    def cnn_preset(self, p):
        """The preset on a CNN run: ``R1 = split(rounds, hybrid_local_share)`` rounds of ``K1 = local_epochs``
        local steps, then ``K2 = (rounds - R1) local_epochs`` server steps, both of size ``lr``.

        Parameters
        ----------
        p : dict
            Resolved CNN run settings (``rounds``, ``local_epochs``, ``hybrid_local_share``, ``lr``).

        Returns
        -------
        dict
            ``R1``, ``K1``, ``K2``, ``eta1``, ``eta2``.
        """
        R, K = p["rounds"], p["local_epochs"]
        R1 = self.split(R, p["hybrid_local_share"])
        return {"R1": R1, "K1": K, "K2": (R - R1) * K, "eta1": p["lr"], "eta2": p["lr"]}

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z1`` (K1, m, d) for stage 1, ``Z2`` (K2, m, d) for stage 2.

        Parameters
        ----------
        s : dict
            The method's settings (``K1``, ``K2``).
        m : int
            Clients.
        d : int
            Parameter dimension.

        Returns
        -------
        dict
            ``{"Z1": (K1, m, d), "Z2": (K2, m, d)}``.
        """
        return {"Z1": (s["K1"], m, d), "Z2": (s["K2"], m, d)}

    def local_step_size(self, s):
        """Stage 1's step size ``eta1`` (its ``local step`` release).

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        float
            ``s["eta1"]``.
        """
        return s["eta1"]

    @staticmethod
    def stage1_rounds(s: dict) -> int:
        """Stage 1's rounds ``R1``: 1 (the paper's single averaging) unless the settings set it.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        int
            ``R1``.
        """
        return int(s.get("R1", 1))

    def rounds(self, s):
        """Communication rounds: ``R1 + K2``.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        int
            ``R1 + K2``.
        """
        return self.stage1_rounds(s) + s["K2"]

    def plan(self, data, s):
        """The releases of Algorithm 2 (`fedgdp.privacy.plan_fedhybrid`): ``R1 K1`` local iterates, then K2
        clipped gradients per client.

        Parameters
        ----------
        data : object
            A backend's data (``plan_B``, ``plan_n``).
        s : dict
            The method's settings (``eta1``, ``K1``, ``K2``, optional ``R1``).

        Returns
        -------
        tuple of fedgdp.privacy.ReleaseSpec
            The plan.
        """
        return privacy.plan_fedhybrid(B=data.plan_B, n=data.plan_n, eta1=s["eta1"], K1=self.stage1_rounds(s) * s["K1"],
                                      K2=s["K2"])

    def run(self, be, s):
        """Algorithm 2: R1 rounds of K1 noisy local steps, each averaged, then K2 FedSGD server steps.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings (``K1``, ``eta1``, ``K2``, ``eta2``, optional ``R1``).

        Returns
        -------
        list of Fit
            One fit per privacy level.
        """
        (a1, a2), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(self.stage1_rounds(s) * s["K1"], s["eta1"], a1, False),
                                   (s["K2"], s["eta2"], a2, True)])
        w = self.weights(be, s)
        theta = be.start()
        for _ in range(self.stage1_rounds(s)):
            local = be.local_steps(theta, K=s["K1"], eta=s["eta1"], sigma=a1, noise=be.noise.take("Z1"))
            theta = be.average(w, local)
        theta = be.server_steps(theta, w, K=s["K2"], eta=s["eta2"], sigma=a2, noise=be.noise.take("Z2"))
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))


class FedNewton(Method):
    """Algorithm 4. In privacy mode ``paper`` as printed (eigenvalue floor, the Newton
    release calibrated on ``8B/(tau1 n)``, uncertified); in mode ``certified`` with
    clipped per-sample Hessians and the ridge solve (`fedgdp.privacy.plan_fednewton`).

    Stage 1 is kept by backends that keep results (the simulation's block) and reused
    by the other FedNewton variant when every input is equal (checked, not assumed):
    both draw the same noise (common random numbers).
    """

    name, label, algorithm = "fednewton", "FedNewton", "Algorithm 4"
    always_certified = False
    halves = True             # stage 1 and the Hessian on half 1, the Newton gradient on half 2
    solves_newton = True
    # Theorem 3.9 (for the certified variant too: it assumes per-sample Hessians bounded
    # as the clipping enforces, where the clip changes nothing)
    theory_bound = "fednewton"
    certified_alternatives = "privacy_mode='certified' or method='fednewton_certified'"
    tested_release = "newton"
    stacks_levels = False     # the real-data fits run level by level
    settings_class = StepSettings
    presets = {REALDATA: {"K": 50, "eta": 0.5}}

    def simulation_preset(self, params):
        """The simulation's defaults: the cell's ``K`` and ``eta = 0.5``.

        Parameters
        ----------
        params : dict
            Resolved cell parameters (``K`` is read).

        Returns
        -------
        dict
            ``K``, ``eta``.
        """
        return {"K": params["K"], "eta": 0.5}

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z1`` (K, m, d) for the stage-1 local steps, ``Z2`` (m, d) for the Newton release.

        Parameters
        ----------
        s : dict
            The method's settings (``K``).
        m : int
            Clients.
        d : int
            Parameter dimension.

        Returns
        -------
        dict
            ``{"Z1": (K, m, d), "Z2": (m, d)}``.
        """
        return {"Z1": (s["K"], m, d), "Z2": (m, d)}

    def rounds(self, s):
        """Communication rounds: 2 (stage 1's average, then the Newton step).

        Parameters
        ----------
        s : dict
            The method's settings (unused).

        Returns
        -------
        int
            2.
        """
        return 2

    def privacy_modes(self) -> tuple[str, ...]:
        """Both modes, unless certified in every mode (`FedNewtonCertified`).

        Returns
        -------
        tuple of str
            ``("paper", "certified")``, or ``("paper",)``.
        """
        return ("paper",) if self.always_certified else ("paper", "certified")

    def certified(self, data) -> bool:
        """Whether the fit on ``data`` is certified (always, or privacy mode ``certified``).

        Parameters
        ----------
        data : object
            A backend's data (its ``privacy`` dict is read).

        Returns
        -------
        bool
            True when certified.
        """
        return self.always_certified or data.privacy.get("mode", "paper") == "certified"

    def hessian_bound(self, data) -> float | None:
        """The per-sample Hessian clip ``H_c = hessian_clip * tau1`` (certified), else None.

        Parameters
        ----------
        data : object
            A backend's data (``privacy["hessian_clip"]``, ``tau1``).

        Returns
        -------
        float or None
            ``H_c``, or None (the paper's eigenvalue floor).
        """
        return float(data.privacy["hessian_clip"]) * data.tau1 if self.certified(data) else None

    def plan(self, data, s):
        """The releases of Algorithm 4 (`fedgdp.privacy.plan_fednewton`): K local iterates on half 1, then
        one Newton release.

        Parameters
        ----------
        data : object
            A backend's data (``plan_B``, ``plan_halves()``, ``tau1``, ``privacy``, ``solve_tol``).
        s : dict
            The method's settings (``eta``, ``K``).

        Returns
        -------
        tuple of fedgdp.privacy.ReleaseSpec
            The plan.
        """
        n1, n2 = data.plan_halves()
        bound = self.hessian_bound(data)
        return privacy.plan_fednewton(B=data.plan_B, n1=n1, n2=n2, eta=s["eta"], K=s["K"], tau1=data.tau1,
                                      hessian_bound=bound, solve_tol=0.0 if bound is None else data.solve_tol)

    def check_release_bound(self, data, s, s1, s2) -> None:
        """Refuse a certified fit whose releases could overflow, from public inputs only
        (docs/methods.md §2, "The certified solve"): every entry of a client's stage-1
        iterate is at most ``K (eta B + z s1)`` (a clipped gradient has norm <= B, a noise
        draw at most ``z = NOISE_BOUND``), of the step ``s`` at most ``B / tau1``
        (``||(H + tau1 I)^{-1}|| <= 1/tau1``) and of the Newton release at most their sum
        plus ``z s2``; the Hessian's entries are at most ``(1 + hessian_clip) tau1``. Both
        must be at most `fedgdp.privacy.RELEASE_MAX`.

        Parameters
        ----------
        data : object
            A backend's data (``plan_B``, ``tau1``, ``privacy``).
        s : dict
            The method's settings (``K``, ``eta``).
        s1, s2 : ndarray
            The noise sds of the local steps and of the Newton release.
        """
        B, tau1, z = np.asarray(data.plan_B, float), float(data.tau1), privacy.NOISE_BOUND
        with np.errstate(over="ignore", invalid="ignore"):
            bound = s["K"] * (s["eta"] * B + z * np.asarray(s1)) + B / tau1 + z * np.asarray(s2)
            bound = np.maximum(np.max(bound), (1.0 + float(data.privacy["hessian_clip"])) * tau1)
        privacy.check_release_bound(self.name, bound, f"clip B={float(np.max(B)):g}, tau1={tau1:g}, "
                                                      f"K={s['K']}, eta={s['eta']:g}, mu, hessian_clip")

    def newton_update(self, be: Backend, theta1: np.ndarray) -> np.ndarray:
        """Every client's pre-noise Newton release ``theta1 - s`` (b, m, P).

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        theta1 : ndarray of shape (b, P)
            The stage-1 global parameter.

        Returns
        -------
        ndarray of shape (b, m, P)
            The releases before noise.
        """
        return be.newton_release(theta1, hessian_bound=self.hessian_bound(be.data))

    def run(self, be, s):
        """Algorithm 4: FedAvg (R = 1, K local steps on half 1), then every client's noisy Newton release, averaged.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings (``K``, ``eta``).

        Returns
        -------
        list of Fit
            One fit per privacy level (ValueError when a private Newton release is not finite).
        """
        K, eta = s["K"], s["eta"]
        (s1, s2), ledgers = be.calibrate(self, s)
        if be.data.private and self.certified(be.data):
            self.check_release_bound(be.data, s, s1, s2)
        w = self.weights(be, s)
        Z1 = be.noise.take("Z1")
        theta1 = be.memo("_newton_stage1", (K, eta, w, s1, Z1), lambda: be.average(
            w, be.local_steps(be.start(), K=K, eta=eta, sigma=s1, noise=Z1, part="half1")))
        step = self.newton_update(be, theta1)
        if be.data.private and not np.isfinite(step).all():
            raise ValueError(f"method {self.name}: the Newton release is not finite (NaN or inf); nothing is "
                             "released")
        local = be.add_noise(step, s2, be.noise.take("Z2"))
        return be.finish(be.average(w, local), ledgers, self.comm(s, be.m, be.dk))


class FedNewtonCertified(FedNewton):
    """Certified FedNewton in every privacy mode, on FedNewton's noise stream (common
    random numbers: the two differ only in the Newton step and its calibration)."""

    name, label, algorithm = "fednewton_certified", "FedNewton (certified)", "Algorithm 4, certified"
    always_certified = True
    presets = {REALDATA: {}}
    settings_parent = "fednewton"          # FedNewton's settings, the user's included

    @property
    def noise_stream(self) -> str:
        return "fednewton"


class FedNewtonIter(Method):
    """Algorithm 5 (paper section 3.7) for a network: ``cycles`` times, ``R / cycles``
    FedAvg rounds, then one round in which every drawn client releases a noisy
    head-only Newton step ``head - alpha (h + lambda I)^{-1} gbar`` of the last layer
    (clipped per-sample head gradients, empirical Fisher ``h``; calibration
    `fedgdp.privacy.plan_fednewton_iter`)."""

    name, label, algorithm = "fednewton_iter", "FedNewton-Iter", "Algorithm 5"
    backends = frozenset({CNN})
    settings_class = IterSettings

    def check_settings(self, s):
        """Refuse ``rounds`` that are not a multiple of ``newton_cycles``.

        Parameters
        ----------
        s : dict
            The resolved settings (``R``, ``cycles``).
        """
        if s["R"] % s["cycles"]:
            raise ValueError(f"rounds must be a multiple of newton_cycles, got rounds={s['R']}, "
                             f"newton_cycles={s['cycles']}")

    def cnn_preset(self, p):
        """The preset on a CNN run: ``R = rounds`` FedAvg rounds of ``K = local_epochs`` steps of size ``lr``,
        ``cycles = newton_cycles`` head-Newton rounds, ``ridge`` and ``damping``.

        Parameters
        ----------
        p : dict
            Resolved CNN run settings.

        Returns
        -------
        dict
            ``R``, ``K``, ``eta``, ``cycles``, ``ridge``, ``damping``.
        """
        return {"R": p["rounds"], "K": p["local_epochs"], "eta": p["lr"], "cycles": p["newton_cycles"],
                "ridge": p["ridge"], "damping": p["damping"]}

    def rounds(self, s):
        """Communication rounds: ``R + cycles``.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        int
            ``R + cycles``.
        """
        return s["R"] + s["cycles"]

    def plan(self, data, s):
        """The releases of Algorithm 5 (`fedgdp.privacy.plan_fednewton_iter`).

        Parameters
        ----------
        data : object
            The data the plan reads (``plan_B``, ``plan_n``; the CNN backend itself).
        s : dict
            The method's settings (``eta``, ``R``, ``K``, ``cycles``, ``ridge``, ``damping``).

        Returns
        -------
        tuple of fedgdp.privacy.ReleaseSpec
            The plan.
        """
        return privacy.plan_fednewton_iter(B=data.plan_B, n=data.plan_n, eta=s["eta"], R=s["R"], K=s["K"],
                                           cycles=s["cycles"], ridge=s["ridge"], damping=s["damping"])

    def run(self, be, s):
        """Algorithm 5: ``cycles`` times, ``R / cycles`` FedAvg rounds, then one noisy head-only Newton round.

        Parameters
        ----------
        be : Backend
            The backend of the fit (the CNNs': ``head_newton_release``).
        s : dict
            The method's settings (ValueError unless ``R`` is a multiple of ``cycles``).

        Returns
        -------
        list of Fit
            One fit per privacy level.
        """
        R, K, C = s["R"], s["K"], s["cycles"]
        self.check_settings(s)
        (sigma1, sigma2), ledgers = be.calibrate(self, s)
        w = self.weights(be, s)
        theta = be.start()
        for _ in range(C):
            for _ in range(R // C):
                theta = be.average(w, be.local_steps(theta, K=K, eta=s["eta"], sigma=sigma1,
                                                     noise=be.noise.take("Z1")))
            step = be.head_newton_release(theta, ridge=s["ridge"], damping=s["damping"])
            theta = be.average(w, be.add_noise(step, sigma2, be.noise.take("Z2")))
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))


class DPScaffold(Method):
    """SCAFFOLD (option II) with FedAvg's noise: each local step is ``y <- y - eta
    (clip-grad_i(y) - c_i + c) + sigma Z``; ``c_i+ = c_i - c + (theta - y_K)/(K eta)``.
    The control variates are computed from released iterates only (post-processing),
    so the ledger is FedAvg's."""

    name, label, algorithm = "dp_scaffold", "DP-SCAFFOLD", "SCAFFOLD + Algorithm 3 noise"
    backends = frozenset({REALDATA})
    per_round = 2             # the update and the control variate
    drifts = True             # local steps corrected by c - c_i
    settings_class = ScaffoldSettings
    presets = {REALDATA: {"eta_g": 1.0}}
    settings_parent = "fedavg"             # FedAvg's schedule (so FedAvg's noise), plus eta_g

    def rounds(self, s):
        """Communication rounds: ``R``.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        int
            ``R``.
        """
        return s["R"]

    def plan(self, data, s):   # FedAvg's releases: the control variates are post-processing
        """FedAvg's releases (`fedgdp.privacy.plan_fedavg`): the control variates are post-processing.

        Parameters
        ----------
        data : object
            A backend's data (``plan_B``, ``plan_n``).
        s : dict
            The method's settings (``eta``, ``R``, ``K``).

        Returns
        -------
        tuple of fedgdp.privacy.ReleaseSpec
            The plan.
        """
        return privacy.plan_fedavg(B=data.plan_B, n=data.plan_n, eta=s["eta"], R=s["R"], K=s["K"])

    def run(self, be, s):
        """SCAFFOLD (option II): R rounds of K noisy local steps with drift ``c - c_i``, a server step ``eta_g``.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : dict
            The method's settings (``R``, ``K``, ``eta``, ``eta_g``).

        Returns
        -------
        list of Fit
            One fit per privacy level.
        """
        rounds, K, eta = s["R"], s["K"], s["eta"]
        (sigma,), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(rounds * K, eta, sigma, False)], drift_rounds=rounds, eta_g=s["eta_g"])
        w = self.weights(be, s)
        theta, c = be.start(), be.zeros()
        ci = np.zeros(theta.shape[:1] + (be.m,) + theta.shape[1:])
        for r in range(rounds):
            y = be.local_steps(theta, K=K, eta=eta, sigma=sigma, noise=be.noise.take("Z", r),
                               drift=c[:, None] - ci)
            ci_new = ci - c[:, None] + (theta[:, None] - y) / (K * eta)
            dy, dc = be.average(w, y - theta[:, None]), be.average(w, ci_new - ci)
            ci = ci_new
            theta = theta + s["eta_g"] * dy
            c = c + dc
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))


class NonPrivate(Method):
    """A private method at mu = inf (no clipping, no noise), under its own name."""

    private = False
    stacks_levels = False

    def __init__(self, base: Method, name: str, label: str, algorithm: str):
        self.base, self.name, self.label, self.algorithm = base, name, label, algorithm
        self.backends = base.backends & {REALDATA}
        self.settings_class, self.settings_parent = base.settings_class, base.name
        self.halves, self.drifts = base.halves, base.drifts
        self.presets = {REALDATA: {}}

    def comm(self, s, m, dk):
        """The base method's communication.

        Parameters
        ----------
        s : dict
            The method's settings.
        m : int
            Clients.
        dk : int
            Floats of one parameter.

        Returns
        -------
        dict
            ``rounds``, ``floats_up``, ``floats_down``.
        """
        return self.base.comm(s, m, dk)

    def local_step_size(self, s):
        """The base method's local step size.

        Parameters
        ----------
        s : dict
            The method's settings.

        Returns
        -------
        float
            As `Method.local_step_size` of the base method.
        """
        return self.base.local_step_size(s)

    def fit(self, data, s, noise):
        """The base method's fit without noise (ValueError when ``data`` is private).

        Parameters
        ----------
        data : object
            The fit's data (must be non-private).
        s : dict
            The method's settings.
        noise : object
            Ignored (the base fits with None).

        Returns
        -------
        Fit
            The fit.
        """
        if data.private:
            raise ValueError(f"{self.name} is non-private; got mu={data.mu}")
        self.check_backend(data.kind)
        return self.base.fit(data, s, None)


class NPLocalFit(Method):
    """Every client fits alone: the ridge MLE on its own training data."""

    name, label, algorithm, private = "np_localfit", "NP-LocalFit", "ridge MLE per client", False
    backends, stacks_levels = frozenset({REALDATA}), False
    per_client = True
    settings_class = RidgeSettings
    presets = {REALDATA: {"ridge": 1.0e-3, "maxiter": 200, "gtol": 1.0e-8}}

    def run(self, be, s):
        """Every client's own ridge MLE (``be.ridge_fit_clients``); no releases, no rounds.

        Parameters
        ----------
        be : Backend
            The real-data backend.
        s : dict
            The method's settings (``ridge``, ``maxiter``, ``gtol``).

        Returns
        -------
        list of Fit
            One fit, ``local``: theta of shape (m, d, k).
        """
        theta = be.ridge_fit_clients(s)
        return [Fit(theta, privacy.Ledger(), rounds=0, floats_up=0, floats_down=0, local=self.per_client)]


class NPPooled(Method):
    """One ridge MLE on the pooled data (not federated: the raw data go to the server once)."""

    name, label, algorithm, private = "np_pooled", "NP-Pooled", "pooled ridge MLE", False
    backends, stacks_levels = frozenset({REALDATA}), False
    settings_class = RidgeSettings
    presets = {REALDATA: {"ridge": 1.0e-3, "maxiter": 200, "gtol": 1.0e-8}}

    def run(self, be, s):
        """One ridge MLE on the pooled data (``be.ridge_fit_pooled``): one round, the data's floats uploaded.

        Parameters
        ----------
        be : Backend
            The real-data backend.
        s : dict
            The method's settings (``ridge``, ``maxiter``, ``gtol``).

        Returns
        -------
        list of Fit
            One fit: theta of shape (d, k).
        """
        theta, uploaded = be.ridge_fit_pooled(s)
        return [Fit(theta, privacy.Ledger(), rounds=1, floats_up=uploaded, floats_down=0)]


_SCAFFOLD, _FEDAVG = DPScaffold(), FedAvg()

#: Every method, by name. A backend's methods: `registry`.
REGISTRY: dict[str, Method] = {M.name: M for M in (
    FedSGD(), _FEDAVG, FedHybrid(), FedNewton(), FedNewtonCertified(), FedNewtonIter(), _SCAFFOLD,
    NonPrivate(_SCAFFOLD, "np_scaffold", "NP-SCAFFOLD", "SCAFFOLD"),
    NonPrivate(_FEDAVG, "np_fedavg", "NP-FedAvg", "Algorithm 3, mu = inf"),
    NPLocalFit(), NPPooled())}


class RegistryView(Mapping):
    """The methods of `REGISTRY` that run on one backend, in registry order; a
    live, read-only view (a method registered later appears in it)."""

    def __init__(self, kind: str | None):
        self.kind = kind

    def _methods(self) -> dict[str, Method]:
        return {name: m for name, m in REGISTRY.items() if self.kind is None or self.kind in m.backends}

    def __getitem__(self, name: str) -> Method:
        return self._methods()[name]

    def __iter__(self):
        return iter(self._methods())

    def __len__(self) -> int:
        return len(self._methods())


def registry(kind: str | None = None) -> RegistryView:
    """The methods that run on backend ``kind`` (all when None), in registry order.

    Parameters
    ----------
    kind : str or None
        ``simulation``, ``realdata``, ``nn``, or None.

    Returns
    -------
    RegistryView
        A live, read-only view of `REGISTRY`.
    """
    return RegistryView(kind)


def get_method(name: str, kind: str | None = None) -> Method:
    """Look up a method (that runs on backend ``kind``); ValueError naming the bad value.

    Parameters
    ----------
    name : str
        The method's name.
    kind : str or None
        The backend it must run on (None: any).

    Returns
    -------
    Method
        The registered method.
    """
    methods = registry(kind)._methods()
    if name not in methods:
        what = {None: "", SIMULATION: "", REALDATA: "real-data ", CNN: "CNN "}[kind]
        raise ValueError(f"unknown {what}method {name!r}; choose from {', '.join(methods)}")
    return methods[name]
