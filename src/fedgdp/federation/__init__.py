"""A fit across sites: each site keeps its rows, draws its own noise and guards its own
budget; a coordinator runs the method's own rounds on what the sites send.

`fedgdp.federation.site` (a site: its rows, ledger, noise and guard), `coordinator` (the
method's ``run`` on a backend whose client steps are requests), `settings` (the public
settings every party starts from), `sites` (a fit across sites by any transport, and in
one process), `app` (Flower's ServerApp and ClientApp, extra ``flower``).

The names below are imported on first use, as in ``fedgdp``: the commands of
``python -m fedgdp.federation`` (the coordinator's, a site's guard and SuperNode) start
without the estimators' imports (about 0.6-1 CPU-s each on 2 shared cores), and the
coordinator's start counts in a run's start-up (docs/federation.md, "Speed").
"""
from importlib import import_module

__all__ = ["AcrossSites", "CERTIFIED", "PublicFold", "Refused", "RefusedError", "Site", "SitesBackend",
           "check_settings", "fit_across", "read_site", "resolve", "run_method"]

_HOMES = {"PublicFold": "coordinator", "RefusedError": "coordinator", "SitesBackend": "coordinator",
          "run_method": "coordinator", "CERTIFIED": "settings", "check_settings": "settings", "resolve": "settings",
          "Refused": "site", "Site": "site", "read_site": "site", "AcrossSites": "sites", "fit_across": "sites"}


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(f".{_HOMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
