"""The workflow's plan: every decision of the Snakemake pipeline as plain Python.

The rules in ``workflow/rules/*.smk`` are thin wrappers around one `Plan`, built from
the merged config by `load`: config checks, the run name and output tree, cells, jobs,
targets, job specs, captions and cluster resources, unit-tested without Snakemake
(docs/ARCHITECTURE.md, "The workflow").

Modules, lower ones first (a module imports only those above it)::

    config         ConfigError, numbers, merge_settings, config_sha, run_name
    base           PlanBase (config, run, sha, paths, figures, provenance); fmt_mu,
                   alternatives, figure_number, mnist_files
    simulation     SimulationPart: cells, jobs, cell specs, simulation figures
    tables         TablesPart: Table 1 and the rates table
    realdata       RealdataPart: the real-data fits and figures
    nn             NNPart: the CNN runs and figures
    decomposition  DecompositionPart: the error decomposition
    coverage       CoveragePart: the coverage study of FederatedGLM's intervals
    sensitivity    the sensitivity section's studies (functions) and SensitivityPart
    schema         load_schema, validate (closed schema, one-line messages)
    gallery        shrink_png and ``python -m fedgdp.plan shrink-png SRC DST``
    targets        TargetsPart: the files of every output, named targets, report labels,
                   the check of an invocation's targets (RequestError)
    claims         ClaimsPart: the claims report
    resources      ResourcesPart: minutes and megabytes of cluster jobs
    checks         ChecksPart: Plan.check, what the schema cannot express
    core           Plan (all the parts) and load

Each part is a class over the parts it uses (``class ClaimsPart(TargetsPart, NNPart)``),
so a part's methods call only what its bases provide; `Plan` combines them all.

Snakemake itself is never imported here.
"""
from __future__ import annotations

from ..core.settings import suggest
from .base import FIGURE_KINDS, alternatives, figure_number, fmt_mu, mnist_files
from .config import (
    GRID_AXES,
    LAYOUT_KEYS,
    ConfigError,
    config_sha,
    invocation_overrides,
    key_path,
    merge_settings,
    numbers,
    run_name,
)
from .core import Plan, load
from .gallery import GALLERY_COLOURS, GALLERY_DIR, GALLERY_RUN, GALLERY_WIDTH, main, shrink_png
from .nn import NN_X
from .schema import load_schema, validate
from .sensitivity import (
    SENSITIVITY_CLAIMS,
    add_sensitivity_studies,
    sensitivity_error,
    sensitivity_index,
    sensitivity_studies,
    sensitivity_study_name,
    sensitivity_variants,
)
from .targets import RequestError

__all__ = [
    "FIGURE_KINDS", "GALLERY_COLOURS", "GALLERY_DIR", "GALLERY_RUN", "GALLERY_WIDTH", "GRID_AXES", "LAYOUT_KEYS",
    "NN_X",
    "SENSITIVITY_CLAIMS", "ConfigError", "Plan", "RequestError", "add_sensitivity_studies", "alternatives",
    "config_sha",
    "figure_number", "fmt_mu", "invocation_overrides", "key_path", "load", "load_schema", "main",
    "merge_settings", "mnist_files", "numbers", "run_name", "sensitivity_error", "sensitivity_index",
    "sensitivity_studies", "sensitivity_study_name", "sensitivity_variants", "shrink_png", "suggest",
    "validate",
]
