"""Flower's waits, shortened (fedgdp.federation.waits): the sleeps and pulls it rebinds, and nothing else.
The SuperNode it starts is run by .ci/flower.sh and timed by scripts/bench_federation.sh."""
import functools
import inspect
import time
import types

import pytest

from fedgdp.federation.__main__ import main
from fedgdp.federation.waits import poll_clock


def test_the_clock_caps_every_sleep_at_the_poll_and_keeps_the_rest_of_time(monkeypatch):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    clock = poll_clock(0.1)
    clock.sleep(3)          # the SuperNode's idle wait
    clock.sleep(0.5)        # its wait for a reply
    clock.sleep(0.02)       # a shorter one is kept
    assert slept == [0.1, 0.1, 0.02]
    assert clock.monotonic is time.monotonic and clock.time is time.time
    for bad in (0, -1, 4, float("nan")):
        with pytest.raises(ValueError, match="poll must be a number of seconds in"):
            poll_clock(bad)


def test_quick_pulls_rebinds_flowers_pull_objects_with_a_short_first_backoff():
    pytest.importorskip("flwr", reason="the extra flower is not installed (pip install -e '.[flower]')")
    from flwr.supercore.inflatable.inflatable_utils import pull_objects

    from fedgdp.federation.waits import quick_pulls

    module = types.ModuleType("flowerish")
    module.pull_objects = pull_objects
    quick_pulls(module, 0.05)
    assert isinstance(module.pull_objects, functools.partial) and module.pull_objects.func is pull_objects
    assert module.pull_objects.keywords == {"initial_backoff": 0.05, "backoff_cap": 0.5}
    quick_pulls(module, 0.02)                         # again: from Flower's own, not stacked
    assert module.pull_objects.func is pull_objects and module.pull_objects.keywords["initial_backoff"] == 0.02
    with pytest.raises(RuntimeError, match="no Flower pull_objects"):
        quick_pulls(types.ModuleType("other"), 0.05)
    with pytest.raises(RuntimeError, match="no Flower pull_objects"):
        quick_pulls(module, 0.0)


def test_the_shortened_names_are_flowers_own_in_the_pinned_release():
    """The launcher rebinds `time` and `pull_objects` of these modules: they must still be there to rebind."""
    pytest.importorskip("flwr", reason="the extra flower is not installed (pip install -e '.[flower]')")
    import flwr
    import flwr.superlink.grid.http_grid as grid
    import flwr.supernode.start_client_internal as loop
    from flwr.supercore.inflatable.inflatable_utils import pull_objects

    from fedgdp.federation.waits import FLOWER

    assert flwr.__version__ == FLOWER
    assert loop.time is time and loop.pull_objects is pull_objects and grid.pull_objects is pull_objects
    # the guard's pull of a message (fedgdp.federation.guard.pull_task_input) passes Flower's backoff on
    from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree

    assert {"initial_backoff", "backoff_cap"} <= set(inspect.signature(pull_and_inflate_object_from_tree).parameters)


def test_the_supernode_command_refuses_a_bad_poll_in_one_line(capsys):
    assert main(["supernode", "--poll", "0", "--", "--superlink", "127.0.0.1:1"]) == 1
    assert "poll must be a number of seconds in (0, 3], got 0.0" in capsys.readouterr().err


@pytest.mark.parametrize("line", ["poll = 0", "backoff = -1", "poll = 'fast'", "backoff = 60"])
def test_the_guards_waits_are_checked_with_the_key_named(tmp_path, line):
    from fedgdp.federation.guard import read_config

    conf = ('name = "a"\ndata = "a.csv"\nsettings = "s.json"\nledger = "l"\nlifetime_mu = 1.0\n'
            f'apps = ["{"0" * 64}"]\n{line}\n')
    (tmp_path / "site.toml").write_text(conf)
    key = line.split()[0]
    with pytest.raises(ValueError, match=f"site.toml: {key} must be a number of seconds in"):
        read_config(str(tmp_path / "site.toml"))
    (tmp_path / "site.toml").write_text(conf.replace(line, f"{key} = 0.05"))
    assert getattr(read_config(str(tmp_path / "site.toml")), key) == 0.05


def test_the_task_heartbeat_is_counted_in_task_heartbeat_seconds_on_both_sides(monkeypatch):
    """A guard gone silent mid-message fails its message after 2 x TASK_HEARTBEAT s (Flower: 60 s), and the guard
    beats often enough not to be taken for gone: at most 0.9 x (TASK_HEARTBEAT - 2) s apart, under half the lapse."""
    pytest.importorskip("flwr", reason="the extra flower is not installed (pip install -e '.[flower]')")
    import flwr.supercore.corestate.in_memory_corestate as tasks
    import flwr.supercore.heartbeat as beats
    from flwr.common.constant import HEARTBEAT_BASE_MULTIPLIER, HEARTBEAT_PATIENCE, HEARTBEAT_RANDOM_RANGE

    from fedgdp.federation.waits import TASK_HEARTBEAT, quick_task_heartbeat

    for module, name in ((tasks, "HEARTBEAT_DEFAULT_INTERVAL"), (beats, "HEARTBEAT_DEFAULT_INTERVAL"),
                         (beats, "HEARTBEAT_CALL_TIMEOUT")):
        monkeypatch.setattr(module, name, getattr(module, name))       # put back after the test
    assert tasks.HEARTBEAT_DEFAULT_INTERVAL == 30 and beats.HEARTBEAT_CALL_TIMEOUT == 5    # Flower's own
    quick_task_heartbeat("supernode")
    quick_task_heartbeat("task")
    quick_task_heartbeat("task")                        # again: the same values
    assert tasks.HEARTBEAT_DEFAULT_INTERVAL == beats.HEARTBEAT_DEFAULT_INTERVAL == TASK_HEARTBEAT
    lapse = HEARTBEAT_PATIENCE * TASK_HEARTBEAT
    longest = (TASK_HEARTBEAT - beats.HEARTBEAT_CALL_TIMEOUT) * (HEARTBEAT_BASE_MULTIPLIER + HEARTBEAT_RANDOM_RANGE[1])
    assert lapse == 20 and longest < lapse / 2
    with pytest.raises(ValueError, match="side must be"):
        quick_task_heartbeat("superlink")
    monkeypatch.setattr(tasks, "HEARTBEAT_DEFAULT_INTERVAL", 45)     # another Flower: refused, not guessed
    with pytest.raises(RuntimeError, match="is not Flower"):
        quick_task_heartbeat("supernode")


@pytest.mark.parametrize("value", ["'input'", "'nowhere@3'", "'message@x'", "3"])
def test_the_guards_test_kill_point_is_checked(tmp_path, value):
    from fedgdp.federation.guard import read_config

    conf = ('name = "a"\ndata = "a.csv"\nsettings = "s.json"\nledger = "l"\nlifetime_mu = 1.0\n'
            f'apps = ["{"0" * 64}"]\ntest_kill_at = {value}\n')
    (tmp_path / "site.toml").write_text(conf)
    with pytest.raises(ValueError, match="test_kill_at must be POINT@N"):
        read_config(str(tmp_path / "site.toml"))
    (tmp_path / "site.toml").write_text(conf.replace(value, "'message@3'"))
    assert read_config(str(tmp_path / "site.toml")).test_kill_at == "message@3"
