"""The estimator API, floor 3 (beside `fedgdp.reports`): `FederatedGLM` and its
`PrivacyReport` (`estimator`, re-exported lazily as ``fedgdp.FederatedGLM``), its
convergence diagnostics (`diagnostics`), the client labels through scikit-learn's tools
(`routing`) and ``fedgdp fit`` on a table (`fitting`). Built on the real-data study.
"""
