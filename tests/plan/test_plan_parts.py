"""The layout of fedgdp.plan: its modules import only the modules listed before them
in the package docstring, each part of Plan calls only what it or its bases define,
no method is defined by two parts, and Plan has everything the rules call."""
import ast
import importlib
import inspect
import re

import pytest

from fedgdp import plan as wp
from fedgdp.plan.base import PlanBase
from shipped_configs import ROOT

#: Attributes PlanBase.__init__ sets on every plan.
INSTANCE = {"config", "run", "sha", "paths"}


def module_order() -> list[str]:
    """The modules as the package docstring lists them, lower ones first."""
    block = wp.__doc__.split("lower ones first", 1)[1].split("\n\n", 2)[1]
    return [m.group(1) for m in re.finditer(r"^    (\w+) ", block, re.MULTILINE)]


def parts() -> list[type]:
    """Every part class of Plan (PlanBase and the *Part classes), from its MRO."""
    return [c for c in wp.Plan.__mro__ if c.__module__.startswith("fedgdp.plan.") and c is not wp.Plan]


def test_docstring_lists_every_module():
    files = {p.stem for p in (ROOT / "src/fedgdp/plan").glob("*.py")} - {"__init__", "__main__"}
    assert sorted(module_order()) == sorted(files)


@pytest.mark.parametrize("name", module_order())
def test_module_imports_only_lower_modules(name):
    order = module_order()
    tree = ast.parse(inspect.getsource(importlib.import_module(f"fedgdp.plan.{name}")))
    imported = {node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
    higher = [m for m in imported if order.index(m) >= order.index(name)]
    assert not higher, f"fedgdp.plan.{name} imports {higher}, listed after it"


@pytest.mark.parametrize("part", parts(), ids=lambda c: c.__name__)
def test_part_uses_only_its_bases(part):
    """A part's methods reach only attributes of the part itself (its own and its
    bases' methods) or of PlanBase's instance: its dependencies are its bases."""
    tree = ast.parse(inspect.getsource(part))
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"}
    missing = sorted(n for n in used - INSTANCE if not hasattr(part, n))
    assert not missing, f"{part.__name__} uses {missing}, defined by none of its bases"


def test_no_method_defined_by_two_parts():
    owner = {}
    for part in parts():
        for name in vars(part):
            if not name.startswith("__"):
                assert name not in owner, f"{name} is defined by {owner.get(name)} and {part.__name__}"
                owner[name] = part.__name__
    assert parts()[-1] is PlanBase
    assert not [n for n, v in vars(wp.Plan).items() if callable(v)], "Plan only combines its parts"


def test_plan_has_everything_the_rules_call():
    rules = [*(ROOT / "workflow/rules").glob("*.smk"), ROOT / "Snakefile"]
    called = {m for f in rules for m in re.findall(r"\bPLAN\.(\w+)", f.read_text())}
    assert len(called) > 50
    missing = sorted(n for n in called - INSTANCE if not hasattr(wp.Plan, n))
    assert not missing
