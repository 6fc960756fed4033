"""A fit across sites: each site keeps its rows, draws its own noise and guards its own
budget; a coordinator runs the method's own rounds on what the sites send.

`fedgdp.federation.site` (a site: its rows, ledger, noise and guard), `coordinator` (the
method's ``run`` on a backend whose client steps are requests), `settings` (the public
settings every party starts from), `sites` (a fit across sites by any transport, and in
one process), `app` (Flower's ServerApp and ClientApp, extra ``flower``).
"""
from .coordinator import PublicFold, RefusedError, SitesBackend, run_method
from .settings import CERTIFIED, check_settings, resolve
from .site import Refused, Site, read_site
from .sites import AcrossSites, fit_across

__all__ = ["AcrossSites", "CERTIFIED", "PublicFold", "Refused", "RefusedError", "Site", "SitesBackend",
           "check_settings", "fit_across", "read_site", "resolve", "run_method"]
