"""`fedgdp.nn.settings.parameter_bound` against the rule it ports: the GLM paths' step bound
(`fedgdp.methods.Method.check_step_bound`, the sum of `fedgdp.core.privacy.iterate_bound` over a
method's stages). numpy only (no torch)."""
import math

import numpy as np
import pytest

from fedgdp.core import privacy
from fedgdp.methods import CNN, get_method
from fedgdp.nn.settings import Z_MAX, cnn_settings, parameter_bound, release_plan, resolve


def _glm_steps(name, s, sigmas):
    """The ``steps`` each method's GLM ``run`` passes to ``check_step_bound`` (fedsgd.py, fedavg.py,
    fedhybrid.py): ``(count, eta, sd, on_gradient)``."""
    if name == "fedsgd":
        return [(s.K, s.eta, sigmas[0], True)]
    if name == "fedavg":
        return [(s.R * s.K, s.eta, sigmas[0], False)]
    return [(s.R1 * s.K1, s.eta1, sigmas[0], False), (s.K2, s.eta2, sigmas[1], True)]


def _glm_rule(name, p, z):
    """1 (the start) + the GLM rule at bound B = clip, the sds calibrated on the CNN plan at client size 1."""
    sigmas = [float(np.max(sd)) for sd in privacy.calibrate(release_plan(name, p, np.ones(1)), mu=p.mu).sigmas]
    steps = _glm_steps(name, cnn_settings(get_method(name, CNN), p), sigmas)
    return 1.0 + sum(privacy.iterate_bound(count, eta, p.clip, sd, on_gradient=og, z=z)
                     for count, eta, sd, og in steps)


@pytest.mark.parametrize("name", ["fedsgd", "fedavg", "fedhybrid"])
@pytest.mark.parametrize("over", [{}, {"clip": 0.3, "lr": 0.05, "mu": 0.5, "rounds": 6, "local_epochs": 3}])
def test_parameter_bound_is_the_glm_rule_at_its_z(name, over):
    """At server_lr 1, mean reduction, per-sample clipping and full-batch steps (the GLM paths' releases),
    the port equals 1 + the rule at the same z: at the rule's own ``NOISE_BOUND`` and at ``Z_MAX``, the
    z the settings' check uses (rel 1e-12: the same terms summed in another order)."""
    p = resolve({"figure": "fig10", "server_lr": 1.0, "methods": name, **over})
    for z in (privacy.NOISE_BOUND, Z_MAX):
        assert parameter_bound(name, p, z=z) == pytest.approx(_glm_rule(name, p, z), rel=1e-12)
    assert parameter_bound(name, p) == parameter_bound(name, p, z=Z_MAX)


def test_z_max_bounds_torchs_normals_and_exceeds_the_rules_bound():
    """``Z_MAX`` is above the largest |Z| torch's Box-Muller draws (sqrt(-2 ln u), u >= the least positive
    double) and above numpy's ``NOISE_BOUND``: the CNN bound is the larger, so no certified CNN setting the
    check accepts would be refused under the GLM rule's z."""
    largest = math.sqrt(-2 * math.log(5e-324))
    assert largest < Z_MAX and privacy.NOISE_BOUND < Z_MAX
    p = resolve({"figure": "fig10"})
    for name in p.methods:
        assert parameter_bound(name, p, z=privacy.NOISE_BOUND) < parameter_bound(name, p)
