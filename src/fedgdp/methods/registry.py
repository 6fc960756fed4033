"""The one registry of methods, `REGISTRY`, and its view per backend (`registry`, `get_method`)."""

from __future__ import annotations

from collections.abc import Mapping

from .base import CNN, REALDATA, SIMULATION, Method
from .fedavg import FedAvg
from .fedhybrid import FedHybrid
from .fedirls import FedIRLS
from .fednewton import FedNewton, FedNewtonCertified
from .fednewton_iter import FedNewtonIter
from .fedsgd import FedSGD
from .nonprivate import NonPrivate, NPLocalFit, NPPooled
from .scaffold import DPScaffold

_SCAFFOLD, _FEDAVG = DPScaffold(), FedAvg()

#: Every method, by name. A backend's methods: `registry`.
REGISTRY: dict[str, Method] = {M.name: M for M in (
    FedSGD(), _FEDAVG, FedHybrid(), FedNewton(), FedNewtonCertified(), FedNewtonIter(), _SCAFFOLD, FedIRLS(),
    NonPrivate(_SCAFFOLD, "np_scaffold", "NP-SCAFFOLD", "SCAFFOLD"),
    NonPrivate(_FEDAVG, "np_fedavg", "NP-FedAvg", "Algorithm 3, mu = inf"),
    NPLocalFit(), NPPooled())}


class RegistryView(Mapping):
    """The methods of `REGISTRY` that run on one backend, in registry order; a
    live, read-only view (a method registered later appears in it)."""

    def __init__(self, kind: str | None):
        self.kind = kind

    def _methods(self) -> dict[str, Method]:
        return {name: m for name, m in REGISTRY.items() if self.kind is None or self.kind in m.tags.backends}

    def __getitem__(self, name: str) -> Method:
        return self._methods()[name]

    def __iter__(self):
        return iter(self._methods())

    def __len__(self) -> int:
        return len(self._methods())


def registry(kind: str | None = None) -> RegistryView:
    """The methods that run on backend ``kind`` (all when None), in registry order: a live,
    read-only `RegistryView` of `REGISTRY`.

    Parameters
    ----------
    kind : str or None
        ``simulation``, ``realdata``, ``nn``, or None.
    """
    return RegistryView(kind)


def get_method(name: str, kind: str | None = None) -> Method:
    """The registered method ``name`` (that runs on backend ``kind``); ValueError for an unknown name, or a
    method that does not run on ``kind``.

    Parameters
    ----------
    name : str
        The method's name.
    kind : str or None
        The backend it must run on (None: any).
    """
    methods = registry(kind)._methods()
    if name not in methods:
        what = {None: "", SIMULATION: "", REALDATA: "real-data ", CNN: "CNN "}[kind]
        raise ValueError(f"unknown {what}method {name!r}; choose from {', '.join(methods)}")
    return methods[name]
