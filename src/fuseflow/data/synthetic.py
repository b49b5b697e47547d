"""Synthetic graphs shaped like the GCN/GraphSAGE datasets of the reference (§5.2).

Each generator hits its target node count and stored-edge count exactly (scaled by `scale`), has
the target feature width and class count, and is deterministic in `seed`:

- structure: a Chung–Lu graph on power-law expected degrees w_i ∝ i^(-1/(γ-1)) (random node
  order), plus one edge per node first so no node is isolated; for collab and mag the law is
  (i + offset·N)^-alpha, fitted to the published degree statistics (`degrees.py`), for the citation
  sets (and the earlier `collab-unfitted`, `mag-unfitted`) γ = 2.5 calibrated on Cora; a fraction
  `homophily` of the edges pick their second endpoint inside the first endpoint's class (citation
  graphs are homophilous);
- features: binary bag-of-words (Zipf word popularity, part of each node's words from a
  class-specific block) for the citation sets; dense 128-d Gaussians around class centroids for
  collab and mag.

    >>> g = generate("cora", scale=0.1, seed=1)
    >>> g.name, g.num_nodes, g.adjacency.nnz, g.features.shape, g.num_classes
    ('synthetic:cora[scale=0.1,seed=1]', 271, 1056, (271, 1433), 7)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..memory import Budget
from .degrees import PowerLaw, weights
from .graphs import Graph, from_edges

GAMMA = 2.5  # degree exponent; synthetic:cora then has max/mean degree ≈ 40, as Cora (168/3.9 = 43)
CLASS_WORDS = 0.3  # fraction of a node's words drawn from its class's block of the vocabulary


@dataclass(frozen=True)
class SyntheticSpec:
    """Target statistics at scale 1. `stored_edges` counts directed entries as stored (an
    undirected edge is stored twice); `source` says where each number comes from."""

    key: str
    nodes: int
    stored_edges: int
    features: int
    classes: int
    symmetric: bool
    bag_of_words: bool  # binary bag-of-words; otherwise dense Gaussian features
    words_per_node: float  # mean nonzero features per node (bag-of-words only)
    top_word: float  # fraction of nodes that have the most frequent word (bag-of-words only)
    homophily: float  # fraction of edges joining two nodes of the same class
    source: str
    degrees: PowerLaw | None = None  # fitted expected degrees; None: (i + 1)^(-1/(GAMMA-1))


# ogbl-collab's published degrees (235,868 nodes, 2,358,104 stored edges: mean 10.0, std 18.98,
# max 671), fitted by degrees.fit_power_law(DegreeTarget(235868, 2358104, 18.98, 671)): γ = 2.47
COLLAB_DEGREES = PowerLaw(alpha=0.6804, offset=0.0003924)


SPECS = {s.key: s for s in [
    SyntheticSpec("cora", 2708, 10556, 1433, 7, True, True, 18.2, 0.40, 0.81,
                  "reference §5.2 (PyG Planetoid Cora); words/node, top word and homophily measured "
                  "on cora.npz"),
    SyntheticSpec("cora_ml", 2995, 16316, 2879, 7, True, True, 50.5, 0.49, 0.79,
                  "reference §5.2 (PyG CitationFull cora_ml); words/node, top word and homophily "
                  "measured on cora_ml.npz (whose features are weighted, ours binary)"),
    SyntheticSpec("dblp", 17716, 105734, 1639, 4, True, True, 20.0, 0.40, 0.8,
                  "reference §5.2 (PyG CitationFull dblp); words/node, top word and homophily "
                  "assumed Cora-like"),
    SyntheticSpec("collab", 235868, 2358104, 128, 2, True, False, 0.0, 0.0, 0.5,
                  "OGB ogbl-collab: 2,358,104 stored edges (1,179,052 distinct collaborations, both "
                  "ways), degrees fitted to mean 10.0, std 18.98, max 671; ogbl has no classes, 2 as "
                  "the reference's default, so labels carry no signal", COLLAB_DEGREES),
    SyntheticSpec("mag", 736389, 5416271, 128, 349, False, False, 0.0, 0.0, 0.5,
                  "reference §5.2 (OGB ogbn-mag paper-cites-paper, directed); homophily assumed; "
                  "degree shape (alpha, offset) of the collab fit, no spread of MAG's being at hand",
                  COLLAB_DEGREES),
    SyntheticSpec("collab-unfitted", 235868, 2 * 1285465, 128, 2, True, False, 0.0, 0.0, 0.5,
                  "the earlier collab twin: OGB's 1,285,465 collaborations (duplicates counted) "
                  "stored both ways, γ = 2.5 (hubs of about 10^4 neighbours)"),
    SyntheticSpec("mag-unfitted", 736389, 5416271, 128, 349, False, False, 0.0, 0.0, 0.5,
                  "the earlier mag twin: γ = 2.5 (hubs of about 10^4 neighbours)"),
]}


def scaled_size(spec: SyntheticSpec, scale: float) -> tuple[int, int]:
    """(nodes, stored edges) at `scale`: both multiplied, at least max(classes, 2) nodes, and no
    more edges than a simple graph on those nodes can hold (symmetric counts stay even)."""
    n = max(int(round(spec.nodes * scale)), spec.classes, 2)
    if spec.symmetric:
        pairs = min(int(round(spec.stored_edges / 2 * scale)), n * (n - 1) // 2)
        return n, 2 * pairs
    return n, min(int(round(spec.stored_edges * scale)), n * (n - 1))


def generate(key: str, *, scale: float = 1.0, seed: int = 0, budget=None) -> Graph:
    """The synthetic graph `synthetic:<key>` at `scale` (nodes and edges multiplied) and `seed`;
    its size is checked against `budget` (a `fuseflow.memory.Budget`) before anything is drawn."""
    if key not in SPECS:
        raise UserError(f"unknown synthetic dataset 'synthetic:{key}'",
                        fix=f"use one of {', '.join('synthetic:' + k for k in SPECS)}")
    if not (isinstance(scale, (int, float)) and np.isfinite(scale) and scale > 0):
        raise UserError(f"scale must be a positive number, got {scale!r}", where=f"synthetic:{key}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}", where=f"synthetic:{key}")
    spec = SPECS[key]
    n, stored = scaled_size(spec, float(scale))
    # dense float64 features (as models bind them) and about six int64 arrays per stored edge
    (budget or Budget()).check(n * spec.features * 8 + stored * 8 * 6,
                               f"synthetic:{key} at scale {scale:g} ({n:,} nodes, {stored:,} edges)")
    # the twins of one dataset share a random stream: `collab-unfitted` is what `collab` was before the fit
    rng = np.random.default_rng([seed, _stable_hash(key.split("-")[0])])
    labels = _labels(n, spec.classes, rng)
    base = (np.arange(n) + 1.0) ** (-1.0 / (GAMMA - 1.0)) if spec.degrees is None else weights(spec.degrees, n)
    w_out = base[rng.permutation(n)]
    w_in = w_out if spec.symmetric else base[rng.permutation(n)]
    target = stored // 2 if spec.symmetric else stored
    # a global draw lands in the source's class with probability Σ_c share_c², so pick within the
    # class only often enough that the total fraction of same-class edges is spec.homophily
    share = np.bincount(labels, weights=w_in, minlength=spec.classes) / w_in.sum()
    chance = float(share @ share)
    within = max(0.0, (spec.homophily - chance) / (1.0 - chance)) if chance < 1 else 0.0
    keys = _edges(n, target, w_out, w_in, labels, within, spec.symmetric, rng)
    features = (_bag_of_words(n, spec, labels, rng) if spec.bag_of_words
                else _dense(n, spec.features, spec.classes, labels, rng))
    suffix = "" if (scale == 1 and seed == 0) else f"[scale={scale:g},seed={seed}]"
    return from_edges(f"synthetic:{key}{suffix}", keys // n, keys % n, n, features, labels,
                      symmetrize=spec.symmetric)


def _stable_hash(text: str) -> int:
    return int.from_bytes(text.encode(), "little") % (2**32)


def _labels(n: int, classes: int, rng) -> np.ndarray:
    """Uneven class sizes (Dirichlet proportions); every class has at least one node."""
    proportions = rng.dirichlet(np.full(classes, 3.0))
    labels = rng.choice(classes, size=n, p=proportions)
    labels[:classes] = np.arange(classes)
    return rng.permutation(labels).astype(np.int64)


class _Sampler:
    """Draws nodes with probability ∝ weight, globally or within one class."""

    def __init__(self, weights: np.ndarray, labels: np.ndarray, rng):
        self.rng, self.labels = rng, labels
        self.cum = np.cumsum(weights)
        self.order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=int(labels.max()) + 1)
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        self.class_cum = [np.cumsum(weights[self.order[a:b]])
                          for a, b in zip(self.starts[:-1], self.starts[1:])]

    def draw(self, k: int) -> np.ndarray:
        return _pick(self.cum, k, self.rng)

    def draw_partners(self, u: np.ndarray, homophily: float) -> np.ndarray:
        v = self.draw(len(u))
        same = np.flatnonzero(self.rng.random(len(u)) < homophily)
        if same.size:
            by_class = same[np.argsort(self.labels[u[same]], kind="stable")]
            classes, counts = np.unique(self.labels[u[by_class]], return_counts=True)
            start = 0
            for c, k in zip(classes, counts):
                pos = _pick(self.class_cum[c], k, self.rng)
                v[by_class[start:start + k]] = self.order[self.starts[c] + pos]
                start += k
        return v


def _pick(cum: np.ndarray, k: int, rng) -> np.ndarray:
    """k i.i.d. indices with probability ∝ the increments of `cum`. Sorted needles make
    searchsorted cache-friendly (4× faster on MAG); the shuffle makes the draws i.i.d. again."""
    needles = np.sort(rng.random(k)) * cum[-1]
    picks = np.minimum(np.searchsorted(cum, needles, side="right"), len(cum) - 1)
    return picks[rng.permutation(k)]


def _edges(n, target, w_out, w_in, labels, homophily, symmetric, rng) -> np.ndarray:
    """`target` distinct edge keys (u*n + v; u < v when symmetric), no self loops."""
    sources, partners = _Sampler(w_out, labels, rng), _Sampler(w_in, labels, rng)

    def keyed(u, v):
        keep = u != v
        u, v = u[keep], v[keep]
        if symmetric:
            u, v = np.minimum(u, v), np.maximum(u, v)
        return u.astype(np.int64) * n + v

    def first_seen(keys):
        _, first = np.unique(keys, return_index=True)
        return keys[np.sort(first)]

    u = rng.permutation(n)  # one edge per node first: no isolated nodes
    v = partners.draw_partners(u, homophily)
    for _ in range(100):
        loops = np.flatnonzero(u == v)
        if not loops.size:
            break
        v[loops] = partners.draw_partners(u[loops], homophily)
    keys = first_seen(keyed(u, v))
    for _ in range(40):
        if len(keys) >= target:
            break
        batch = int((target - len(keys)) * 1.3) + 64
        u = sources.draw(batch)
        keys = first_seen(np.concatenate([keys, keyed(u, partners.draw_partners(u, homophily))]))
    while len(keys) < target:  # nearly complete graphs: finish with uniformly chosen pairs
        if n <= 4096:
            every = keyed(*[a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij")])
            keys = np.concatenate([keys, rng.permutation(np.setdiff1d(np.unique(every), keys))])
        else:
            batch = 2 * (target - len(keys)) + 64
            keys = first_seen(np.concatenate([keys, keyed(rng.integers(0, n, batch),
                                                          rng.integers(0, n, batch))]))
    return keys[:target]


def _zipf_exponent(vocabulary: int, words_per_node: float, top_word: float) -> float:
    """The exponent s of word popularity ∝ rank^-s for which the most popular word turns up in a
    fraction `top_word` of the documents (`words_per_node` draws each, a share CLASS_WORDS of
    them from the class's own block instead)."""
    per_draw = (1.0 - (1.0 - top_word) ** (1.0 / words_per_node)) / (1.0 - CLASS_WORDS)
    ranks = np.arange(1.0, vocabulary + 1.0)
    low, high = 0.0, 4.0
    for _ in range(60):  # the top word's share 1 / Σ r^-s grows with s
        mid = (low + high) / 2
        low, high = (mid, high) if 1.0 / np.sum(ranks ** -mid) < per_draw else (low, mid)
    return (low + high) / 2


def _bag_of_words(n: int, spec: SyntheticSpec, labels: np.ndarray, rng) -> np.ndarray:
    """Binary features: Poisson(words_per_node) distinct words per node (at least one)."""
    f = spec.features
    counts = np.minimum(np.maximum(1, rng.poisson(spec.words_per_node, size=n)), f)
    popularity = (np.arange(f) + 1.0) ** -_zipf_exponent(f, spec.words_per_node, spec.top_word)
    cum = np.cumsum(popularity)
    block = max(f // spec.classes, 1)
    rank_to_word = rng.permutation(f)
    x = np.zeros((n, f), dtype=np.float32)
    missing = counts.copy()
    for _ in range(20):  # draw, then redraw the words that repeated
        rows = np.repeat(np.arange(n), missing)
        if not rows.size:
            break
        words = rank_to_word[np.minimum(np.searchsorted(cum, rng.random(len(rows)) * cum[-1],
                                                        side="right"), f - 1)]
        own = rng.random(len(rows)) < CLASS_WORDS
        words[own] = (labels[rows[own]] * block + rng.integers(0, block, int(own.sum()))) % f
        x[rows, words] = 1.0
        missing = counts - np.count_nonzero(x, axis=1)
    return x


def _dense(n: int, f: int, classes: int, labels: np.ndarray, rng) -> np.ndarray:
    centroids = rng.standard_normal((classes, f), dtype=np.float32)
    x = rng.standard_normal((n, f), dtype=np.float32)
    for start in range(0, n, 65536):
        x[start:start + 65536] += centroids[labels[start:start + 65536]]
    return x
