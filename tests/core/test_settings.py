"""fedgdp.core.settings: one mechanism under the three resolvers (simulation cells, real-data
fits, CNN runs). The resolved settings of every shipped config and of hand-picked
overrides equal those of the resolvers it replaced (tests/fixtures, captured before),
key order and types included, since they feed the seeds and the Parquet metadata."""
import argparse
import copy
import dataclasses
import json
import math
from dataclasses import FrozenInstanceError, dataclass

import pytest

import settings_cases as cases
from fedgdp.core.settings import Settings, add_flags, choice, flag_values, integer, number, setting

FIXTURE = json.loads(cases.FIXTURE.read_text())


def test_every_config_resolves_as_before():
    res = cases.resolvers()
    seen = {}
    for kind, label, over in cases.config_cases():
        seen.setdefault(kind, {})[label] = cases.digest(repr(res[kind](copy.deepcopy(over))))
    for kind, digests in FIXTURE["configs"].items():
        assert set(digests) <= set(seen[kind]), kind    # studies added since (sens_*, decompose_*) are new cases
        changed = [label for label, d in digests.items() if seen[kind][label] != d]
        assert not changed, f"{kind}: {len(changed)} settings differ, e.g. {changed[:3]}"


@pytest.mark.parametrize("case", FIXTURE["extra"], ids=lambda c: f"{c['kind']}-{json.dumps(c['overrides'])[:40]}")
def test_hand_picked_overrides_resolve_as_before(case):
    assert repr(cases.resolvers()[case["kind"]](copy.deepcopy(case["overrides"]))) == case["repr"]


@pytest.mark.parametrize("case", FIXTURE["bad"], ids=lambda c: f"{c['kind']}-{json.dumps(c['overrides'])[:40]}")
def test_bad_overrides_are_still_refused(case):
    """Still a ValueError; the message may be new, but it names the key or the value."""
    over = case["overrides"]
    with pytest.raises(ValueError) as exc:
        cases.resolvers()[case["kind"]](copy.deepcopy(over))
    text = str(exc.value)
    named = {str(k) for k in over} | {str(v) for v in _leaves(over)}
    assert "\n" not in text and (not over or any(w in text for w in named if w)), (text, case["error"])


def _leaves(x):
    if isinstance(x, dict):
        for k, v in x.items():
            yield k
            yield from _leaves(v)
    elif isinstance(x, list):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


# ------------------------------------------------------------------ the mechanism
@dataclass(frozen=True)
class Toy(Settings):
    WHAT = "toy setting"
    colour: str = setting("red", "red | blue", parse=choice("red", "blue"), flag=str)
    steps: int = setting(3, "number of steps", parse=integer(1), flag=int)
    rate: float = setting(0.5, "a rate in (0, 1]", parse=number(0, 1, closed="high"), flag=float)
    tags: list = setting(help="no flag", factory=list)


def test_build_checks_converts_and_gives_back_a_plain_dict():
    t = Toy.build({"rate": "0.25", "steps": 4})
    assert t.as_dict() == {"colour": "red", "steps": 4, "rate": 0.25, "tags": []}
    assert list(t.as_dict()) == ["colour", "steps", "rate", "tags"] == list(Toy.defaults())
    with pytest.raises(FrozenInstanceError):
        t.steps = 5
    d = t.as_dict()
    d["tags"].append("x")
    assert t.tags == []                       # a copy: the settings stay as built


@pytest.mark.parametrize("over,message", [
    ({"stpes": 2}, "unknown toy setting 'stpes' (did you mean 'steps'?); known: colour, rate, steps, tags"),
    ({"colour": "bleu"}, "unknown colour 'bleu' (did you mean 'blue'?); choose from red, blue"),
    ({"steps": 0}, "steps must be an integer >= 1, got steps=0"),
    ({"steps": 2.0}, "steps must be an integer >= 1, got steps=2.0"),
    ({"rate": 1.5}, "rate must be a number in (0, 1], got rate=1.5"),
    ({"rate": "fast"}, "rate must be a number in (0, 1], got rate='fast'"),
])
def test_a_bad_key_or_value_is_one_line_naming_it(over, message):
    with pytest.raises(ValueError) as exc:
        Toy.build(over)
    assert str(exc.value) == message


def test_checkers_edges():
    assert integer(0, strict=False)("n", "7") == 7 and integer(0, strict=False)("n", 7.0) == 7
    with pytest.raises(ValueError, match="n must be an integer, got n=7.5"):
        integer(0, strict=False)("n", 7.5)
    assert number(0, keep=True)("s", 2) == 2 and type(number(0, keep=True)("s", 2)) is int
    assert number(0)("mu", "inf") == math.inf
    with pytest.raises(ValueError, match="a finite number > 0"):
        number(0, finite=True)("lr", math.inf)
    assert number(0, 0.5, closed="low")("f", 0) == 0.0
    with pytest.raises(ValueError, match=r"in \[0, 0.5\)"):
        number(0, 0.5, closed="low")("f", 0.5)


def test_flags_are_generated_from_the_fields():
    ap = argparse.ArgumentParser()
    names = add_flags(ap, Toy)
    assert names == ["colour", "steps", "rate"]                     # tags has no flag
    args = ap.parse_args(["--steps", "5", "--rate", "0.1"])
    assert flag_values(args, Toy) == {"steps": 5, "rate": 0.1}      # flags not given stay out
    assert Toy.build(flag_values(args, Toy)).steps == 5
    helps = {a.dest: (a.help, a.fallback()) for a in ap._actions if a.option_strings and a.dest != "help"}
    assert helps["colour"] == ("red | blue", "red") and helps["rate"] == ("a rate in (0, 1]", 0.5)


def test_command_flags_come_from_the_settings_classes():
    """Every field with a flag type is a flag of its command, with the field's help."""
    from fedgdp.commands.cli import build_parser
    from fedgdp.nn.settings import NNSettings
    from fedgdp.realdata.parameters import RealdataSettings
    from fedgdp.simulation.params import CellSettings

    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    for command, cls in [("simulate", CellSettings), ("ledger", CellSettings), ("realdata", RealdataSettings),
                         ("nn-run", NNSettings)]:
        actions = {a.dest: a for a in sub.choices[command]._actions}
        for f in dataclasses.fields(cls):
            if f.metadata["flag"] is not None:
                assert actions[f.name].option_strings == ["--" + f.name.replace("_", "-")], (command, f.name)
                assert actions[f.name].help == f.metadata["help"] and f.metadata["help"], (command, f.name)



def test_the_schemas_defaults_are_the_named_constants():
    """The clipping rule, the privacy setting, the Hessian clip and FedNewton's solver are
    defined once (`privacy.DEFAULT_CLIP`, `DEFAULT_PRIVACY`, `HESSIAN_CLIP`,
    `solvers.NEWTON_DEFAULTS`); every schema, the estimator, the command line and the audit
    default to them (each schema to its own copy: editing it leaves the constant alone)."""
    import inspect

    from fedgdp import FederatedGLM
    from fedgdp.api.fitting import add_parser
    from fedgdp.audit.search import AuditTarget
    from fedgdp.core import privacy, solvers
    from fedgdp.realdata.parameters import RealdataSettings
    from fedgdp.simulation.params import CellSettings

    assert dict(privacy.DEFAULT_CLIP) == {"rule": "quantile", "q": 0.9}
    assert dict(privacy.DEFAULT_PRIVACY) == {"mode": "paper", "hessian_clip": 4.0} and privacy.HESSIAN_CLIP == 4.0
    assert dict(solvers.NEWTON_DEFAULTS) == {"solver": "cg", "cg_tol": 1e-8, "cg_maxiter": 500}
    for cls in (CellSettings, RealdataSettings):
        d = cls.defaults()
        assert d["clip"] == privacy.DEFAULT_CLIP and d["privacy"] == privacy.DEFAULT_PRIVACY
        d["clip"]["q"] = 0.5
        assert privacy.DEFAULT_CLIP["q"] == 0.9
    assert RealdataSettings.defaults()["newton"] == solvers.NEWTON_DEFAULTS
    assert privacy.check_privacy({}, dict(privacy.DEFAULT_CLIP)) == privacy.DEFAULT_PRIVACY
    assert inspect.signature(FederatedGLM).parameters["hessian_clip"].default == privacy.HESSIAN_CLIP
    target = AuditTarget("simulation", "fednewton", "logistic")
    assert target.clip == privacy.DEFAULT_CLIP and target.hessian_clip == privacy.HESSIAN_CLIP
    sub = argparse.ArgumentParser().add_subparsers()
    fit = add_parser(sub)
    assert fit.get_default("hessian_clip") == privacy.HESSIAN_CLIP
