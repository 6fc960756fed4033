"""The worked example of `fedgdp fit`: scikit-learn's breast-cancer data (569 records,
shipped with scikit-learn, no network) as a federated CSV file.

Rule of the split: record i (in the data set's own order) belongs to client i mod 5,
so 5 clients of 113-114 records. Features: the ten "mean ..." columns, each divided by
its largest value in the data, so every feature lies in [0, 1] (this scaling reads the
data; with real federated data take the bounds from domain knowledge or a public
source). With an intercept, every row then has ||x|| <= sqrt(11), and a logistic
per-sample gradient (x times a residual in [-1, 1]) has norm <= sqrt(11) = 3.32: a
public clipping bound that depends on no record.

    python docs/examples/breast_cancer.py breast_cancer.csv
    fedgdp fit breast_cancer.csv --target malignant --client client --classes 0,1 --mu 2 --clip 3.32 --out coef.csv
"""
import sys


def breast_cancer_table():
    """The example's table: ten scaled features, ``malignant`` (1 = malignant) and ``client``."""
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer(as_frame=True)
    X = raw.data[[c for c in raw.data.columns if c.startswith("mean ")]]
    df = (X / X.max()).rename(columns=lambda c: c.replace(" ", "_"))
    df["malignant"] = (raw.target == 0).astype(int)      # scikit-learn codes malignant as 0
    df["client"] = [f"site{i % 5}" for i in range(len(df))]
    return df


if __name__ == "__main__":
    breast_cancer_table().to_csv(sys.argv[1] if len(sys.argv) > 1 else "breast_cancer.csv", index=False)
