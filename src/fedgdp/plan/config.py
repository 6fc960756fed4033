"""Config values: the one-line error naming a key, numbers given as strings, a study's
settings over ``defaults``, the config hash and the run name (what an invocation changes)."""
from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class ConfigError(ValueError):
    """A bad config value: one line naming the key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"invalid config at {key}: {message}")


# ---------------------------------------------------------------- config basics
def numbers(value):
    """``value`` rebuilt with number strings as numbers (``--config`` passes nested values as strings).

    Parameters
    ----------
    value : object
        A config value: dicts and lists are walked, other values kept.
    """
    if isinstance(value, dict):
        return {k: numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers(v) for v in value]
    if isinstance(value, str) and _NUMBER.match(value):
        return int(value) if re.fullmatch(r"[-+]?\d+", value) else float(value)
    return value


def key_path(path) -> str:
    """Dotted form of a path of keys and indices (``studies.compare.grid.sizes[0]``; ``'<top level>'`` if empty).

    Parameters
    ----------
    path : iterable of str or int
        Keys (str) and list indices (int), outermost first.
    """
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


#: Cell parameters a study's grid sets (not allowed in a study's settings).
GRID_AXES = ("mu", "K")


def _without_defaults(schema):
    """A copy of a schema with every ``default`` removed (a study's settings fill nothing in)."""
    if isinstance(schema, dict):
        return {k: _without_defaults(v) for k, v in schema.items() if k != "default"}
    if isinstance(schema, list):
        return [_without_defaults(v) for v in schema]
    return schema


def merge_settings(defaults: dict, settings: dict) -> dict:
    """``defaults`` with a study's ``settings`` laid over it (a new dict, deep copies).

    ``clip`` is replaced whole (its keys depend on its rule); ``privacy`` and
    ``method_settings`` (per method) are merged key by key; any other key is replaced.

    Parameters
    ----------
    defaults : dict
        The config's ``defaults`` (not changed).
    settings : dict
        A study's ``settings``.
    """
    out = copy.deepcopy(defaults)
    for key, value in settings.items():
        if key == "privacy":
            out[key] = {**out.get(key, {}), **value}
        elif key == "method_settings":
            ms = out.setdefault(key, {})
            for name, given in value.items():
                ms[name] = {**ms.get(name, {}), **given}
        else:
            out[key] = copy.deepcopy(value)
    return out


#: Settings that decide only how the work is cut into jobs, never a number of any output
#: (a replicate's numbers depend on its cell, index and base_seed alone): they are left
#: out of the config hash, and overriding only them keeps the run name.
LAYOUT_KEYS = ("cells_per_job",)
#: Settings of a section that decide no number of the run's own outputs, left out of the
#: config hash as well: what a job asks the scheduler for (``nn.gpus``: the GPUs a CNN job
#: requests; the device itself is ``nn.device``, which is hashed), and the file of the
#: readings map (``nn.readings``), whose pieces are named by reading, point and run.
REQUEST_KEYS = (("nn", "gpus"), ("nn", "readings"))
#: Sections of studies outside the default target whose outputs are their own files (the
#: coverage study, `fedgdp.plan.coverage`): left out of the config hash, so adding or
#: changing one keeps the run's name and leaves the default run's outputs as they were;
#: its jobs carry their settings as params, so Snakemake reruns them when those change.
STUDY_KEYS = ("coverage",)


def config_sha(config: dict) -> str:
    """SHA-256 (8 hex digits) of ``config``'s JSON less ``run``, `LAYOUT_KEYS`, `STUDY_KEYS`, `REQUEST_KEYS`.

    Parameters
    ----------
    config : dict
        A resolved config.
    """
    body = {k: v for k, v in config.items() if k != "run" and k not in LAYOUT_KEYS and k not in STUDY_KEYS}
    for section, key in REQUEST_KEYS:
        if isinstance(body.get(section), dict) and key in body[section]:
            body[section] = {k: v for k, v in body[section].items() if k != key}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def run_name(config: dict, overrides: list[dict]) -> str:
    """The name of a run's output sets.

    ``config["run"]`` (``paper`` in config.yaml) when every override (each
    ``--configfile`` and the ``--config`` settings) names its run; otherwise that name
    plus the hash of the resolved config (``paper-1a2b3c4d``): settings changed without
    a new name never land on the outputs of the named config. An override of
    `LAYOUT_KEYS` alone (``--config cells_per_job=1``) changes no number, so it
    keeps the name.

    Parameters
    ----------
    config : dict
        The resolved config (with its ``run``).
    overrides : list of dict
        What the invocation changed (`invocation_overrides`); a None or empty entry
        counts as one that names no run.
    """
    name = config["run"]
    if any("run" not in (o or {}) and not (o and set(o) <= set(LAYOUT_KEYS)) for o in overrides):
        return f"{name}-{config_sha(config)}"
    return name


def invocation_overrides(configfiles, config_args) -> list[dict]:
    """What one invocation changes on top of config.yaml: one dict per ``--configfile`` (read here; an empty
    file gives ``{}``), then the ``--config`` dict (when any). Input of `run_name`.

    Parameters
    ----------
    configfiles : iterable of str or path-like
        The ``--configfile`` files, in order (YAML).
    config_args : dict or None
        The ``--config`` settings (empty or None: none).
    """
    import yaml

    out = [yaml.safe_load(Path(f).read_text()) or {} for f in configfiles]
    if config_args:
        out.append(dict(config_args))
    return out
