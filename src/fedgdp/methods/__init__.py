"""The algorithm core: every federated method written once, and the one registry.

Methods (paper section 3, docs/methods.md §2-5), one class each, all in `REGISTRY`
(`fedgdp.methods.registry`):

- ``fedsgd``      Algorithm 1: K server steps on noisy clipped client gradients.
- ``fedavg``      Algorithm 3: R rounds of K noisy local steps, averaged.
- ``fedhybrid``   Algorithm 2: K1 noisy local steps, average, then K2 FedSGD steps.
- ``fednewton``   Algorithm 4: FedAvg (R = 1) on half 1, then one private local Newton
  step; certified in privacy mode ``certified``. ``fednewton_certified``: in every mode.
- ``fednewton_iter`` Algorithm 5 (CNNs only): FedAvg rounds, each cycle ending in a
  private head-only Newton round.
- ``fedirls``    private federated Newton on a privately whitened design (real data only;
  `FederatedGLM`'s default for logistic and Poisson).
- ``dp_scaffold`` SCAFFOLD (option II) with FedAvg's noise (real data only).
- ``np_scaffold``, ``np_fedavg``, ``np_localfit``, ``np_pooled``: the non-private baselines.

`Method`, its `MethodTags`, `Backend`, `Fit` and the noise sources are in `fedgdp.methods.base` (the
shapes); settings and adding a method: docs/ARCHITECTURE.md, "Settings" and "Adding a method".
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
    MethodTags,
    PreDrawnNoise,
    StreamNoise,
    check_finite_release,
    comm_counts,
)
from .fedavg import FedAvg
from .fedhybrid import FedHybrid
from .fedirls import FedIRLS
from .fednewton import FedNewton, FedNewtonCertified
from .fednewton_iter import FedNewtonIter
from .fedsgd import FedSGD
from .nonprivate import NonPrivate, NPLocalFit, NPPooled
from .registry import REGISTRY, RegistryView, get_method, registry
from .scaffold import DPScaffold
from .settings import (
    HybridSettings,
    IRLSSettings,
    IterSettings,
    MethodSettings,
    RidgeSettings,
    RoundSettings,
    ScaffoldSettings,
    StepSettings,
)

__all__ = ["Backend", "Fit", "Method", "MethodTags", "FedSGD", "FedAvg", "FedHybrid", "FedNewton", "FedNewtonCertified",
           "FedNewtonIter", "FedIRLS", "DPScaffold",
           "NonPrivate", "NPLocalFit", "NPPooled", "REGISTRY", "registry", "get_method",
           "RegistryView", "PreDrawnNoise", "StreamNoise", "comm_counts", "MethodSettings", "StepSettings",
           "RoundSettings", "HybridSettings", "ScaffoldSettings", "IterSettings", "IRLSSettings", "RidgeSettings",
           "check_finite_release", "SIMULATION", "REALDATA", "CNN", "BOTH", "GRADIENT_METHODS"]
