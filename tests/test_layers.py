"""The package's layers (docs/ARCHITECTURE.md, "The package, module by module"): every
import of every module, including the lazy ones inside functions, points down.

core <- experiments (simulation/, realdata/, nn/; never each other) <- reports <- commands
"""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "fedgdp"

CORE = {"glm", "seeds", "compiled", "normals", "privacy", "methods", "solvers", "settings", "io", "figures",
        "datasets", "theory", "arguments", "__init__"}
EXPERIMENTS = {"simulation", "realdata", "nn"}
REPORTS = {"tables", "decomposition", "plots_decomposition", "claims", "sensitivity"}
COMMANDS = {"plan", "cli", "audit", "empirical", "bench", "rundiff", "__main__", "estimator", "fitting",
            "diagnostics", "routing"}
#: The one upward import allowed: the package's front door re-exports the estimator, lazily
#: (a module ``__getattr__``), so ``import fedgdp`` imports none of it.
PUBLIC_API = {("__init__", "estimator")}


def _unit(module: str) -> str:
    """``fedgdp.simulation.run`` -> ``simulation``; ``fedgdp.glm`` -> ``glm``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(unit: str) -> int:
    for k, names in enumerate((CORE, EXPERIMENTS, REPORTS, COMMANDS)):
        if unit in names:
            return k
    raise AssertionError(f"module {unit!r} is in no layer: add it to tests/test_layers.py and ARCHITECTURE")


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts)
        is_pkg = path.name == "__init__.py"
        yield (name[: -len(".__init__")] if is_pkg else name), is_pkg, path


def _imports(name: str, is_pkg: bool, path: Path):
    """Every fedgdp module ``name`` imports (absolute, relative, lazy)."""
    package = name if is_pkg else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
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
    me = _unit(name)
    bad = []
    for target in _imports(name, is_pkg, path):
        other = _unit(target)
        if other == me or target == "fedgdp.__version__" or (me, other) in PUBLIC_API:
            continue
        if _layer(other) > _layer(me) or (_layer(other) == _layer(me) == 1):
            bad.append(target)
    assert not bad, f"{name} imports {bad} (layer of {me}: {_layer(me)})"


def test_every_module_has_a_layer():
    for name, _, _ in MODULES:
        _layer(_unit(name))
