"""Every public function and method of the package documents its parameters (numpydoc).

Public: a module-level function or a method of a module-level class, neither named with
a leading underscore, in any module of ``src/fedgdp``. One that takes arguments (other
than ``self``/``cls``) needs a ``Parameters`` section with numpydoc's underlined header;
one with none needs nothing beyond its summary.

Overrides inherit their documentation, as in numpydoc and mkdocstrings: a method whose
name is defined in a base class may have no docstring or a one-line one, and then needs
no section (a longer docstring must carry it). Base classes are resolved by name among
the package's classes, transitively. A class that defines every public method of a
package ``Protocol`` (structural typing, e.g. the simulation and real-data backends of
``methods.base.Backend``) counts as deriving from it. The check reads the source
(``ast``), so it imports nothing and covers the optional ``nn`` extra too.
"""
import ast
from pathlib import Path

import pytest

from paths import ROOT

PACKAGE = ROOT / "src" / "fedgdp"
HEADER = "Parameters\n----------"


def _name(expr: ast.expr) -> str:
    """Last dotted component of a base-class expression (``Protocol``, ``base.Method``)."""
    if isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return expr.id if isinstance(expr, ast.Name) else ""


def _methods(cls: ast.ClassDef) -> set[str]:
    return {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _class_index(root: Path) -> dict[str, list[ast.ClassDef]]:
    """Every module-level class of the package, by name (a name may repeat)."""
    index: dict[str, list[ast.ClassDef]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                index.setdefault(node.name, []).append(node)
    return index


def _inherited(cls: ast.ClassDef, index: dict[str, list[ast.ClassDef]]) -> set[str]:
    """Names of the methods that ``cls`` finds in its package base classes and protocols."""
    def key(c: ast.ClassDef) -> tuple:  # the index parses the modules anew: compare by place
        return c.name, c.lineno, c.end_lineno

    protocols = [c for cs in index.values() for c in cs
                 if any(_name(b) == "Protocol" for b in c.bases)]
    mine = _methods(cls)
    bases = [c for b in cls.bases for c in index.get(_name(b), [])]
    bases += [p for p in protocols if key(p) != key(cls)
              and {m for m in _methods(p) if not m.startswith("_")} <= mine]
    seen = {key(cls)}
    names: set[str] = set()
    while bases:
        base = bases.pop()
        if key(base) in seen:
            continue
        seen.add(key(base))
        names |= _methods(base)
        bases += [c for b in base.bases for c in index.get(_name(b), [])]
    return names


def _public_functions(tree: ast.Module, index: dict[str, list[ast.ClassDef]]):
    """(qualified name, node, is an override) of every public function and public-class method."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield node.name, node, False
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            inherited = _inherited(node, index)
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and not sub.name.startswith("_"):
                    yield f"{node.name}.{sub.name}", sub, sub.name in inherited


def _arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return names


def _documented(fn: ast.FunctionDef | ast.AsyncFunctionDef, override: bool) -> bool:
    doc = ast.get_docstring(fn) or ""
    if override and "\n" not in doc.strip():
        return True
    return not _arguments(fn) or HEADER in doc


def _undocumented(path: Path, index: dict[str, list[ast.ClassDef]] | None = None) -> list[str]:
    tree = ast.parse(path.read_text())
    index = _class_index(PACKAGE) if index is None else index
    return [f"{path.relative_to(PACKAGE.parent)}:{fn.lineno} {name}"
            for name, fn, override in _public_functions(tree, index) if not _documented(fn, override)]


def test_the_check_finds_a_missing_section(tmp_path):
    """The check is not vacuous: a public function without the section is reported,
    one with it, a private one and one without arguments are not; an override may
    be bare or have one line, but a longer override docstring needs the section."""
    src = tmp_path / "fedgdp" / "mod.py"
    src.parent.mkdir()
    src.write_text('from typing import Protocol\n\n'
                   'def bare(x):\n    """No sections."""\n\n'
                   'def good(x):\n    """Doc.\n\n    Parameters\n    ----------\n    x : int\n        X.\n    """\n\n'
                   'def _private(x):\n    pass\n\n'
                   'def no_args():\n    """Nothing to document."""\n\n'
                   'class Thing:\n    def method(self, y):\n        """No sections."""\n\n'
                   'class Child(Thing):\n    def method(self, y):\n        """Inherits."""\n'
                   '    def other(self, y):\n        pass\n\n'
                   'class Grandchild(Child):\n    def method(self, y):\n        pass\n\n'
                   'class Wordy(Thing):\n    def method(self, y):\n        """Two\n\n        lines."""\n\n'
                   'class Proto(Protocol):\n    def go(self, a):\n        """Doc."""\n\n'
                   'class Impl:\n    def go(self, a):\n        pass\n')
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "fedgdp"
    try:
        found = _undocumented(src)
    finally:
        PACKAGE = saved
    assert [f.split(" ")[1] for f in found] == ["bare", "Thing.method", "Child.other", "Wordy.method",
                                                 "Proto.go"]


INDEX = _class_index(PACKAGE)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_public_functions_have_a_parameters_section(path):
    missing = _undocumented(path, INDEX)
    assert not missing, "public functions without a numpydoc Parameters section:\n" + "\n".join(missing)
