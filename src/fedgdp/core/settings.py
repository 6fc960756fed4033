"""One settings mechanism for every experiment: frozen dataclasses built from a mapping.

Fields are made by `setting` (default, one-line help, a checker ``parse``, an optional
flag); `Settings.build` checks a mapping of overrides (ValueError naming the key and
value, "did you mean" for unknown keys) and runs `Settings.finish`; `Settings.as_dict`
is the plain dict the seeds and Parquet metadata use; `add_flags` / `flag_values` make
and read ``--name`` flags. Used by `fedgdp.simulation.params`, `fedgdp.realdata.parameters`
and `fedgdp.nn.settings` (docs/ARCHITECTURE.md, "Settings"). Imports nothing else of the package.
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

__all__ = ["Settings", "setting", "plain", "spec_of", "is_bool", "as_float", "integer", "number", "choice", "name_list",
           "add_flags", "flag_values", "suggest"]


def suggest(word, choices) -> str:
    """`` (did you mean 'x'?)`` for the nearest of ``choices``, or ``''``.

    Parameters
    ----------
    word, choices
        The unknown word and the known words.
    """
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ------------------------------------------------------------------ checkers
# A checker is called as parse(key, value) and returns the converted value or raises
# ValueError with one line naming the key and the value.
def is_bool(value) -> bool:
    """Whether ``value`` is a boolean (``bool`` or numpy's ``bool_``), never a number here:
    ``mu: true`` is refused rather than read as 1.

    Parameters
    ----------
    value : object
        Any value.
    """
    return isinstance(value, (bool, np.bool_))


def as_float(key: str, value, what: str = "a number") -> float:
    """The one reading of a number a user gave: an int, float, numpy number or a string
    ``float`` reads (``"inf"`` included); NaN stays NaN for the caller's range check.

    Parameters
    ----------
    key : str
        The setting's name (for the message).
    value : object
        The given value (a boolean or anything else: ValueError naming ``key``).
    what : str
        What ``key`` must be (for the message), e.g. ``"a number in (0, 1]"``.
    """
    if is_bool(value):
        raise ValueError(f"{key} must be {what}, not a boolean, got {key}={value!r}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{key} must be {what}, got {key}={value!r}") from None


def integer(low: int = 1, *, strict: bool = True) -> Callable:
    """Checker ``parse(key, value)`` of an integer >= ``low``.

    Parameters
    ----------
    low : int
        The smallest value.
    strict : bool
        Only an int (no bool, float or string); otherwise any whole number (``"10"``, ``10.0``).
    """
    def parse(key, value):
        if strict:
            if is_bool(value) or not isinstance(value, int) or value < low:
                raise ValueError(f"{key} must be an integer >= {low}, got {key}={value!r}")
            return value
        f = as_float(key, value, "an integer")
        if not f.is_integer():
            raise ValueError(f"{key} must be an integer, got {key}={value!r}")
        if int(f) < low:
            raise ValueError(f"{key} must be an integer >= {low}, got {key}={int(f)}")
        return int(f)
    return _described(parse, {"type": "integer", "minimum": low} if strict else {})


def number(low: float | None = None, high: float | None = None, *, closed: str = "", finite: bool = False,
           keep: bool = False) -> Callable:
    """Checker ``parse(key, value)`` of a number between ``low`` and ``high``, returned as a float.

    Parameters
    ----------
    low, high : float or None
        The interval's ends (None: unbounded).
    closed : str
        The closed ends: ``""``, ``"low"``, ``"high"`` or ``"both"``.
    finite : bool
        Refuse inf.
    keep : bool
        Return the value as given (a value that enters a seed keeps its type).
    """
    low_in, high_in = closed in ("low", "both"), closed in ("high", "both")

    def parse(key, value):
        f = as_float(key, value, _interval(low, high, low_in, high_in, finite))
        ok = not math.isnan(f) and not (finite and math.isinf(f))
        ok = ok and (low is None or (f >= low if low_in else f > low))
        ok = ok and (high is None or (f <= high if high_in else f < high))
        if not ok:
            raise ValueError(f"{key} must be {_interval(low, high, low_in, high_in, finite)}, "
                             f"got {key}={value!r}")
        return value if keep else f
    bounds = {}
    if low is not None:
        bounds["minimum" if low_in else "exclusiveMinimum"] = low
    if high is not None:
        bounds["maximum" if high_in else "exclusiveMaximum"] = high
    return _described(parse, {"type": "number", **bounds})


def _described(parse: Callable, schema: dict) -> Callable:
    """``parse`` with ``parse.json_schema`` (type and bounds, looser where JSON cannot say more)."""
    setattr(parse, "json_schema", schema)  # noqa: B010  # an attribute of a function: mypy would refuse the dot
    return parse


def _interval(low, high, low_in, high_in, finite) -> str:
    what = "a finite number" if finite else "a number"
    if low is not None and high is not None:
        return f"{what} in {'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"
    if low is not None:
        return f"{what} {'>=' if low_in else '>'} {low:g}"
    if high is not None:
        return f"{what} {'<=' if high_in else '<'} {high:g}"
    return what


def choice(*allowed) -> Callable:
    """Checker ``parse(key, value)`` of one of ``allowed`` (the error suggests and lists them).

    Parameters
    ----------
    *allowed : object
        The allowed values.
    """
    def parse(key, value):
        if value not in allowed:
            raise ValueError(f"unknown {key} {value!r}{suggest(value, allowed)}; choose from "
                             f"{', '.join(map(str, allowed))}")
        return value
    return _described(parse, {"enum": list(allowed)})


def name_list(key, value) -> list:
    """A list of names from a list or a comma-separated string (blanks dropped); anything
    else is a ValueError naming ``key`` and ``value``.

    Parameters
    ----------
    key, value
        The setting's name and the names (a list or a string).
    """
    if isinstance(value, str):
        return [s.strip() for s in value.split(",") if s.strip()]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{key} must be a list of names or a comma-separated string, got {key}={value!r}")
    return list(value)


def anything(key, value):
    """Any value, unchanged (the default checker).

    Parameters
    ----------
    key, value
        The setting's name and its value.
    """
    return value


# ------------------------------------------------------------------ fields
def setting(default: Any = None, help: str = "", *, parse: Callable = anything, flag: type | None = None,
            factory: Callable | None = None):
    """A field of a `Settings` dataclass (``help``, ``parse`` and ``flag`` in its metadata).

    Parameters
    ----------
    default : object
        The value when the mapping lacks the key (``factory`` for a list or dict).
    help : str
        One line for ``--help`` and the docs.
    parse : callable
        ``parse(key, value)`` -> the checked value (ValueError naming key and value).
    flag : type or None
        The argparse ``type`` of the field's ``--name`` flag (`add_flags`); None: no flag.
    factory : callable or None
        Makes the default (a fresh list or dict each time).
    """
    meta = {"help": help, "parse": parse, "flag": flag}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class Settings:
    """Base of the settings dataclasses (declare them ``@dataclass(frozen=True)``)."""

    #: the word naming a key in errors: "unknown parameter 'x'"
    WHAT: ClassVar[str] = "setting"

    @classmethod
    def preset(cls, mapping: dict) -> dict:
        """Defaults that depend on the mapping (e.g. per data set), below the mapping.

        Parameters
        ----------
        mapping : dict
            The given overrides.
        """
        return {}

    @classmethod
    def finish(cls, values: dict) -> dict:
        """Cross-field checks and derived values on the checked values, in place; returns them.

        Parameters
        ----------
        values : dict
            The checked values.
        """
        return values

    @classmethod
    def build(cls, mapping: dict | None = None):
        """The frozen settings from ``mapping`` (unknown key, bad value: ValueError naming it).

        Parameters
        ----------
        mapping : dict or None
            Overrides of the defaults.
        """
        mapping = dict(mapping or {})
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for key in mapping:
            if key not in fields:
                raise ValueError(f"unknown {cls.WHAT} {key!r}{suggest(key, fields)}; known: "
                                 f"{', '.join(sorted(fields))}")
        given = {**cls.preset(mapping), **mapping}
        values = {}
        for name, f in fields.items():
            value = copy.deepcopy(given[name]) if name in given else _default(f)
            values[name] = f.metadata["parse"](name, value)
        return cls(**cls.finish(values))

    def as_dict(self) -> dict:
        """The plain dict of the settings (a deep copy, fields in declaration order; a value with an
        ``as_dict``, such as a clipping rule or nested settings, as its dict form)."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def replace(self, **changes):
        """A copy with ``changes`` (derived values; not checked again: `build` checks input).

        Parameters
        ----------
        **changes
            Fields and their new values.
        """
        return dataclasses.replace(self, **changes)

    @classmethod
    def json_schema(cls) -> dict:
        """The closed JSON object schema of these settings: each field's checker type, bounds and
        help; no defaults (they depend on the experiment, and a validator would fill them in).
        """
        props = {f.name: {**getattr(f.metadata["parse"], "json_schema", {}), "description": f.metadata["help"]}
                 for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return {"type": "object", "additionalProperties": False, "properties": props}

    @classmethod
    def defaults(cls) -> dict:
        """The defaults as a plain dict (unchecked, before `finish`)."""
        return {f.name: _default(f) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]


def plain(value):
    """``value`` as plain data: an object with ``as_dict`` as its dict, dicts and lists through, else a deep copy.

    Parameters
    ----------
    value : object
    """
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return copy.deepcopy(value)


def spec_of(cls, spec, required: tuple = (), what: str = ""):
    """``spec``, a mapping from a workflow's JSON, as the frozen dataclass ``cls`` (keys ``cls`` has no field
    for are not read, None values take the field's default); an instance of ``cls`` as it is.

    Parameters
    ----------
    cls : type
        A frozen dataclass (a figure's or table's spec).
    spec : Mapping or cls
    required : tuple of str
        Keys it must have (ValueError naming the missing ones and ``what``).
    what : str
        What the spec is for, in that error (default: the class name).
    """
    if isinstance(spec, cls):
        return spec
    missing = [k for k in required if k not in spec]
    if missing:
        raise ValueError(f"{what or cls.__name__}: the spec has no {', '.join(missing)}")
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in spec.items() if k in known and v is not None})


def _default(f):
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return copy.deepcopy(f.default)


# ------------------------------------------------------------------ flags
def add_flags(group, cls: type[Settings], shown: Callable | None = None) -> list[str]:
    """Add ``--name`` (underscores as dashes) for every field of ``cls`` with a flag type;
    each defaults to None, so it overrides a ``--params`` file only when given.

    Parameters
    ----------
    group : argparse.ArgumentParser or argument group
        Where the flags go.
    cls : type of Settings
        The settings class.
    shown : callable or None
        ``shown(name)``: the default the help ends with (else the field's).
    """
    names = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("flag") is None:
            continue
        action = group.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=f.metadata["flag"],
                                    help=f.metadata["help"])
        action.fallback = (lambda name=f.name: shown(name)) if shown else (lambda f=f: _default(f))
        names.append(f.name)
    return names


def flag_values(args, cls: type[Settings]) -> dict:
    """The flags of `add_flags` that were given, as overrides.

    Parameters
    ----------
    args, cls
        The parsed arguments and the settings class.
    """
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.metadata.get("flag") is not None and getattr(args, f.name, None) is not None}
