"""The algorithm core: every federated method written once, and the one registry.

Methods (paper section 3, docs/methods.md §2-5), one class each, one module per method
or family, all in `REGISTRY` (`fedgdp.methods.registry`):

- ``fedsgd``      Algorithm 1: K server steps on noisy clipped client gradients (`fedsgd`).
- ``fedavg``      Algorithm 3: R rounds of K noisy local steps, averaged (`fedavg`).
- ``fedhybrid``   Algorithm 2: K1 noisy local steps, average, then K2 FedSGD steps (`fedhybrid`).
- ``fednewton``   Algorithm 4: FedAvg (R = 1) on half 1 of every client, then one
  private local Newton step (Hessian on half 1, clipped gradient on half 2); in
  privacy mode ``certified`` with clipped per-sample Hessians and a ridge solve (`fednewton`).
- ``fednewton_certified`` the certified FedNewton in every mode (FedNewton's noise stream; `fednewton`).
- ``fednewton_iter`` Algorithm 5 (CNNs only): cycles of FedAvg rounds, each followed by
  one private head-only Newton round on the network's last layer (`fednewton_iter`).
- ``dp_scaffold`` SCAFFOLD (option II control variates) with FedAvg's noise; the control
  variates are post-processing of released iterates (real data only; `scaffold`).
- ``np_scaffold``, ``np_fedavg`` the same algorithms at mu = inf (`NonPrivate`; `nonprivate`).
- ``np_localfit``, ``np_pooled`` the two plain ridge fits (real data only; `nonprivate`).

Every method subclasses `Method` and is written against a *backend* (`Backend`); both,
with `Fit` and the noise sources, are in `fedgdp.methods.base` (its Conventions block:
the batch axis and the shapes).

Settings
--------
A method declares its settings once: ``settings_class``, a `fedgdp.core.settings`
dataclass (each field's check and help; the methods' own are in
`fedgdp.methods.settings`), and ``presets``, the defaults per experiment
(``realdata``: the real-data study's; the simulation's come from the cell, e.g. K, by
`Method.simulation_preset`). `Method.resolve_settings` is the one resolution:
defaults, then the user's values (an unknown key is refused with a "did you mean"),
then derived values, each value checked by its field. ``settings_parent`` names the
method whose resolved real-data settings a method starts from (the non-private
versions, the certified FedNewton, DP-SCAFFOLD on FedAvg's schedule).

Adding a method: one new module in this package, with a subclass of `Method` that
writes `Method.plan` (its releases) and `Method.run` (the algorithm, with backend
operations) and declares its settings, and its entry in `fedgdp.methods.registry` (an import
and the instance in `REGISTRY`'s tuple; docs/ARCHITECTURE.md, "Adding a method").
"""
from .base import (
    BOTH,
    CNN,
    GRADIENT_METHODS,
    REALDATA,
    SIMULATION,
    Backend,
    Fit,
    Method,
    PreDrawnNoise,
    StreamNoise,
    check_finite_release,
    comm_counts,
)
from .fedavg import FedAvg
from .fedhybrid import FedHybrid
from .fednewton import FedNewton, FedNewtonCertified
from .fednewton_iter import FedNewtonIter
from .fedsgd import FedSGD
from .nonprivate import NonPrivate, NPLocalFit, NPPooled
from .registry import REGISTRY, RegistryView, get_method, registry
from .scaffold import DPScaffold
from .settings import (
    HybridSettings,
    IterSettings,
    MethodSettings,
    RidgeSettings,
    RoundSettings,
    ScaffoldSettings,
    StepSettings,
)

__all__ = ["Backend", "Fit", "Method", "FedSGD", "FedAvg", "FedHybrid", "FedNewton", "FedNewtonCertified",
           "FedNewtonIter", "DPScaffold", "NonPrivate", "NPLocalFit", "NPPooled", "REGISTRY", "registry", "get_method",
           "RegistryView", "PreDrawnNoise", "StreamNoise", "comm_counts", "MethodSettings", "StepSettings",
           "RoundSettings", "HybridSettings", "ScaffoldSettings", "IterSettings", "RidgeSettings",
           "check_finite_release", "SIMULATION", "REALDATA", "CNN", "BOTH", "GRADIENT_METHODS"]
