"""Every public function and method of the package documents its parameters (numpydoc).

Public: a module-level function or a method of a module-level class, neither named with
a leading underscore, in any module of ``src/fedgdp``. One that takes arguments (other
than ``self``/``cls``) needs a ``Parameters`` section with numpydoc's underlined header;
one with none needs nothing beyond its summary. A method overriding a base class's
method that has the section inherits it, as numpydoc and mkdocstrings read an override
(its own docstring, if any, may be a one-line summary). The check reads the source
(``ast``), so it imports nothing and covers the optional ``nn`` extra too.
"""
import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "fedgdp"
HEADER = "Parameters\n----------"


def _public_functions(tree: ast.Module):
    """(qualified name, node, bases of its class) of every public function and public-class method."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield node.name, node, []
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and not sub.name.startswith("_"):
                    yield f"{node.name}.{sub.name}", sub, bases


@functools.cache
def _classes(package: Path) -> dict[str, list[tuple[list[str], dict[str, str]]]]:
    """Every class of the package by name: (its bases' names, its methods' docstrings)."""
    found: dict[str, list[tuple[list[str], dict[str, str]]]] = {}
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                docs = {f.name: ast.get_docstring(f) or "" for f in node.body
                        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                found.setdefault(node.name, []).append((bases, docs))
    return found


def _inherits(bases: list[str], method: str, seen: frozenset = frozenset()) -> bool:
    """Whether a base class (by name, through the package's classes) documents ``method``."""
    for base in bases:
        for up, docs in _classes(PACKAGE).get(base, []) if base not in seen else []:
            if HEADER in docs.get(method, "") or _inherits(up, method, seen | {base}):
                return True
    return False


def _arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return names


def _undocumented(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.relative_to(PACKAGE.parent)}:{fn.lineno} {name}" for name, fn, bases in _public_functions(tree)
            if _arguments(fn) and HEADER not in (ast.get_docstring(fn) or "") and not _inherits(bases, fn.name)]


def test_the_check_finds_a_missing_section(tmp_path):
    """The check is not vacuous: a public function without the section is reported,
    one with it, a private one, one without arguments and an override of a documented
    method are not."""
    src = tmp_path / "fedgdp" / "mod.py"
    src.parent.mkdir()
    src.write_text('def bare(x):\n    """No sections."""\n\n'
                   'def good(x):\n    """Doc.\n\n    Parameters\n    ----------\n    x : int\n        X.\n    """\n\n'
                   'def _private(x):\n    pass\n\n'
                   'def no_args():\n    """Nothing to document."""\n\n'
                   'class Thing:\n    def method(self, y):\n        """No sections."""\n\n'
                   'class Base:\n    def method(self, y):\n        """Doc.\n\n        Parameters\n        ----------\n'
                   '        y : int\n            Y.\n        """\n\n'
                   'class Sub(Base):\n    def method(self, y):\n        """Inherits."""\n')
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "fedgdp"
    try:
        found = _undocumented(src)
    finally:
        PACKAGE = saved
    assert [f.split(" ")[1] for f in found] == ["bare", "Thing.method"]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_public_functions_have_a_parameters_section(path):
    missing = _undocumented(path)
    assert not missing, "public functions without a numpydoc Parameters section:\n" + "\n".join(missing)
