"""The Flower app of a fit across sites: fedgdp's ServerApp (`server`) and ClientApp (`client`).

Flower loads the components named in pyproject.toml (``fedgdp_sites:server``,
``fedgdp_sites:client``) from this module; both come from the installed fedgdp.
"""
from fedgdp.federation.app import client, server

__all__ = ["client", "server"]
