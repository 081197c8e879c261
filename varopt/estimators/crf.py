"""Linear-chain CRF (Jebara & Choromanska 2012, section 3 Eq. 1, with the junction-tree bound of section 5).

``p(y | x) = exp(sum_t W_{y_t}^T phi(x, t) + sum_{t>0} Tr[y_{t-1}, y_t]) / Z_x(theta)`` with binary
features ``phi`` from feature templates. :meth:`ChainCRF.fit` minimises

    J(theta) = sum_s [ log Z_{x_s}(theta) - theta^T f_{x_s}(y_s) ] + lam/2 ||theta||^2

by Algorithm 2 with the junction-tree bound (Algorithm 3, :mod:`varopt.solvers.majorize.junction_tree`):
``theta <- theta - (sum_s Sigma_s + lam I)^{-1} grad J`` — monotone, checked every iteration; by default
(``bound_reuse=100``) quasi-Newton trials on the last bound come first, each kept only on sufficient
decrease, with that step as the fallback (:mod:`varopt.solvers.majorize.reuse`). The
estimator is a bound oracle (:meth:`ChainCRF.partition_bound`: ``sum_s log Z_{x_s}``, its gradient and
``sum_s Sigma_s``) and the ``majorize`` solver's loop runs on it
(:func:`varopt.solvers.majorize.minimize`, linear part ``-sum_s f_{x_s}(y_s)``, quadratic ``lam I``),
with that solver's options, limits, history and :class:`~varopt.result.Result` (``result_``).
``method='lbfgs'`` runs scipy L-BFGS-B on the same oracle. :meth:`ChainCRF.predict` is Viterbi.

The oracle groups sentences of equal length and runs the recursions batched: the value and gradient
by forward-backward (``O(T K^2)`` per sentence; the oracle L-BFGS uses too), the bound curvature
``M_s`` (coefficient space) by the junction tree, mapped to the parameters with
``Sigma = sum_s P_s^T M_s P_s``, ``P_s = Phi_s (x) I_K`` on the node block, as one GEMM, and
:meth:`ChainCRF.curvature_along` (``V^T Sigma V`` for a few directions by the projected junction tree,
without ``Sigma``), which the default ``bound_reuse`` trials use as their reference along the gradient
(docs/majorize.md sections 2 and 4): a dense ``Sigma`` is then formed only for a fallback bound step.
Dense ``Sigma`` is ``d x d`` with ``d = K F + K^2``: keep the feature count ``F`` moderate
(``max_features``) — this is the ``O(t n d^2)`` cost of Algorithm 2 the paper mentions.
"""
from __future__ import annotations

import time
import warnings
from collections import Counter

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, InvalidOptionError
from .base import LIMITS, ConvergenceWarning, VaroptEstimator, accept_result
from .crf_features import FeatureBatch, use_sparse
from ..solvers.majorize.bound_oracle import minimize as majorize
from ..solvers.majorize.junction_tree import chain_bound, chain_curvature


def read_conll(path, max_sentences=None, max_len=None, word_col=0, tag_col=-1):
    """Sentences of a CoNLL file: list of ``(tokens, tags)`` (blank line = sentence boundary)."""
    sents, toks, tags = [], [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("-DOCSTART-"):
                if toks:
                    if max_len is None or len(toks) <= max_len:
                        sents.append((toks, tags))
                    toks, tags = [], []
                    if max_sentences and len(sents) >= max_sentences:
                        break
                continue
            parts = line.split()
            toks.append(parts[word_col])
            tags.append(parts[tag_col])
    if toks and (max_sentences is None or len(sents) < max_sentences) and (max_len is None or len(toks) <= max_len):
        sents.append((toks, tags))
    return sents


def word_features(tk, t):
    """The default template: features of token ``t`` of the token list ``tk`` (word shape, affixes,
    neighbours). Module level, so that a fitted :class:`ChainCRF` pickles (its ``templates_`` hold it)."""
    tk = [str(x) for x in tk[max(t - 1, 0):t + 2]]   # tokens may be numbers (word ids); t's window only
    t = min(t, 1)
    w = tk[t]
    out = ["bias", "w=" + w.lower(), "suf3=" + w[-3:].lower(), "pre3=" + w[:3].lower()]
    if w[:1].isupper():
        out.append("title")
    if w.isupper():
        out.append("upper")
    if any(c.isdigit() for c in w):
        out.append("digit")
    if not w.isalnum():
        out.append("punct")
    out.append("prev=" + (tk[t - 1].lower() if t else "<s>"))
    out.append("next=" + (tk[t + 1].lower() if t + 1 < len(tk) else "</s>"))
    if t and tk[t - 1][:1].isupper():
        out.append("prev_title")
    return out


def default_templates():
    """Feature templates ``f(tokens, t) -> [str]`` (word shape, affixes, neighbours)."""
    return [word_features]


def f1_entities(gold, pred):
    """Entity-level F1 (exact span and type, IOB2), as in the CoNLL evaluation."""
    def spans(tags):
        out, start, typ = set(), None, None
        for i, tg in enumerate(list(tags) + ["O"]):
            if tg.startswith("B-") or tg == "O" or (tg.startswith("I-") and tg[2:] != typ):
                if start is not None:
                    out.add((start, i, typ))
                start, typ = (i, tg[2:]) if tg != "O" else (None, None)
        return out
    tp = fp = fn = 0
    for g, p in zip(gold, pred):
        G, P = spans(g), spans(p)
        tp += len(G & P)
        fp += len(P - G)
        fn += len(G - P)
    prec = tp / max(tp + fp, 1)
    rec = tp / max(tp + fn, 1)
    return 2 * prec * rec / max(prec + rec, 1e-300)


def dict_features(token, prefix="", where=""):
    """``(name, value)`` pairs of a token given as a feature dict, as scikit-learn-crfsuite / python-crfsuite
    read it: a string value ``v`` of key ``k`` is the feature ``"k:v"`` with value 1; a number (or bool) is the
    feature ``k`` with that value; a nested dict gives ``"k:sub"`` names; a list of strings one ``"k:s"`` each.
    Non-finite numbers and other value types are an InputDataError naming the key."""
    out = []
    for k, v in token.items():
        name = f"{prefix}{k}"
        if isinstance(v, str):
            out.append((f"{name}:{v}", 1.0))
        elif isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
            v = float(v)
            if not np.isfinite(v):
                raise InputDataError(f"feature {name!r}{where} has the value {v} (NaN or inf)")
            if v != 0.0:
                out.append((name, v))
        elif isinstance(v, dict):
            out.extend(dict_features(v, name + ":", where))
        elif isinstance(v, (list, tuple, set, frozenset)) and all(isinstance(x, str) for x in v):
            out.extend((f"{name}:{x}", 1.0) for x in v)
        else:
            raise InputDataError(f"feature {name!r}{where} has a value of type {type(v).__name__}: feature dicts hold "
                                 "strings, numbers, booleans, lists of strings or nested dicts")
    return out


def _name_list(token):
    """A token given as a list of feature names (python-crfsuite's other item format), each with value 1."""
    return isinstance(token, (list, tuple)) and all(isinstance(x, str) for x in token)


def check_sequences(X, Y=None):
    """``X`` (and ``Y``) as lists of sequences: a sentence is a list/tuple/1-D array of tokens, its tags a list of
    the same length. A numeric 2-D array ``X`` is a set of equal-length sentences (e.g. word ids); a 1-D ``Y`` of
    scalars (one label per sample, a classifier's ``y``) is refused with what is expected instead."""
    def seqs(Z, name, unit):
        if hasattr(Z, "toarray"):
            raise InputDataError(f"ChainCRF fits sequences: {name} must be a list of {unit} lists (one per "
                                 f"sentence); sparse input is not supported")
        if isinstance(Z, (str, bytes, dict)) or not hasattr(Z, "__len__"):
            raise InputDataError(f"ChainCRF fits sequences: {name} must be a list of {unit} lists (one per "
                                 f"sentence), got {type(Z).__name__}")
        out = []
        for i, z in enumerate(Z):
            if isinstance(z, (str, bytes, dict)) or not hasattr(z, "__len__") or getattr(z, "ndim", 1) != 1:
                raise InputDataError(f"ChainCRF fits sequences: {name}[{i}] must be a list of {unit}s (one sentence), "
                                     f"got {type(z).__name__} {z!r:.60}; {name} is a list of such lists")
            out.append(list(z))
        return out
    X = seqs(X, "X", "token")
    if Y is None:
        return X
    Y = seqs(Y, "Y", "tag")
    if len(X) != len(Y):
        raise InputDataError(f"X and Y have different numbers of sentences ({len(X)} and {len(Y)})")
    for i, (tk, ys) in enumerate(zip(X, Y)):
        if len(tk) != len(ys):
            raise InputDataError(f"sentence {i} has {len(tk)} tokens but {len(ys)} tags")
    return X, Y


class ChainCRF(VaroptEstimator):
    """Chain CRF with feature templates and a label set; fit by bound majorization or L-BFGS.

    scikit-learn conventions: every hyperparameter is an ``__init__`` argument (``method``
    ``'majorize'`` or ``'lbfgs'``, ``tol``, ``max_iter``, ``time_limit``, ``verbose``, ``callback``,
    ``extrapolate``, ``bound_reuse``, ``reuse_metric``, ``memory`` included) and ``fit(X, Y)`` leaves them unchanged; what the fit derives ends in
    ``_`` (``labels_``: the given labels or the sorted tags of ``Y``; ``templates_``).

    Input: ``X`` a list of sentences, each a list of tokens; ``Y`` a list of tag lists. Tokens are words (strings or
    word ids, read by the feature ``templates``) or, when ``templates`` is not given, scikit-learn-crfsuite's item
    formats: a feature dict (:func:`dict_features`; ``{'word.lower()': 'paris', 'BOS': True}`` gives the features
    ``word.lower():paris`` and ``BOS``) or a list of feature names. A classifier's ``y`` (one label per sample), sparse
    or non-sequence input is refused with what is expected (:func:`check_sequences`)."""

    def __init__(self, templates=None, labels=None, lam: float = 1.0, min_count: int = 1, max_features=None,
                 method: str = "majorize", tol: float = 1e-8, max_iter: int = 200, time_limit=None,
                 verbose: bool = False, callback=None, extrapolate: bool = True, bound_reuse: int = 100,
                 reuse_metric: str = "scalar", memory: int = 30):
        self.templates = templates
        self.labels = labels
        self.lam, self.min_count, self.max_features = lam, min_count, max_features
        self.method, self.tol, self.max_iter, self.time_limit = method, tol, max_iter, time_limit
        self.verbose, self.callback, self.extrapolate = verbose, callback, extrapolate
        self.bound_reuse, self.reuse_metric, self.memory = bound_reuse, reuse_metric, memory

    # --- features ---------------------------------------------------------------------------------------------
    def _feats(self, tokens):
        """Per token, its ``(feature name, value)`` pairs: a dict token (scikit-learn-crfsuite's format, with the
        default templates) carries its own features (:func:`dict_features`); otherwise the templates' names, each
        with value 1."""
        if getattr(self, "_dict_tokens_", False):
            return [dict_features(tk, where=f" of token {t}") if isinstance(tk, dict) else
                    [(s, 1.0) for s in tk] if _name_list(tk) else
                    [(s, 1.0) for tpl in self.templates_ for s in tpl(tokens, t)] for t, tk in enumerate(tokens)]
        return [[(s, 1.0) for tpl in self.templates_ for s in tpl(tokens, t)] for t in range(len(tokens))]

    def _build_index(self, X, min_count, max_features):
        cnt = Counter(s for tk in X for fs in self._feats(tk) for s, _ in fs)
        items = [(c, s) for s, c in cnt.items() if c >= min_count]
        items.sort(key=lambda cs: (-cs[0], cs[1]))
        if max_features:
            items = items[: max_features]
        self.vocab_ = {s: i for i, (_, s) in enumerate(items)}

    def _phi(self, tokens):
        rows, cols, vals = [], [], []
        for t, fs in enumerate(self._feats(tokens)):
            for s, v in fs:
                j = self.vocab_.get(s)
                if j is not None:
                    rows.append(t)
                    cols.append(j)
                    vals.append(v)
        # duplicates (a name twice in one token) add up, as in CRFsuite
        return sp.csr_matrix((np.asarray(vals, dtype=float), (rows, cols)), shape=(len(tokens), len(self.vocab_)))

    def _prepare(self, X, Y=None):
        """Batches of equal-length sentences: (Phi (:class:`.crf_features.FeatureBatch`, B x T x F), label ids (B,T))."""
        by_len = {}
        for i, tk in enumerate(X):
            if len(tk) == 0:
                continue
            by_len.setdefault(len(tk), []).append(i)
        phis = {i: self._phi(X[i]) for idx in by_len.values() for i in idx}
        sparse = use_sparse(sum(p.shape[0] for p in phis.values()), len(self.vocab_),
                            sum(p.nnz for p in phis.values()))
        batches = []
        for T, idx in sorted(by_len.items()):
            Phi = FeatureBatch([phis[i] for i in idx], sparse)
            ys = None
            if Y is not None:
                ys = np.array([[self.label_index_[tg] for tg in Y[i]] for i in idx], dtype=np.int64)
            batches.append((Phi, ys))
        return batches

    # --- oracle -------------------------------------------------------------------------------------------------
    def _unpack(self, theta):
        K, F = self.K_, self.F_
        return theta[:K * F].reshape(K, F), theta[K * F:].reshape(K, K)

    def partition_bound(self, theta, want_sigma=True):
        """The bound oracle of :mod:`varopt.solvers.majorize.bound_oracle`: ``sum_s log Z_{x_s}(theta)``, its
        gradient and (when ``want_sigma``) the junction-tree curvature ``sum_s Sigma_s`` (dense d x d)."""
        K, F = self.K_, self.F_
        W, Tr = self._unpack(theta)
        logz_sum = 0.0
        gW = np.zeros((K, F))
        gT = np.zeros((K, K))
        Sig = np.zeros((self.d_, self.d_)) if want_sigma else None
        for Phi, _ in self.batches_:
            Bn, T, _ = Phi.shape
            logz, mu, M = chain_bound(Phi.scores(W), Tr, want_sigma)
            logz_sum += float(np.sum(logz))
            gW += Phi.weighted_sum(mu[:, :T * K].reshape(Bn, T, K))
            gT += mu[:, T * K:].sum(0).reshape(K, K)
            if want_sigma:
                self._add_sigma(Sig, Phi, M, T)
        return logz_sum, np.concatenate([gW.ravel(), gT.ravel()]), Sig

    def curvature_along(self, theta, V):
        """``V^T Sigma V`` for the junction-tree curvature ``Sigma = sum_s Sigma_s`` of :meth:`partition_bound` at
        ``theta``, without forming ``Sigma``: ``V`` (d,) or (d, m) parameter directions are mapped to each
        sentence's coefficient space (``P_s V``, node block ``Phi_s V_k``, transitions as they are) and the
        projected junction-tree recursion gives ``(P_s V)^T M_s (P_s V)``
        (:func:`~varopt.solvers.majorize.junction_tree.chain_curvature`). About the cost of one value and
        gradient for a few directions; a float for one direction, else ``(m, m)``."""
        K, F = self.K_, self.F_
        V = np.asarray(V, dtype=float)
        one = V.ndim == 1
        V = V.reshape(self.d_, -1)
        m = V.shape[1]
        W, Tr = self._unpack(theta)
        VW = V[:K * F].reshape(K, F, m)
        VT = V[K * F:].reshape(K * K, m)
        out = np.zeros((m, m))
        for Phi, _ in self.batches_:
            Bn, T, _ = Phi.shape
            Wc = np.empty((Bn, T * K + K * K, m))
            Wc[:, :T * K] = Phi.directions(VW).reshape(Bn, T * K, m)
            Wc[:, T * K:] = VT
            out += chain_curvature(Phi.scores(W), Tr, Wc).sum(0)
        return float(out[0, 0]) if one else out

    def _gold_features(self):
        """``-sum_s f_{x_s}(y_s)``: the linear part of ``J`` (``theta^T f`` is the gold sentence's score)."""
        K, F = self.K_, self.F_
        gW = np.zeros((K, F))
        gT = np.zeros((K, K))
        for Phi, ys in self.batches_:
            Bn, T, _ = Phi.shape
            Y1 = np.zeros((Bn, T, K))
            Y1[np.arange(Bn)[:, None], np.arange(T)[None, :], ys] = 1.0
            gW -= Phi.weighted_sum(Y1)
            if T > 1:
                np.add.at(gT, (ys[:, :-1], ys[:, 1:]), -1.0)
        return np.concatenate([gW.ravel(), gT.ravel()])

    def oracle(self, theta, want_sigma=False):
        """``J(theta)``, its gradient and (optionally) the junction-tree bound curvature (dense d x d)."""
        logz, mu, Sig = self.partition_bound(theta, want_sigma)
        val = logz + float(self.linear_ @ theta) + 0.5 * self.lam_ * float(theta @ theta)
        return val, mu + self.linear_ + self.lam_ * theta, Sig

    def _add_sigma(self, Sig, batch, M, T):
        K, F = self.K_, self.F_
        Phi = batch.array()   # the dense bound is (K F)^2 anyway
        Bn = Phi.shape[0]
        nK = T * K
        Mnn = M[:, :nK, :nK].reshape(Bn, T, K, T, K)
        # Y[b, t', f, k, k'] = sum_t phi[b,t,f] M[b,t,k,t',k']
        Y = np.einsum("btf,btkus->bufks", Phi, Mnn, optimize=True)
        G = Phi.reshape(Bn * T, F).T @ Y.reshape(Bn * T, F * K * K)  # (f', (f, k, k'))
        G = G.reshape(F, F, K, K)  # [f', f, k, k']
        WW = G.transpose(2, 1, 3, 0).reshape(K * F, K * F)  # [(k, f), (k', f')]
        Sig[:K * F, :K * F] += WW
        Mnt = M[:, :nK, nK:].reshape(Bn, T, K, K * K)
        WT = np.einsum("btf,btkq->kfq", Phi, Mnt, optimize=True).reshape(K * F, K * K)
        Sig[:K * F, K * F:] += WT
        Sig[K * F:, :K * F] += WT.T
        Sig[K * F:, K * F:] += M[:, nK:, nK:].sum(0)

    # --- fitting ------------------------------------------------------------------------------------------------
    def fit(self, X, Y, **overrides):
        """Fit on token lists ``X`` and tag lists ``Y`` with the estimator's ``method``.

        ``extrapolate`` (majorize only) adds the monotone secant extrapolation of
        :mod:`varopt.solvers.majorize.extrapolate` after every Algorithm 2 step. ``bound_reuse``
        (majorize only; default 100) first tries a quasi-Newton step on the last junction-tree bound
        (at most that many moves old) and keeps it only when the exact objective decreases by 1% of
        what the bound step guarantees, else takes Algorithm 2's step on a fresh bound
        (:mod:`varopt.solvers.majorize.reuse`); ``reuse_metric`` (default ``'scalar'``, L-BFGS's initial
        matrix, measured faster on CoNLL than ``'bound'``) picks its initial matrix. ``bound_reuse=0``
        runs Algorithm 2 at every iteration. ``memory`` (default 30) is the number of L-BFGS pairs kept, by
        ``bound_reuse``'s trials (majorize's ``reuse_pairs``) and by L-BFGS-B (its ``maxcor``; scipy's default is
        10): one evaluation of a CRF costs far more than the O(memory * d) two-loop recursion, and on CoNLL 30
        pairs took 23 / 37 iterations to 1e-4 / 1e-8 against 26 / 48 with 10 (docs/majorize.md section 6). With ``'majorize'`` the
        solver's :class:`~varopt.result.Result` (status ``optimal``, ``iteration_limit``, ``time_limit``,
        ...) is kept as ``result_``; ``history_`` is its history. Passing hyperparameters to ``fit``
        (the old interface) still works for this call, with a DeprecationWarning."""
        params = self.get_params()
        if overrides:
            bad = [k for k in overrides if k not in params]
            if bad:
                raise TypeError(f"ChainCRF.fit() got unexpected keyword arguments {bad}")
            warnings.warn("passing hyperparameters to ChainCRF.fit is deprecated; give them to ChainCRF(...) "
                          "(scikit-learn convention)", DeprecationWarning, stacklevel=2)
            params.update(overrides)
        method, tol, max_iter, time_limit = params["method"], params["tol"], params["max_iter"], params["time_limit"]
        verbose, callback, extrapolate = params["verbose"], params["callback"], params["extrapolate"]
        bound_reuse, reuse_metric, memory = params["bound_reuse"], params["reuse_metric"], params["memory"]
        if isinstance(memory, (bool, np.bool_)) or not isinstance(memory, (int, np.integer)) or memory < 1:
            raise InvalidOptionError(f"memory must be a positive integer (L-BFGS pairs kept), got {memory!r}")
        X, Y = check_sequences(X, Y)
        lam = params["lam"]
        if isinstance(lam, (bool, np.bool_)) or not isinstance(lam, (int, float, np.integer, np.floating)) \
                or not np.isfinite(lam) or lam < 0:
            raise InputDataError(f"lam must be a finite number >= 0, got {lam!r}")
        self.lam_ = float(lam)     # the fit's value (a deprecated fit(..., lam=) override included)
        templates, labels = params["templates"], params["labels"]
        self.templates_ = list(templates) if templates is not None else default_templates()
        # scikit-learn-crfsuite's input (tokens as feature dicts) with the default templates, which would read a
        # dict as the string of its repr (one opaque feature per distinct token: a silent wrong model)
        self._dict_tokens_ = templates is None and any(isinstance(tk, dict) or _name_list(tk) for sent in X
                                                       for tk in sent)
        self.labels_ = (sorted({tg for ys in Y for tg in ys}) if labels is None else list(labels))
        if len(self.labels_) == 0:
            raise InputDataError("empty label set: Omega has no configurations")
        self.label_index_ = {tg: i for i, tg in enumerate(self.labels_)}
        for ys in Y:
            for tg in ys:
                if tg not in self.label_index_:
                    raise InputDataError(f"tag {tg!r} is not in the label set")
        self._build_index(X, params["min_count"], params["max_features"])
        self.K_, self.F_ = len(self.labels_), len(self.vocab_)
        self.d_ = self.K_ * self.F_ + self.K_ ** 2
        self.batches_ = self._prepare(X, Y)
        self.linear_ = self._gold_features()
        theta = np.zeros(self.d_)
        t0 = time.perf_counter()
        self.history_ = []
        self.result_ = None  # the solver's Result (method="majorize")
        if method == "lbfgs":
            from scipy.optimize import minimize

            def fun(th):
                v, g, _ = self.oracle(th)
                self.history_.append(dict(iteration=len(self.history_), time=time.perf_counter() - t0,
                                          objective=v))
                if callback:
                    callback(th, v)
                return v, g
            res = minimize(fun, theta, jac=True, method="L-BFGS-B",
                           options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-10, "maxcor": int(memory)})
            self.theta_ = res.x
            self.n_iter_ = res.nit
            if not res.success:
                # scikit-learn's convention (as its own L-BFGS fits): keep the last iterate, warn
                warnings.warn(f"L-BFGS-B stopped before converging in ChainCRF.fit: {res.message}; the fit is the "
                              "last iterate", ConvergenceWarning, stacklevel=2)
        elif method == "majorize":
            def cb(it, th, f):
                callback(th, f)  # the estimator's callback(theta, J) never stops the run
            res = majorize(self, theta, quadratic=self.lam_, linear=self.linear_, tol=tol, max_iter=max_iter,
                           time_limit=time_limit, verbose=verbose, callback=cb if callback else None, extrapolate=extrapolate,
                           bound_reuse=bound_reuse,
                           **({"reuse_metric": reuse_metric, "reuse_pairs": int(memory)} if bound_reuse else {}))
            if res.status in LIMITS:
                accept_result(res, "majorize", where=" in ChainCRF.fit")  # ConvergenceWarning at a limit
            self.result_ = res
            self.history_ = res.history
            self.theta_ = res.x
            self.n_iter_ = res.iterations
        else:
            raise ValueError(f"unknown method {method!r}: 'majorize' or 'lbfgs'")
        self.W_, self.Tr_ = self._unpack(self.theta_)
        return self

    def objective(self, theta=None):
        return self.oracle(self.theta_ if theta is None else theta)[0]

    def score(self, X, Y):
        """Token accuracy of :meth:`predict` on sentences ``X`` with tags ``Y`` (scikit-learn's ``score``)."""
        X, Y = check_sequences(X, Y)
        pred = self.predict(X)
        n = sum(len(ys) for ys in Y)
        return sum(a == b for p, ys in zip(pred, Y) for a, b in zip(p, ys)) / max(n, 1)

    # --- prediction ---------------------------------------------------------------------------------------------
    def predict(self, X):
        """Viterbi labelling of each sentence."""
        self._check_fitted("W_")
        out = []
        for tk in check_sequences(X):
            if not tk:
                out.append([])
                continue
            S = self._phi(tk) @ self.W_.T
            T = S.shape[0]
            delta = S[0].copy()
            back = np.zeros((T, self.K_), dtype=np.int64)
            for t in range(1, T):
                cand = delta[:, None] + self.Tr_
                back[t] = np.argmax(cand, axis=0)
                delta = cand[back[t], np.arange(self.K_)] + S[t]
            path = [int(np.argmax(delta))]
            for t in range(T - 1, 0, -1):
                path.append(int(back[t][path[-1]]))
            out.append([self.labels_[k] for k in path[::-1]])
        return out
