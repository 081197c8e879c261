"""Loaders of the shared data sets of the KL-proximal experiments (Khan, Baque, Fleuret & Fua 2015,
Table 1), read from ``../shared/data`` (never copied into the project).

* ``a1a``: LIBSVM a1a (1605 training rows, the paper's 5 % split) and a1a.t (30956 test rows), 123
  binary features; labels mapped to {0, 1}.
* ``colon_cancer``: 62 x 2000 (LIBSVM-normalized), labels {0, 1}.
* ``housing``: 506 x 13, features and target standardized (zero mean, unit variance).
* ``heart_statlog``: 270 x 13 standardized, labels {0, 1}.

Each raises ``FileNotFoundError`` naming the path when the data set is absent.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def _path(*parts):
    p = DATA.joinpath(*parts)
    if not p.exists():
        raise FileNotFoundError(f"shared data file {p} is absent")
    return p


def load_a1a():
    """``(X_train, y_train, X_test, y_test)``, dense float arrays, 123 features, labels 0/1."""
    from sklearn.datasets import load_svmlight_file
    Xtr, ytr = load_svmlight_file(str(_path("a1a", "a1a")), n_features=123)
    Xte, yte = load_svmlight_file(str(_path("a1a", "a1a.t")), n_features=123)
    return Xtr.toarray(), (ytr > 0).astype(float), Xte.toarray(), (yte > 0).astype(float)


def load_colon():
    M = np.loadtxt(_path("colon_cancer", "colon-cancer.dense.txt"))
    return M[:, 1:], (M[:, 0] > 0).astype(float)


def _standardize(X):
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)


def load_housing():
    M = np.loadtxt(_path("housing", "housing.csv"), delimiter=",")
    return _standardize(M[:, :13]), _standardize(M[:, 13:]).ravel()


def load_heart():
    from .logistic import load_dataset
    _path("heart_statlog", "heart-statlog.arff")
    X, y = load_dataset("heart_statlog")
    return X, y.astype(float)


def splits(n, n_splits, train_frac=0.5, seed=0):
    """``n_splits`` random (train, test) index pairs with ``round(train_frac * n)`` training rows."""
    rng = np.random.default_rng(seed)
    k = int(round(train_frac * n))
    out = []
    for _ in range(n_splits):
        p = rng.permutation(n)
        out.append((np.sort(p[:k]), np.sort(p[k:])))
    return out
