"""The non-private baselines (real data only): a private method at mu = inf under its
own name (`NonPrivate`: NP-SCAFFOLD, NP-FedAvg) and the two plain ridge fits
(`NPLocalFit`, `NPPooled`)."""

from __future__ import annotations

from ..core import privacy
from .base import REALDATA, Fit, Method, MethodTags
from .settings import RidgeSettings


class NonPrivate(Method):
    """A private method at mu = inf (no clipping, no noise), under its own name."""

    tags = MethodTags(private=False, stacks_levels=False)

    def __init__(self, base: Method, name: str, label: str, algorithm: str):
        self.base, self.name, self.label, self.algorithm = base, name, label, algorithm
        self.tags = MethodTags(private=False, stacks_levels=False, backends=base.tags.backends & {REALDATA},
                               halves=base.tags.halves, drifts=base.tags.drifts)
        self.settings_class = base.settings_class

    def comm(self, s, m, dk):
        """The base method's communication."""
        return self.base.comm(s, m, dk)

    def local_step_size(self, s):
        """The base method's local step size."""
        return self.base.local_step_size(s)

    def fit(self, data, s, noise):
        """The base method's fit without noise (ValueError when ``data`` is private)."""
        if data.private:
            raise ValueError(f"{self.name} is non-private; got mu={data.mu}")
        self.check_backend(data.kind)
        return self.base.fit(data, s, None)


class NPLocalFit(Method):
    """Every client fits alone: the ridge MLE on its own training data."""

    name, label, algorithm = "np_localfit", "NP-LocalFit", "ridge MLE per client"
    tags = MethodTags(private=False, backends=frozenset({REALDATA}), stacks_levels=False, per_client=True)
    settings_class = RidgeSettings

    def run(self, be, s):
        """Every client's own ridge MLE (``be.ridge_fit_clients``); no releases, no rounds."""
        theta = be.ridge_fit_clients(s)
        return [Fit(theta, privacy.Ledger(), rounds=0, floats_up=0, floats_down=0, local=self.tags.per_client)]


class NPPooled(Method):
    """One ridge MLE on the pooled data (not federated: the raw data go to the server once)."""

    name, label, algorithm = "np_pooled", "NP-Pooled", "pooled ridge MLE"
    tags = MethodTags(private=False, backends=frozenset({REALDATA}), stacks_levels=False)
    settings_class = RidgeSettings

    def run(self, be, s):
        """One ridge MLE on the pooled data (``be.ridge_fit_pooled``): one round, the data's floats uploaded."""
        theta, uploaded = be.ridge_fit_pooled(s)
        return [Fit(theta, privacy.Ledger(), rounds=1, floats_up=uploaded, floats_down=0)]
