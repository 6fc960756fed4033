import numpy as np
import pytest

from fedgdp.core.glm import get_model
from fedgdp.simulation.backend import FitData
from fedgdp.simulation.params import resolve
from fedgdp.simulation.run import draw_noises, simulate_block


def make_block(overrides: dict, replicates=(0, 1, 2)):
    """Resolved params, replicate data, clipping bounds and FitData for a small cell."""
    from fedgdp.simulation.run import clip_bounds

    p = resolve(overrides)
    reps = simulate_block(p, list(replicates))
    glm = get_model(p.model)
    B = clip_bounds(p, glm, reps, list(replicates))
    return p, reps, FitData(reps, glm, B, p.mu, p.tau1, p.weights, privacy=p.privacy, clip=p.clip,
                            release=p.release)


def stacked_noise(p, method, replicates, d=None):
    d = d or len(p.beta_true)
    noises = draw_noises(p, method, list(replicates), d)
    return noises, {k: (None if noises[0][k] is None else np.stack([z[k] for z in noises]))
                    for k in noises[0]}


@pytest.fixture
def block():
    return make_block
