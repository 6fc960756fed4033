"""fedgdp: differentially private federated M-estimation under mu-GDP.

Estimators of Peng, Paul & Auddy, "Statistical Limits and Efficient Algorithms for
Differentially Private Federated Learning": FedSGD, FedAvg, FedHybrid, FedNewton
(``fedgdp.methods``, run by ``fedgdp.simulation.backend`` and ``fedgdp.realdata``), with
simulated GLM data (``fedgdp.simulation.data``), privacy calibration and accounting
(``fedgdp.core.privacy``) and the paper's bounds (``fedgdp.core.theory``). On your own federated
data: ``fedgdp.FederatedGLM`` (``fedgdp.api.estimator``; imported on first use, and it needs
no scikit-learn), ``fedgdp.PrivacyBudget`` (``fedgdp.api.budget``: one total per record over
many fits) and ``fedgdp fit``; before any data, ``fedgdp.forecast`` (``fedgdp.api.forecast``)
forecasts each method's privacy noise from public inputs. The command line is ``python -m fedgdp``
(``fedgdp.commands.cli``).
"""
__version__ = "0.1.0"

__all__ = ["FederatedGLM", "PrivacyBudget", "PrivacyReport", "forecast", "__version__"]


def __getattr__(name: str):
    # the public estimator, imported lazily: `import fedgdp` stays light
    if name in ("FederatedGLM", "PrivacyReport"):
        from .api import estimator

        return getattr(estimator, name)
    if name == "forecast":
        from .api import forecast as module

        return module.forecast
    if name == "PrivacyBudget":          # the budget across fits (fedgdp.api.budget)
        from .api import budget

        return budget.PrivacyBudget
    raise AttributeError(f"module 'fedgdp' has no attribute {name!r}")
