"""The counts of docs/real-data.md: scikit-learn's diabetes data (442 records, shipped with
scikit-learn, no network) as a federated CSV file with a count response.

Rule of the split: record i (in the data set's own order) belongs to client ``site{i mod 5}``,
so 5 clients of 88-89 records. Features: the ten columns as scikit-learn ships them (centred
and scaled to unit norm, so each sd is about 0.048: *not* standardised, which the command's
FeatureScaleWarning says). Response: ``count``, the disease progression divided by 25 and
rounded (0-14).

    python docs/examples/diabetes.py diabetes.csv
    fedgdp fit diabetes.csv --target count --client site --family poisson --mu 1
"""
import sys


def diabetes_table():
    """The example's table: ten features, ``count`` and ``site``."""
    import numpy as np
    from sklearn.datasets import load_diabetes

    raw = load_diabetes(as_frame=True)
    df = raw.data.copy()
    df["count"] = np.round(raw.target / 25).astype(int)
    df["site"] = [f"site{i % 5}" for i in range(len(df))]
    return df


if __name__ == "__main__":
    diabetes_table().to_csv(sys.argv[1] if len(sys.argv) > 1 else "diabetes.csv", index=False)
