"""The plan of a run: `Plan`, assembled from its parts, and `load`."""
from __future__ import annotations

from .checks import ChecksPart
from .claims import ClaimsPart
from .config import ConfigError, numbers, run_name
from .resources import ResourcesPart
from .schema import load_schema, validate
from .sensitivity import add_sensitivity_studies, sensitivity_error
from .tables import TablesPart


class Plan(ClaimsPart, TablesPart, ResourcesPart, ChecksPart):
    """Everything the pipeline decides for one resolved config.

    Methods that take ``wildcards`` read its attributes, so they serve directly as
    Snakemake input, params and resources functions (tests pass a SimpleNamespace).

    Each part of the plan is a module of `fedgdp.plan` (see its docstring).

    Parameters
    ----------
    config : dict
        The merged config, validated and with defaults (`validate`).
    run : str or None, default=None
        The run name (`run_name`; None: ``config["run"]``).
    """


def load(config: dict, schema_path, overrides: list[dict] | None = None) -> Plan:
    """The plan of a merged config: numbers fixed, schema checked with defaults, run
    named, semantic checks done. Raises ConfigError naming the first bad key.

    Parameters
    ----------
    config : dict
        The merged config (config.yaml, then every ``--configfile`` and ``--config``); changed
        in place (numbers fixed, defaults and sensitivity studies added).
    schema_path : str or path-like
        The config's JSON schema (workflow/schemas/config.schema.yaml).
    overrides : list of dict or None, default=None
        What the invocation changed (`fedgdp.plan.config.invocation_overrides`), for
        `run_name`; None: none.
    """
    config.update(numbers(config))
    validate(config, load_schema(schema_path))
    add_sensitivity_studies(config)
    plan = Plan(config, run_name(config, overrides or []))
    try:
        plan.check()
    except ConfigError as exc:
        raise sensitivity_error(exc, config) from None
    return plan
