"""Loaders of the shared data sets used by the benchmarks and the data tests, read from ``../shared/data``
(never copied into the project).

:func:`load_dataset`: the logistic-regression sets of Jebara & Choromanska (2012) (sklearn
``breast_cancer``, ``wine``, ``digits``, ``iris``; ``bupa``, ``heart_statlog``, ``hepatitis``, ``srbct``).
The KL-proximal experiments (Khan, Baque, Fleuret & Fua 2015, Table 1):

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

#: ../shared/data relative to the repository root
DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def _standardize(X):
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    return (X - mu) / sd


def _mean_impute(X):
    X = X.copy()
    col = np.nanmean(X, axis=0)
    r, c = np.nonzero(np.isnan(X))
    X[r, c] = col[c]
    return X


def load_dataset(name: str, data_dir=None, standardize: bool = True):
    """``(X, y)`` of a benchmark set: sklearn ``breast_cancer``, ``wine``, ``digits``, ``iris`` or
    ``bupa``, ``heart_statlog``, ``hepatitis`` (mean-imputed), ``srbct`` from ``../shared/data``.

    Features are standardized (zero mean, unit variance; constant columns left at 0) when
    ``standardize``. Raises FileNotFoundError when a shared data folder is absent.
    """
    base = Path(data_dir) if data_dir is not None else DATA
    if name in ("breast_cancer", "wine", "digits", "iris"):
        from sklearn import datasets
        ds = getattr(datasets, f"load_{name}")()
        X, y = ds.data.astype(float), ds.target
    elif name == "bupa":
        raw = np.loadtxt(base / "bupa" / "bupa.data", delimiter=",")
        X, y = raw[:, :6], raw[:, 6].astype(int)  # column 7 ("selector") as in the 2012-era benchmarks
    elif name == "heart_statlog":
        rows = [ln.strip() for ln in open(base / "heart_statlog" / "heart-statlog.arff")
                if ln.strip() and not ln.startswith(("@", "%"))]
        vals = [r.split(",") for r in rows]
        X = np.array([[float(v) for v in r[:-1]] for r in vals])
        y = np.array([r[-1].strip().strip("'") == "present" for r in vals], dtype=int)
    elif name == "hepatitis":
        rows = [ln.strip().split(",") for ln in open(base / "hepatitis" / "hepatitis.data") if ln.strip()]
        arr = np.array([[np.nan if v == "?" else float(v) for v in r] for r in rows])
        y = arr[:, 0].astype(int)
        X = _mean_impute(arr[:, 1:])
    elif name == "srbct":
        lines = open(base / "srbct" / "02_SRBCT.tab").read().splitlines()
        data = [ln.split("\t") for ln in lines[3:] if ln.strip()]
        X = np.array([[float(v) for v in r[:-1]] for r in data])
        labels = [r[-1].strip() for r in data]
        _, y = np.unique(labels, return_inverse=True)
    else:
        raise ValueError(f"unknown data set {name!r}")
    if standardize:
        X = _standardize(X)
    return X, np.asarray(y)


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


def load_housing():
    M = np.loadtxt(_path("housing", "housing.csv"), delimiter=",")
    return _standardize(M[:, :13]), _standardize(M[:, 13:]).ravel()


def load_heart():
    _path("heart_statlog", "heart-statlog.arff")
    X, y = load_dataset("heart_statlog")
    return X, y.astype(float)


def conll_path(name="esp.train"):
    """A file of the CoNLL-2002 Spanish NER data (``esp.train``, ``esp.testa``, ``esp.testb``)."""
    return DATA / "conll2002_esp" / name


def kfold_select(n, candidates, fold_loss, folds=5, seed=0):
    """The candidate with the smallest ``folds``-fold cross-validated loss, and the mean losses.

    ``fold_loss(c, train_idx, test_idx)`` returns the summed loss on the test rows of a fit on the
    training rows; the folds are one seeded permutation of ``range(n)``."""
    parts = np.array_split(np.random.default_rng(seed).permutation(n), folds)
    scores = []
    for c in candidates:
        s = 0.0
        for k in range(folds):
            tr = np.concatenate([parts[j] for j in range(folds) if j != k])
            s += fold_loss(c, tr, parts[k])
        scores.append(s / n)
    return candidates[int(np.argmin(scores))], scores


def splits(n, n_splits, train_frac=0.5, seed=0):
    """``n_splits`` random (train, test) index pairs with ``round(train_frac * n)`` training rows."""
    rng = np.random.default_rng(seed)
    k = int(round(train_frac * n))
    out = []
    for _ in range(n_splits):
        p = rng.permutation(n)
        out.append((np.sort(p[:k]), np.sort(p[k:])))
    return out
