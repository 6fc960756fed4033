"""The package's floors (docs/ARCHITECTURE.md, "The package, floor by floor"): a module's
floor is read from its folder, and every import of every module, the lazy ones inside
functions too, points down or stays in its own folder; two folders of one floor never
import each other.

core <- methods, common <- simulation, realdata, nn <- reports, api, audit <- plan, federation <- commands
<- the front door
"""
import ast
from pathlib import Path

import pytest

from paths import ROOT

SRC = ROOT / "src" / "fedgdp"

#: The package's folders, floor by floor from the bottom. The front door, the top floor,
#: is the package's own two files, ``__init__`` (the public names) and ``__main__``
#: (``python -m fedgdp``).
FRONT_DOOR = "the front door"
FLOORS = [("core",), ("methods", "common"), ("simulation", "realdata", "nn"), ("reports", "api", "audit"),
          ("plan", "federation"), ("commands",), (FRONT_DOOR,)]
FLOOR = {folder: k for k, folders in enumerate(FLOORS) for folder in folders}
#: The one name every module may read from the front door: the package's version, a
#: constant of ``fedgdp/__init__.py``, which imports nothing of the package when it runs
#: (`test_the_front_door_imports_lazily`).
VERSION = "fedgdp.__version__"


def _folder(module: str) -> str:
    """``fedgdp.simulation.run`` -> ``simulation``; ``fedgdp`` and ``fedgdp.__main__`` -> the front door."""
    parts = module.split(".")
    return FRONT_DOOR if len(parts) == 1 or parts[1] == "__main__" else parts[1]


def _floor(folder: str) -> int:
    if folder not in FLOOR:
        raise AssertionError(f"folder {folder!r} is on no floor: add it to tests/docs/test_layers.py and ARCHITECTURE")
    return FLOOR[folder]


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts)
        is_pkg = path.name == "__init__.py"
        yield (name[: -len(".__init__")] if is_pkg else name), is_pkg, path


def _imports(name: str, is_pkg: bool, path: Path, nodes=None):
    """Every fedgdp module ``name`` imports (absolute, relative, lazy), or those of ``nodes``."""
    package = name if is_pkg else name.rsplit(".", 1)[0]
    for node in nodes if nodes is not None else ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("fedgdp"):
                if node.module is None or target == "fedgdp":     # from . import x: x may be a module
                    for alias in node.names:
                        yield f"{target}.{alias.name}"
                else:
                    yield target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fedgdp"):
                    yield alias.name


MODULES = list(_modules())


@pytest.mark.parametrize("name,is_pkg,path", MODULES, ids=[m[0] for m in MODULES])
def test_imports_point_down(name, is_pkg, path):
    me = _folder(name)
    bad = []
    for target in _imports(name, is_pkg, path):
        other = _folder(target)
        if other == me or target == VERSION:
            continue
        if _floor(other) >= _floor(me):                # up, or sideways to another folder of the floor
            bad.append(target)
    assert not bad, f"{name} imports {bad} (folder {me}, floor {_floor(me)})"


def test_every_module_is_in_a_folder_with_a_floor():
    """Only the front door's two files sit beside the folders; every folder is a package on a floor."""
    loose = sorted(p.name for p in SRC.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"], loose
    folders = {p.parent.relative_to(SRC).parts[0] for p in SRC.rglob("*.py") if p.parent != SRC}
    assert folders == set(FLOOR) - {FRONT_DOOR}, folders ^ (set(FLOOR) - {FRONT_DOOR})
    assert all((SRC / f / "__init__.py").is_file() for f in folders)
    for name, _, _ in MODULES:
        _floor(_folder(name))


def test_the_front_door_imports_lazily():
    """``import fedgdp`` runs no module of the package: the front door's imports are inside
    functions (the public estimator, on first use), which is why any module may read its
    ``__version__``."""
    init = SRC / "__init__.py"
    top = [n for n in ast.parse(init.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not list(_imports("fedgdp", True, init, top))
