"""What the command lines share: argument types, help that shows every default, the
one-line error parser, and the readers of ``--params`` files and ``--spec`` JSON.

Used by :mod:`fedgdp.cli` and :mod:`fedgdp.nn.commands`; imports nothing else of the
package, so the two command modules do not import each other.
"""
from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

__all__ = ["output_path", "output_dir", "show_defaults", "load_params_file"]


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help in which every option ends with its default.

    The default is the parser's own, or, for an option whose default is applied
    later by a resolver (the parser keeps ``None`` so that flags can override a
    ``--params`` file), the resolver's, attached by :func:`show_defaults` as
    ``action.fallback`` (a callable, only called when help is printed).
    """

    def _format_action(self, action):
        if action.help is None and action.option_strings:   # no help text: show the default alone
            action = copy.copy(action)
            action.help = _default_text(action) or ""
        return super()._format_action(action)

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text.lower():
            return text
        default = _default_text(action)
        return f"{text} ({default})" if default else text


def _default_text(action) -> str | None:
    """``"default: VALUE"`` for an optional argument, None for required and positional ones."""
    if action.required or not action.option_strings or action.default is argparse.SUPPRESS:
        return None
    fallback = getattr(action, "fallback", None)
    value = fallback() if action.default is None and fallback is not None else action.default
    if value is False and action.nargs == 0:
        value = "off"
    return "default: " + _shown(value).replace("%", "%%")


def _shown(value) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(_shown(v) for v in value)
    if isinstance(value, dict) and value.get("rule") == "quantile":      # a clip rule
        return f"quantile:{value['q']:g}"
    if isinstance(value, dict) and value.get("rule") == "fixed":
        return f"{value['value']:g}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def show_defaults(parser: argparse.ArgumentParser, lookup) -> None:
    """Show, in ``parser``'s help, the defaults a resolver applies to options left at None.

    ``lookup(dest)`` returns the default of the option with that ``dest`` (called only
    when help is printed, so the resolver's module is imported only then), or raises
    KeyError for an option it does not know. An option that already has a fallback
    (a flag made by :func:`fedgdp.settings.add_flags`) keeps it.
    """
    def fallback(dest):
        def value():
            try:
                return lookup(dest)
            except KeyError:
                return None
        return value

    for action in parser._actions:
        if action.option_strings and action.default is None and not hasattr(action, "fallback"):
            action.fallback = fallback(action.dest)


def _module_defaults(module: str, name: str = "DEFAULTS"):
    """``lookup`` for :func:`show_defaults`: a key of a defaults dict of a module."""
    def lookup(key):
        import importlib

        return getattr(importlib.import_module(module), name)[key]
    return lookup


def output_path(*suffixes: str):
    """An argparse ``type`` for an output file written in one format.

    The value is refused (exit 2, one line naming the option and the value, before any
    work) when it is an existing folder, when a folder on its path is a file, or when
    its suffix is not one of ``suffixes`` (case-insensitive), e.g. ``--out a.csv`` for a
    Parquet file.
    """
    def check(value: str) -> str:
        path = Path(value)
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{value!r} is a folder; give a file name ending in {suffixes[0]}")
        if path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(
                f"{value!r} must end in {' or '.join(suffixes)} (the format written)")
        _check_parents(path, value)
        return value
    check.__name__ = "output path"
    return check


def output_dir(value: str) -> str:
    """An argparse ``type`` for an output folder: refused if it exists and is not a folder."""
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a file, not a folder")
    _check_parents(path, value)
    return value


def _check_parents(path: Path, value: str) -> None:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{value!r}: {str(parent)!r} is a file, not a folder")
            return


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, no usage dump
        self.exit(2, f"fedgdp: error: {message}\n")


def load_params_file(path: str, many: bool = False) -> dict | list[dict]:
    """A ``--params`` YAML file as a dict; ValueError naming the file otherwise.

    With ``many``, a non-empty list of mappings (several cells) is accepted too.
    """
    import yaml

    try:
        with open(path) as fh:
            loaded = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ValueError(f"cannot read --params {path}: {exc.strerror}") from None
    if many and isinstance(loaded, list) and loaded and all(isinstance(x, dict) for x in loaded):
        return loaded
    if not isinstance(loaded, dict):
        raise ValueError(f"--params {path} must hold a mapping" + (" or a list of mappings" if many else ""))
    return loaded


def _spec(text: str) -> dict:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--spec is not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError("--spec must be a JSON object")
    return spec
