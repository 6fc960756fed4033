"""The shipped configs merged as Snakemake merges them, for the tests that read them."""
import copy

import yaml

from paths import ROOT

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def merged(*files, **extra) -> dict:
    """config.yaml, then each file, then extra keys: merged as Snakemake does (dicts key
    by key, everything else replaced)."""
    def update(a, b):
        for k, v in b.items():
            if isinstance(v, dict) and isinstance(a.get(k), dict):
                update(a[k], v)
            else:
                a[k] = copy.deepcopy(v)
        return a

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for f in files:
        update(cfg, yaml.safe_load((ROOT / f).read_text()))
    return update(cfg, extra)
