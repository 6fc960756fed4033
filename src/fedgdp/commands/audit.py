"""The ``fedgdp audit`` command's part of the audit (`fedgdp.audit`, where the search lives):
reading a run's config files into the audit's targets, which needs the plan."""
from __future__ import annotations

from ..audit import AuditTarget, audit_targets, nn_targets

__all__ = ["read_run_config", "config_targets"]


def read_run_config(files: list) -> dict:
    """One run's config from its files, merged in order as ``snakemake --configfile``
    merges them (mappings key by key, anything else replaced); the first file must be a
    whole config (``config.yaml``, or a run's ``results/<run>/config.resolved.yaml``).
    ValueError naming the file for a missing or unreadable one.

    Parameters
    ----------
    files : list of str or path-like
        YAML files, the first a whole config.
    """
    import yaml

    def merge(a: dict, b: dict) -> dict:
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    config: dict = {}
    for f in files:
        try:
            with open(f) as fh:
                part = yaml.safe_load(fh) or {}
        except OSError as exc:
            raise ValueError(f"--configfile {f}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"--configfile {f}: not YAML ({str(exc).splitlines()[0]})") from None
        if not isinstance(part, dict):
            raise ValueError(f"--configfile {f}: not a mapping")
        config = merge(config, part)
    if "studies" not in config or "defaults" not in config:
        if {"readings", "points"} <= set(config):
            raise ValueError(f"--configfile {files[-1]}: a readings config, not a run's; audit its certified "
                             f"readings with fedgdp audit --readings {files[-1]}")
        raise ValueError(f"--configfile {files[0]}: not a whole config (no studies/defaults); give config.yaml "
                         "first, then the run's files, or the run's results/<run>/config.resolved.yaml")
    return config


def config_targets(config: dict) -> list[AuditTarget]:
    """`audit_targets` of a merged run config (`read_run_config`), then the
    CNN targets of its ``nn`` section (`nn_targets`).

    Parameters
    ----------
    config : dict
        A merged run config; its ``run`` names the plan (default ``audit``).
    """
    from ..plan.realdata import RealdataPart
    from ..plan.simulation import SimulationPart

    class _Parts(SimulationPart, RealdataPart):
        pass

    return audit_targets(_Parts(config, config.get("run", "audit"))) + nn_targets(config)

