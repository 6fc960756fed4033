"""The closed config schema: loading it (its open objects closed over the keys of
``defaults``, ``realdata`` and a study's grid) and checking a config against it, with
one-line messages that name the key (and the known key nearest to an unknown one)."""
from __future__ import annotations

import copy
import os
from pathlib import Path

from ..core.settings import suggest
from .config import GRID_AXES, ConfigError, _without_defaults, key_path
from .sensitivity import _fill_sensitivity_schema


def _validator(schema: dict):
    """A Draft 2020-12 validator that fills in defaults as it validates (as Snakemake's)."""
    from jsonschema import Draft202012Validator, validators

    properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, sub):
        if isinstance(instance, dict):
            for name, subschema in props.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from properties(validator, props, instance, sub)

    return validators.extend(Draft202012Validator, {"properties": set_defaults})(schema)


def _error_message(error) -> ConfigError:
    """One schema error as a ConfigError naming the key (and the likely intended key)."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in known]
        if extra:
            key = extra[0]
            return ConfigError(key_path(path + [key]), f"unknown key {key!r}{suggest(key, known)}; "
                               f"known here: {', '.join(known)}")
    if error.validator == "propertyNames" and error.context:
        bad = error.context[0].instance
        allowed = error.schema.get("propertyNames", {}).get("enum", [])
        return ConfigError(key_path(path + [bad]), f"unknown name {bad!r}{suggest(bad, allowed)}"
                           + (f"; known: {', '.join(allowed)}" if allowed else ""))
    if "propertyNames" in error.schema_path and not isinstance(error.instance, (dict, list)):
        allowed = error.validator_value if error.validator == "enum" else []
        return ConfigError(key_path(path + [error.instance]), f"unknown name {error.instance!r}"
                           f"{suggest(error.instance, allowed)}"
                           + (f"; known: {', '.join(map(str, allowed))}" if allowed else ""))
    if error.validator in ("type", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "enum"):
        message = _setting_message(path, error.instance)
        if message:
            return ConfigError(key_path(path), message)
    if error.validator in ("anyOf", "oneOf") and error.schema.get("description"):
        return ConfigError(key_path(path), f"{error.instance!r} is not valid: {error.schema['description']}")
    if error.validator == "enum":
        return ConfigError(key_path(path), f"{error.instance!r} is not one of "
                           f"{', '.join(map(str, error.validator_value))}"
                           f"{suggest(error.instance, error.validator_value)}")
    return ConfigError(key_path(path), error.message)


def validate(config: dict, schema: dict) -> None:
    """Check ``config`` against the (closed) schema and fill in its defaults in place; a ConfigError for the
    first error names its key, and an unknown key comes with the known key nearest to it (difflib), e.g.
    ``replicats`` -> ``replicates``.

    Parameters
    ----------
    config : dict
        The merged config; its defaults are filled in in place.
    schema : dict
        The closed schema (`load_schema`).
    """
    errors = list(_validator(schema).iter_errors(config))
    if errors:
        # unknown keys first (they explain the rest), then the deepest error
        errors.sort(key=lambda e: (e.validator != "additionalProperties", -len(e.absolute_path)))
        raise _error_message(errors[0])


#: Where the config holds per-method settings, and the experiment whose methods they are.
METHOD_SETTINGS_AT = ((("defaults", "method_settings"), "simulation"), (("realdata", "method_settings"), "realdata"))


def fill_method_settings(schema: dict) -> None:
    """Close the config's ``method_settings`` maps (in place) over the registry: one entry
    per method of the experiment, its settings' keys, types and bounds from the method's
    settings dataclass (`fedgdp.methods.Method.settings_schema`), so the schema
    restates none of them.

    Parameters
    ----------
    schema : dict
        The config schema as read from the YAML file.
    """
    from ..methods import registry

    for (section, key), kind in METHOD_SETTINGS_AT:
        if section not in schema["properties"]:
            continue
        node = schema["properties"][section]["properties"][key]
        node.pop("additionalProperties", None)
        node.update(properties={name: meth.settings_schema() for name, meth in registry(kind).items()},
                    additionalProperties=False)


def _setting_message(path: list, value) -> str | None:
    """The declared check's message for a bad value at ``...method_settings.<name>.<key>``."""
    if len(path) < 3 or path[-3] != "method_settings":
        return None
    from ..methods import REGISTRY

    meth = REGISTRY.get(str(path[-2]))
    fields = getattr(meth.settings_class, "__dataclass_fields__", {}) if meth else {}
    if path[-1] not in fields:
        return None
    try:
        fields[path[-1]].metadata["parse"](f"{path[-2]}.{path[-1]}", value)
    except ValueError as exc:
        return str(exc)
    return None


def load_schema(path: str | os.PathLike) -> dict:
    """The config schema, with ``studies.*.settings`` closed over the keys of ``defaults``, and a study's grid
    and ``realdata`` in the sensitivity section when it has one.

    Parameters
    ----------
    path : str or path-like
        The schema file (YAML; workflow/schemas/config.schema.yaml).
    """
    import yaml

    schema = yaml.safe_load(Path(path).read_text())
    fill_method_settings(schema)
    study = schema["properties"]["studies"]["additionalProperties"]["properties"]
    if "settings" in study:
        study["settings"].update(_without_defaults(schema["properties"]["defaults"]),
                                 description=study["settings"]["description"])
        for axis in GRID_AXES:
            study["settings"]["properties"].pop(axis, None)
    if "sensitivity" in schema["properties"]:
        _fill_sensitivity_schema(schema)
    return schema
