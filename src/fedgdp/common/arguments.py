"""What the command lines share: argument types, help that shows every default, the
one-line error parser, the readers of ``--params`` files and ``--spec`` JSON, and the
one error path of every command (`user_error`). Imports nothing else of the package.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
from pathlib import Path

__all__ = ["output_path", "output_dir", "show_defaults", "load_params_file", "check_spec", "user_error"]


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help in which every option ends with its default: the parser's, or the resolver's
    ``action.fallback`` attached by `show_defaults` (called only when help is printed).
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
    """Show, in ``parser``'s help, the defaults a resolver applies to options left at None
    (an option that already has a fallback keeps it).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser.
    lookup : callable
        ``lookup(dest) -> default``, called only when help is printed; KeyError for an unknown ``dest``.
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
            action.fallback = fallback(action.dest)  # type: ignore[attr-defined]


def _module_defaults(module: str, name: str = "DEFAULTS"):
    """``lookup`` for `show_defaults`: a key of a defaults dict of a module."""
    def lookup(key):
        import importlib

        return getattr(importlib.import_module(module), name)[key]
    return lookup


def output_path(*suffixes: str):
    """An argparse ``type`` for an output file: refuses (exit 2, before any work) an existing
    folder, a path through a file, or a suffix not in ``suffixes`` (case-insensitive).

    Parameters
    ----------
    *suffixes : str
        The accepted suffixes, lower case with the dot (``".parquet"``).
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
    """An argparse ``type`` for an output folder: ``value`` itself, or ArgumentTypeError for an
    existing file or a path whose nearest existing folder is a file or not writable.

    Parameters
    ----------
    value : str
        The option's value.
    """
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a file, not a folder")
    _check_parents(path, value)
    return value


def _check_parents(path: Path, value: str) -> None:
    """The nearest existing folder on ``path`` must accept new files (probed with a temporary
    file: permission bits do not say), so a command never does its work and then fails to write.
    """
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{value!r}: {str(parent)!r} is a file, not a folder")
            try:
                fd, probe = tempfile.mkstemp(dir=parent, prefix=".fedgdp-probe-")
            except OSError as exc:
                raise argparse.ArgumentTypeError(
                    f"{value!r}: cannot write in folder {str(parent)!r} ({exc.strerror})") from None
            os.close(fd)
            os.unlink(probe)
            return


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, no usage dump; a mistyped choice gets "did you mean"
        import re

        from ..core.settings import suggest

        hit = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if hit:
            choices = [c.strip(" '") for c in hit.group(2).split(",")]
            message = message[:hit.start()] + f"invalid choice: {hit.group(1)!r}{suggest(hit.group(1), choices)} " \
                f"(choose from {', '.join(choices)})"
        self.exit(2, f"fedgdp: error: {message}\n")


def load_params_file(path: str, many: bool = False) -> dict | list[dict]:
    """A ``--params`` YAML file as a dict (with ``many``, also a non-empty list of mappings); ValueError naming
    an unreadable, empty or invalid file, or one that holds something else.

    Parameters
    ----------
    path : str
        The YAML file.
    many : bool, default=False
        Also accept a non-empty list of mappings.
    """
    import yaml

    try:
        with open(path) as fh:
            loaded = yaml.safe_load(fh)
    except OSError as exc:
        raise ValueError(f"cannot read --params {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"--params {path} is not a text (YAML) file") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--params {path} is not valid YAML: {_yaml_problem(exc)}") from None
    if loaded is None:
        raise ValueError(f"--params {path} is empty: give a mapping of parameters")
    if isinstance(loaded, list) and not loaded:
        raise ValueError(f"--params {path} holds an empty list: give at least one cell")
    if many and isinstance(loaded, list) and loaded and all(isinstance(x, dict) for x in loaded):
        return loaded
    if not isinstance(loaded, dict):
        raise ValueError(f"--params {path} must hold a mapping" + (" or a list of mappings" if many else ""))
    return loaded


def _yaml_problem(exc) -> str:
    """One line of a YAML error: what and where (line and column, 1-based)."""
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{what} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else what


def _spec(text: str, schema: dict | None = None, *, flag: str = "--spec", example: str = "") -> dict:
    """The ``--spec`` (or ``flag``) JSON object, checked against ``schema``
    (`check_spec`) when given."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{flag} is not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{flag} must be a JSON object{example}")
    if schema is not None:
        check_spec(spec, schema)
    return spec


#: A key of a spec schema: (accepted types, required, must be non-empty).
Key = tuple


def check_spec(spec: dict, schema: dict, what: str = "--spec") -> None:
    """Check a spec against a closed schema: ValueError naming the first bad key (an unknown
    key with the nearest known one).

    Parameters
    ----------
    spec : dict
        The parsed JSON object.
    schema : dict
        ``key -> (types, required, nonempty)``: the value's allowed Python types, whether
        it must be given, whether an empty list or mapping is refused.
    what : str
        How the message names the spec.
    """
    from ..core.settings import suggest

    for key in spec:
        if key not in schema:
            raise ValueError(f"{what}: unknown key {key!r}{suggest(key, schema)}; known: {', '.join(schema)}")
    for key, (types, required, nonempty) in schema.items():
        if key not in spec:
            if required:
                raise ValueError(f"{what} lacks {key!r} (required: "
                                 f"{', '.join(k for k, v in schema.items() if v[1])})")
            continue
        value = spec[key]
        types = types if isinstance(types, tuple) else (types,)
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            names = " or ".join(_JSON_NAMES.get(t, t.__name__) for t in types)
            raise ValueError(f"{what}: {key} must be {names}, got {json.dumps(value)[:60]}")
        if nonempty and not value:
            raise ValueError(f"{what}: {key} is empty; give at least one entry")


_JSON_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
               bool: "true or false", type(None): "null"}


# ------------------------------------------------------------------ the one error path
#: Modules of optional extras, and the extra that installs each (what an ImportError says).
EXTRAS = {"torch": "nn", "torchvision": "nn", "snakemake_executor_plugin_slurm": "slurm",
          "sklearn": "pipeline", "PIL": "pipeline", "jsonschema": "pipeline", "snakemake": "pipeline"}


def user_error(exc: BaseException) -> str | None:
    """The one line shown for an error of the user's input or environment (the package's own
    ValueError, a YAML or JSON error, OSError, MemoryError, a missing optional extra, a
    closed pipe), or None for an internal error (the caller prints the traceback).

    Parameters
    ----------
    exc : BaseException
        The error a command raised.
    """
    if isinstance(exc, BrokenPipeError):
        return "output pipe closed before the command finished (e.g. `| head`); output truncated"
    if isinstance(exc, ImportError):
        name = (exc.name or "").split(".")[0]
        if name in EXTRAS:
            extra = EXTRAS[name]
            what = {"torch": "PyTorch", "sklearn": "scikit-learn", "PIL": "Pillow"}.get(name, name)
            return (f"this command needs {what}, which is not installed: pip install 'fedgdp[{extra}]'"
                    + (" (see docs/cnns.md for GPU builds)" if extra == "nn" else ""))
        return f"a required module is missing: {exc}; reinstall fedgdp (pip install -e .)" if name else None
    if isinstance(exc, MemoryError):
        detail = str(exc).split(";")[0].strip()
        return ("not enough memory" + (f" ({detail})" if detail else "")
                + ": use fewer clients (--m), smaller --sizes or fewer --seeds")
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else ""
        reason = exc.strerror or str(exc)
        return f"{name}: {reason}" if name else reason
    try:
        import yaml
    except ImportError:     # pragma: no cover - yaml is a dependency
        yaml = None
    if yaml is not None and isinstance(exc, yaml.YAMLError):
        return f"not valid YAML: {_yaml_problem(exc)}"
    if isinstance(exc, ValueError):    # includes json.JSONDecodeError and ConfigError
        return " ".join(str(exc).split()) or type(exc).__name__
    return None
