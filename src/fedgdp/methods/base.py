"""The base of every method: `Method`, the `Backend` protocol it is written against,
`Fit`, and the two noise sources (`PreDrawnNoise`, `StreamNoise`).

Backends: the simulation's (`fedgdp.simulation.backend.SimBackend`, noise pre-drawn per
replicate), the real data's (`fedgdp.realdata.backend.RealBackend`, J privacy levels
stacked, noise drawn in the computation's order) and the CNNs'
(`fedgdp.nn.backend.TorchBackend`). A method's ``tags.backends`` names the ones it runs on.

Arrays carry a leading batch axis ``b`` (replicates, or privacy levels): global
parameters ``(b, P)``, per-client ``(b, m, P)``, noise sds ``(b, m)``; P is ``d`` or
``d, k``, and ``dk`` the floats of one parameter (docs/ARCHITECTURE.md, "Array conventions").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..core import privacy
from ..core.normals import standard_normal
from ..core.settings import suggest
from .settings import MethodSettings

SIMULATION, REALDATA, CNN = "simulation", "realdata", "nn"
BOTH = frozenset({SIMULATION, REALDATA})
GRADIENT_METHODS = BOTH | {CNN}       # FedSGD, FedAvg, FedHybrid also train the CNNs

# ------------------------------------------------------------------------ noise
class PreDrawnNoise:
    """Noise drawn before the fit (simulation): one standard-normal array per name, replicate
    axis first (shapes: `Method.noise_shapes`); None values when non-private.
    """

    def __init__(self, arrays: dict):
        self.arrays = arrays

    def take(self, name: str, *index):
        """The pre-drawn array ``name`` (None when non-private), indexed after the replicate axis.

        Parameters
        ----------
        name : str
            A key of `Method.noise_shapes`.
        *index : int
            Indices after the replicate axis (e.g. the round).
        """
        Z = self.arrays[name]
        return Z if Z is None or not index else Z[(slice(None),) + index]


class StreamNoise:
    """Noise drawn from one generator in the order the computation asks (real data): ``take``
    hands out the stream, a backend operation `draw`s once per client and step.
    """

    def __init__(self, rng: np.random.Generator | None):
        self.rng = rng

    def take(self, name: str, *index):
        """This stream, or None when non-private; ``name`` and ``index`` are unused.

        Parameters
        ----------
        name, *index
            The draw's name and indices (unused: the stream draws in the computation's order).
        """
        return None if self.rng is None else self

    def draw(self, shape: tuple) -> np.ndarray:
        """Standard normals of ``shape`` from the stream.

        Parameters
        ----------
        shape : tuple
            The shape of the draw.
        """
        return standard_normal(self.rng, shape)  # type: ignore[arg-type]  # take() hands out a private stream only



# ---------------------------------------------------------------------- backend
class Backend(Protocol):
    """What a method may ask of the data of one fit: ``kind``, ``data`` (what `Method.plan`
    reads), ``m``, ``dk`` and ``noise`` (`PreDrawnNoise` or `StreamNoise`).
    """

    kind: str
    data: Any
    m: int
    dk: int

    def calibrate(self, method: Method, s: MethodSettings) -> tuple[tuple, list]:
        """The noise sds of the method's plan and the ledgers.

        Parameters
        ----------
        method : Method
            The method (its `Method.plan` is calibrated).
        s : MethodSettings
            The method's frozen settings (`Method.settings`).

        Returns
        -------
        tuple
            One (b, m) array of sds per release spec, and one ledger per privacy level.
        """

    def weights(self, releases: int) -> np.ndarray:
        """Aggregation weights (b, m) or (m,), rows summing to one.

        Parameters
        ----------
        releases : int
            Releases each client makes (the optimal weights depend on it).
        """

    def zeros(self) -> np.ndarray:
        """A global parameter of zeros (b, P)."""

    def start(self):
        """The start of every method (b, P): zeros for the GLMs, the seeded weights of a network."""

    def local_steps(self, start, *, K: int, eta: float, sigma, noise, part: str = "full",
                    drift=None) -> np.ndarray:
        """K noisy local steps of every client from the global ``start``, per-client (b, m, P):
        ``theta <- theta - eta (mean_j clip(g_j(theta)) + drift_i) + sigma_i Z`` on rows ``part``.

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
            ``be.noise.take(...)``; None when non-private.
        part : str
            ``full`` or ``half1``.
        drift : ndarray or None
            Per-client drift (b, m, P).
        """

    def average(self, w, local) -> np.ndarray:
        """``sum_i w_i local_i``: per-client (b, m, P) -> global (b, P).

        Parameters
        ----------
        w : ndarray
            Weights (b, m) or (m,).
        local : ndarray
            Per-client parameters (b, m, P).
        """

    def server_steps(self, theta, w, *, K: int, eta: float, sigma, noise) -> np.ndarray:
        """K FedSGD steps to a global (b, P): ``theta -= eta sum_i w_i (mean_j clip(g_j(theta)) + sigma_i Z_i)``.

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
        """

    def newton_release(self, theta1, *, hessian_bound) -> np.ndarray:
        """Every client's pre-noise Newton release ``theta1 - s_i`` (b, m, P): s_i solves the
        (floored or ridge) system of its half-1 Hessian and clipped half-2 gradient at theta1.

        Parameters
        ----------
        theta1 : ndarray
            The stage-1 global parameter (b, P).
        hessian_bound : float or None
            Clips per-sample Hessians (certified); None: the paper's floor.
        """

    def add_noise(self, local, sigma, noise) -> np.ndarray:
        """``local_i + sigma_i Z_i`` (b, m, P), one draw per client; ``local`` when noise is None.

        Parameters
        ----------
        local : ndarray
            Per-client parameters (b, m, P).
        sigma : ndarray
            Noise sds (b, m).
        noise : object
            The noise, None when non-private.
        """

    def memo(self, key: str, inputs: tuple, compute):
        """``compute()``, reused for equal ``inputs`` when the backend keeps results.

        Parameters
        ----------
        key : str
            The result's name.
        inputs : tuple
            What the result depends on (compared for reuse).
        compute : callable
            Computes the result.
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
        """


@dataclass
class Fit:
    """A method's result: ``theta`` (n_rep, d) over a simulation block, (d, k) on real data or
    (m, d, k) one model per client (``local``), its ledger and communication.
    """

    theta: np.ndarray
    ledger: privacy.Ledger
    rounds: int
    floats_up: int
    floats_down: int
    local: bool = False
    #: what a method reports beyond the estimate (FedIRLS: its noise covariance and last step)
    info: dict = field(default_factory=dict)

    def client_theta(self, i: int) -> np.ndarray:
        """Client i's estimate (d, k): its own (``local``) or the global one.

        Parameters
        ----------
        i : int
            The client.
        """
        return self.theta[i] if self.local else self.theta


def comm_counts(rounds: int, m: int, dk: int, per_round: int = 1) -> dict:
    """Communication of a fit (``rounds``, ``floats_up``, ``floats_down``): each round every client
    uploads ``per_round`` parameters of ``dk`` floats and the server broadcasts as many to each.

    Parameters
    ----------
    rounds, m, dk
        Communication rounds, clients, floats of one parameter.
    per_round : int
        Parameters each client uploads per round.
    """
    return {"rounds": rounds, "floats_up": rounds * m * dk * per_round,
            "floats_down": rounds * m * dk * per_round}



# ---------------------------------------------------------------------- methods
@dataclass(frozen=True)
class MethodTags:
    """What a consumer needs to know of a method, never a test of its name (as
    scikit-learn's ``Tags``); a method sets ``tags = MethodTags(...)``, the defaults
    suiting a private GLM method on both backends (docs/ARCHITECTURE.md, "Adding a method").

    Attributes
    ----------
    private : bool
        Runs at every configured mu; False: once, at mu = inf.
    backends : frozenset of str
        The backends it runs on (``simulation``, ``realdata``, ``nn``).
    stacks_levels : bool
        The real-data backend may fit all mu levels in one pass.
    per_round : int
        Parameters each client uploads per round (`comm_counts`).
    halves : bool
        The releases read two halves of each client's rows (half 1, half 2): a client
        needs at least two rows, and the audit moves a record of each half.
    drifts : bool
        The local steps carry a per-client drift (control variates), which the audit's
        local-step release is searched with.
    solves_newton : bool
        The releases solve a Newton system with the configured solver (``newton``: cg,
        ridge or floor), so the solver's settings matter to it (checks, the audit's solvers).
    always_certified : bool
        Certified in every privacy mode (`fedgdp.methods.FedNewtonCertified`).
    per_client : bool
        The fit is one model per client (`Fit.local`), not one global estimate.
    theory_bound : str or None
        The row of the paper's Table 1 whose MSE bound the method has
        (`fedgdp.core.theory.upper_bound`); None: no bound.
    tested_release : str or None
        The release (a stage of its plan) whose worst pair the empirical distinguishing
        test (`fedgdp.commands.empirical`) runs the method on, its most sensitive one; None: untested.
    single_output : bool
        Fits one-output models only (logistic, Poisson; not softmax).
    certified_alternatives : str
        What to use instead where the method's plan has an uncertified release (the
        privacy-leak warning of `fedgdp.api.estimator.FederatedGLM`).
    """

    private: bool = True
    backends: frozenset[str] = BOTH
    stacks_levels: bool = True
    per_round: int = 1
    halves: bool = False
    drifts: bool = False
    solves_newton: bool = False
    always_certified: bool = False
    per_client: bool = False
    theory_bound: str | None = None
    tested_release: str | None = None
    certified_alternatives: str = "privacy_mode='certified'"
    single_output: bool = False


class Method:
    """One estimator: subclasses set ``name``, ``label``, ``algorithm``, ``settings_class``
    and ``tags`` (`MethodTags`) and write `plan`, `run` and `rounds` (the simulation also
    needs `noise_shapes`; docs/ARCHITECTURE.md, "Adding a method").
    """

    name = ""
    label = ""
    algorithm = ""
    #: what a consumer needs to know of the method (`MethodTags`)
    tags = MethodTags()
    #: the settings (`MethodSettings` dataclass): their names, checks and help; each study
    #: holds its defaults (`fedgdp.simulation.params.PRESETS`,
    #: `fedgdp.realdata.parameters.PRESETS`, `fedgdp.nn.settings.PRESETS`)
    settings_class: type[MethodSettings] | None = None

    def setting_names(self) -> list[str]:
        """The names of the ``settings_class`` fields, in order (empty without settings)."""
        return [] if self.settings_class is None else list(self.settings_class.defaults())

    def settings(self, s: Mapping | MethodSettings) -> MethodSettings:
        """The frozen settings the hooks below receive (``s.K``), from a resolved record (`resolve_settings`).

        Parameters
        ----------
        s : mapping or MethodSettings
            Resolved settings (a key it lacks takes the field's default), or frozen ones (returned as they are).
        """
        assert self.settings_class is not None, f"method {self.name} has no settings"
        return self.settings_class.of(s)

    def local_step_size(self, s: MethodSettings) -> float:
        """The step size of the method's local steps: ``s.eta`` (FedHybrid: ``eta1``).

        Parameters
        ----------
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        """
        return s.eta  # type: ignore[attr-defined]

    def settings_schema(self) -> dict:
        """The closed JSON schema of ``method_settings.<name>`` (`Settings.json_schema`)."""
        if self.settings_class is None:
            return {"type": "object", "additionalProperties": False, "properties": {}}
        return self.settings_class.json_schema()

    def resolve_settings(self, defaults: dict, given: dict | None, derive=None) -> dict:
        """The method's settings: ``defaults`` updated by ``given``, ``derive(s)``, each value
        checked by its field, then `check_settings`.

        Every study resolves through it, from its own presets (`fedgdp.simulation.params.method_settings`,
        `fedgdp.realdata.parameters.method_settings`, `fedgdp.nn.settings.cnn_settings`).

        Parameters
        ----------
        defaults : dict
            A preset, or a parent's resolved settings and a preset, in order.
        given : dict or None
            The user's settings of this method.
        derive : callable or None
            ``derive(s)`` fills derived values in place before the checks.

        Returns
        -------
        dict
            A new dict: the defaults' order, then new keys.

        Raises
        ------
        ValueError
            An unknown key (with a "did you mean"), or a value its field refuses.
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
        self.check_settings(self.settings(s))
        return s

    @property
    def noise_stream(self) -> str:
        """Name that seeds the method's noise generator (its own name by default)."""
        return self.name

    def noise_shapes(self, s: MethodSettings, m: int, d: int) -> dict[str, tuple]:
        """Name -> shape of the standard-normal arrays one replicate draws, in draw order.

        Parameters
        ----------
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        m : int
            Clients.
        d : int
            Parameter dimension.
        """
        raise NotImplementedError

    def draw_noise(self, rng: np.random.Generator, s: Mapping | MethodSettings, m: int, d: int, private: bool) -> dict:
        """One replicate's noise: name -> standard normals of `noise_shapes` (None if not private).

        Parameters
        ----------
        rng : numpy.random.Generator
            The replicate's noise generator.
        s : mapping or MethodSettings
            The method's settings: a resolved record or frozen (`settings`).
        m : int
            Clients.
        d : int
            Parameter dimension.
        private : bool
            Whether the fit adds noise.
        """
        return {k: (standard_normal(rng, shape) if private else None)
                for k, shape in self.noise_shapes(self.settings(s), m, d).items()}

    def check_settings(self, s: MethodSettings) -> None:
        """Cross-field checks of resolved settings (ValueError; none by default).

        Parameters
        ----------
        s : MethodSettings
            The settings, each value checked by its field.
        """

    def check_step_bound(self, be, steps, *, drift_rounds: int = 0, eta_g: float = 1.0) -> None:
        """Refuse a private GLM fit whose iterates could exceed `fedgdp.core.privacy.RELEASE_MAX`,
        from public inputs only (docs/methods.md §2, "No refusal depends on a record").

        Each stage moves an entry by at most `fedgdp.core.privacy.iterate_bound`; averaging
        moves none beyond the largest. CNNs: `fedgdp.nn.settings.parameter_bound`.

        Parameters
        ----------
        be : Backend
            The fit's backend (``data.plan_B``; skipped when not private or on CNNs).
        steps : list of (int, float, ndarray, bool)
            ``(count, eta, sigma, on_gradient)``: noise added to the iterate (local steps) or,
            ``on_gradient``, to the gradient (server steps).
        drift_rounds : int
            DP-SCAFFOLD's rounds; the control variates' bound grows per round as
            ``a <- 4 a + (B + 2 a) + z sigma / eta``.
        eta_g : float
            DP-SCAFFOLD's server step.

        Raises
        ------
        ValueError
            When the bound exceeds the limit.
        """
        datas = getattr(be, "fds", [be.data])             # the real-data backend: a fold per privacy level
        if be.kind == CNN or not any(getattr(d, "private", False) for d in datas):
            return
        B = max(float(np.max(np.asarray(d.plan_B, float))) for d in datas)
        with np.errstate(over="ignore", invalid="ignore"):
            if not drift_rounds:
                top = 0.0
                for count, eta, sigma, on_gradient in steps:
                    sd = float(np.max(np.asarray(sigma, float)))
                    top += privacy.iterate_bound(count, eta, B, sd, on_gradient=on_gradient)
            else:
                count, eta, sigma, _ = steps[0]
                K, sd, a, top = count // drift_rounds, float(np.max(np.asarray(sigma, float))), 0.0, 0.0
                for _ in range(drift_rounds):
                    move = privacy.iterate_bound(K, eta, B + 2 * a, sd)   # a round's local movement, drift included
                    top += eta_g * move
                    a = 4 * a + move / (K * eta)
                top = max(top, a)
        settings = ", ".join(f"eta={eta:g}, steps={count}" for count, eta, _, _ in steps)
        privacy.check_release_bound(self.name, top, f"clip B={B:g}, {settings}, mu")

    # -- every backend
    def rounds(self, s: MethodSettings) -> int:
        """Communication rounds of a fit.

        Parameters
        ----------
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        """
        raise NotImplementedError

    def comm(self, s: MethodSettings, m: int, dk: int) -> dict:
        """Communication of a fit (`comm_counts` at `rounds`).

        Parameters
        ----------
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        m : int
            Clients.
        dk : int
            Floats of one parameter.
        """
        return comm_counts(self.rounds(s), m, dk, self.tags.per_round)

    def release_count(self, be: Backend, s: MethodSettings) -> int:
        """Releases each client makes: the sum of the plan's counts (e.g. ``R K`` for FedAvg).

        Parameters
        ----------
        be : Backend
            The fit's backend (its ``data``, or itself on CNNs, is planned).
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        """
        return sum(int(spec.count) for spec in self.plan(getattr(be, "data", be), s))

    def weights(self, be: Backend, s: MethodSettings):
        """The aggregation weights (b, m) or (m,): ``be.weights`` at `release_count`.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        """
        return be.weights(releases=self.release_count(be, s))

    def plan(self, data, s: MethodSettings) -> tuple:
        """The releases, a tuple of `fedgdp.core.privacy.ReleaseSpec`: every release each client
        makes, with its count and sensitivity.

        Parameters
        ----------
        data : object
            A backend's data: ``plan_B``, ``plan_n`` broadcastable to (b, m), ``plan_halves()``,
            ``tau1``, ``privacy``.
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        """
        raise NotImplementedError

    def run(self, be: Backend, s: MethodSettings) -> list[Fit]:
        """The algorithm on backend ``be``: one `Fit` per privacy level.

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        s : MethodSettings
            The method's frozen settings (`Method.settings`).
        """
        raise NotImplementedError

    def fit(self, data, s: Mapping | MethodSettings, noise) -> Fit:
        """Fit on ``data`` with its noise.

        Parameters
        ----------
        data : object
            `fedgdp.simulation.backend.FitData` or `fedgdp.realdata.FoldData`.
        s : mapping or MethodSettings
            The method's settings: a resolved record or frozen (`settings`).
        noise : dict or numpy.random.Generator or None
            The pre-drawn arrays, or the generator (None: non-private).

        Raises
        ------
        ValueError
            When a private release is not finite.
        """
        self.check_backend(data.kind)
        return check_finite_release(self.name, data, self.run(data.backend(noise), self.settings(s)))[0]

    def fit_many(self, data: list, s: Mapping | MethodSettings, noises: list) -> list[Fit]:
        """`fit` at J privacy levels on the same data, in one stacked pass when allowed.

        Parameters
        ----------
        data : list
            J data objects on the same clients (one per mu).
        s : mapping or MethodSettings
            The method's settings: a resolved record or frozen (`settings`).
        noises : list
            One noise source per level.
        """
        self.check_backend(data[0].kind)
        s = self.settings(s)
        if self.tags.stacks_levels:
            be = data[0].stacked_backend(data, noises)
            if be is not None:
                return check_finite_release(self.name, data[0], self.run(be, s))
        return [self.fit(d, s, z) for d, z in zip(data, noises)]

    def privacy_modes(self) -> tuple[str, ...]:
        """The privacy modes in which the releases differ: ``("paper",)``, or with ``"certified"``."""
        return ("paper",)

    def check_backend(self, kind: str) -> None:
        """ValueError unless the method runs on backend ``kind``.

        Parameters
        ----------
        kind : str
            ``simulation``, ``realdata`` or ``nn``.
        """
        if kind not in self.tags.backends:
            raise ValueError(f"method {self.name!r} does not run on {kind} data; "
                             f"it runs on {', '.join(sorted(self.tags.backends))}")


def check_finite_release(name: str, data, fits: list) -> list:
    """``fits``, or ValueError when a private fit's estimate is not finite (docs/methods.md §2,
    "Finite arithmetic"); non-private fits may diverge and are flagged instead.

    Parameters
    ----------
    name, data
        The method (for the message) and the fit's data (its ``private`` flag is read).
    fits : list of Fit
        The fits: ``theta`` an array, or a network's parameters ``name -> tensor``.
    """
    if getattr(data, "private", False):
        for f in fits:
            if not _all_finite(f.theta):
                raise ValueError(f"method {name}: a private release is not finite (NaN or inf); nothing is "
                                 "released")
    return fits


def _all_finite(theta) -> bool:
    """Whether every entry of an array, or of a ``name -> tensor`` dict, is finite."""
    if isinstance(theta, dict):
        return all(bool(v.isfinite().all()) for v in theta.values())
    return bool(np.isfinite(theta).all())
