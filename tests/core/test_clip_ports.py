"""The ports of the clip factor held to its one numpy reference,
`fedgdp.core.privacy.clip_factors`: the simulations' compiled kernels (numba) and the
CNNs' torch factors, in float64 and float32. On adversarial rows (norms just above and
below B, equal to it, huge, tiny, subnormal, zero) each port clips as the reference does,
and every clipped row it computes has norm <= B *exactly*: the squares of its
floating-point entries are summed as fractions, with no rounding."""
from fractions import Fraction

import numpy as np
import pytest

from fedgdp.core import privacy
from fedgdp.core.glm import get_model
from fedgdp.simulation.backend import ClientBlock
from fedgdp.simulation.data import Replicate

D = 7
MAX = float(np.finfo(np.float64).max)


def _rows(B: float, dtype) -> np.ndarray:
    """Rows of ``D`` numbers whose norms are adversarial for a clip at ``B``."""
    rng = np.random.default_rng(3)
    big, tiny = float(np.finfo(dtype).max), float(np.finfo(dtype).smallest_subnormal)
    ulps = B * (1.0 + np.arange(-4, 33) * float(np.finfo(dtype).eps))      # B, just below and just above
    norms = np.concatenate([ulps, [B * 1.5, B * 1e3, B * 1e-3, 1e30, 1e-30, big / 4, tiny * 1e3]])
    U = rng.standard_normal((norms.size, D))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    axis = np.zeros((ulps.size, D))
    axis[:, 0] = ulps                                                         # one entry: the norm is exact
    equal = np.repeat(ulps[:, None] / np.sqrt(D), D, axis=1)                  # D equal entries
    special = np.array([np.zeros(D), np.full(D, tiny), np.full(D, big / 8)])   # zero, subnormal, huge
    with np.errstate(over="ignore"):
        return np.concatenate([U * norms[:, None], axis, equal, special]).astype(dtype)


def _norm_at_most(row: np.ndarray, B: float) -> bool:
    """``||row|| <= B`` in exact arithmetic on the row's floating-point entries."""
    return sum(Fraction(float(v)) ** 2 for v in row) <= Fraction(B) ** 2


def _numba_port(G: np.ndarray, B: float):
    """One-row clients at theta = 0 with y = 0: each client's clipped mean gradient is its
    one clipped per-sample gradient ``0.5 x_j``, as the compiled kernel clips it."""
    glm = get_model("logistic")
    X = 2.0 * G                                        # the gradient r x_j is 0.5 x_j = G exactly
    rep = Replicate(X, np.zeros(len(X)), np.ones(len(X), dtype=int))
    block = ClientBlock([rep], glm)
    clipped = block.gradients(np.zeros((1, len(X), D)), block.clip_bounds(np.array([B])))[0]
    reference = privacy.clip_rows(G, B)                # the norms by row_norms, the margin of D numbers
    return clipped, reference


def _torch_port(G: np.ndarray, B: float, dtype_name: str):
    """`fedgdp.nn.clipping.clip_factors` on the float64 sums of squares of the rows (as the
    CNN path forms them), the row times its factor in the working precision."""
    torch = pytest.importorskip("torch")
    from fedgdp.nn.clipping import clip_factors, clip_margin

    dtype = getattr(torch, dtype_name)
    g = torch.from_numpy(G).to(dtype)
    sq = g.square().sum(1, dtype=torch.float64)
    c = clip_factors(sq, B, margin=clip_margin(D, dtype), dtype=dtype)
    clipped = torch.where(c[:, None] > 0, g * c[:, None], torch.zeros_like(g)).to(torch.float64).numpy()
    # the reference on the port's own norms: a square that overflows float64 (norm > 1.3e154)
    # is non-finite there, so the image is zeroed (the CNN non-finite rule), as the reference
    # zeroes a non-finite norm
    ref_c = privacy.clip_factors(np.sqrt(sq.numpy()), B, D, unit=float(torch.finfo(dtype).eps) / 2)
    return c.to(torch.float64).numpy(), ref_c, clipped


@pytest.mark.parametrize("B", [1.0, 0.37, 3e-7])
def test_numba_port_matches_the_reference_and_never_exceeds_the_bound(B):
    G = _rows(B, np.float64)
    clipped, reference = _numba_port(G, B)
    # the same rule rounded apart (the kernel clips the residual to clip_scale(B, d)/||x||,
    # the reference scales the row by clip_scale(B, d)/||g||): a few roundings, far below
    # 1e-12 relative; a subnormal factor (rows of norm near the float maximum) errs by up to
    # 1.5 steps of 2^-1074 in each, so 5 2^-1074 |g| more; 1e-300 for subnormal entries
    tol = 1e-12 * np.abs(reference) + 5 * 2.0 ** -1074 * np.abs(G) + 1e-300
    assert np.all(np.abs(clipped - reference) <= tol)
    assert all(_norm_at_most(row, B) for row in clipped)
    assert all(_norm_at_most(row, B) for row in reference)


def test_numba_port_clips_a_subnormal_row_with_a_huge_residual():
    """``1/||x_j||`` overflows for a row of subnormal entries, yet ``r_j x_j`` is far above B
    when the residual is huge (y = -1e307): the port clips it as the reference does."""
    B, glm = 3e-7, get_model("logistic")
    X = np.full((2, D), 1e-310)
    y = np.array([-1e307, 0.0])
    rep = Replicate(X, y, np.ones(2, dtype=int))
    block = ClientBlock([rep], glm)
    clipped = block.gradients(np.zeros((1, 2, D)), block.clip_bounds(np.array([B])))[0]
    G = np.stack([glm.per_sample_gradients(np.zeros(D), X[j:j + 1], y[j:j + 1])[0] for j in range(2)])
    reference = privacy.clip_rows(G, B)
    assert privacy.row_norms(G[:1])[0] > 1e3 * B                  # row 0 must be clipped, row 1 not
    np.testing.assert_allclose(clipped, reference, rtol=1e-12, atol=1e-300)
    assert all(_norm_at_most(row, B) for row in clipped)


@pytest.mark.parametrize("B", [1.0, 0.37, 3e-7])
def test_torch_float64_port_matches_the_reference_and_never_exceeds_the_bound(B):
    G = _rows(B, np.float64)
    c, ref_c, clipped = _torch_port(G, B, "float64")
    # float64: torch forms (1 - kappa) B / N as a reciprocal times a product, one rounding
    # more than the reference's quotient: within 2^-51 relative (two float64 ulps)
    np.testing.assert_allclose(c, ref_c, rtol=2.0 ** -51, atol=0)
    assert all(_norm_at_most(row, B) for row in clipped)


@pytest.mark.parametrize("B", [1.0, 0.37, 3e-7])
def test_torch_float32_port_rounds_the_reference_down_and_never_exceeds_the_bound(B):
    """float32: the factor is the float64 factor rounded down to float32, so it is never
    above it (up to the float64 port's two ulps) and below it by at most one float32 ulp
    (relative 2^-23 = 1.2e-7)."""
    G = _rows(B, np.float32)
    c, ref_c, clipped = _torch_port(G, B, "float32")
    assert np.all(c <= ref_c * (1 + 2.0 ** -51))
    np.testing.assert_allclose(c, ref_c, rtol=2.0 ** -23, atol=0)
    assert all(_norm_at_most(row, B) for row in clipped)


def test_the_margin_is_defined_once():
    """Every port reads `privacy.clip_margin`: the GLM paths with no working-precision
    term, the torch port with three roundings of its dtype's unit."""
    torch = pytest.importorskip("torch")
    from fedgdp.nn.clipping import clip_margin

    assert privacy.clip_margin(D) == (D + privacy.CLIP_SLACK) * privacy.U64
    for dtype in (torch.float32, torch.float64):
        unit = torch.finfo(dtype).eps / 2
        assert clip_margin(D, dtype) == privacy.clip_margin(D, unit) == (
            privacy.CLIP_WORK_ROUNDINGS * unit + (D + privacy.CLIP_SLACK) * privacy.U64)
