"""fedgdp: differentially private federated M-estimation under mu-GDP.

Estimators of Peng, Paul & Auddy, "Statistical Limits and Efficient Algorithms for
Differentially Private Federated Learning": FedSGD, FedAvg, FedHybrid, FedNewton
(``fedgdp.simulation.backend``), with simulated GLM data (``fedgdp.simulation.data``), privacy
calibration and accounting (``fedgdp.privacy``) and the paper's bounds
(``fedgdp.theory``). The command line is ``python -m fedgdp`` (``fedgdp.cli``).
"""
__version__ = "0.1.0"
