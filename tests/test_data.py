"""Datasets: built-in, .npz files, real citation graphs, synthetic generators, Planetoid raw files
(read with a restricted unpickler) and the one-line errors for bad input."""
from __future__ import annotations

import builtins
import os
import pickle
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow import UserError
from fuseflow.data import (
    SYNTHETIC_SPECS,
    Graph,
    from_edges,
    karate,
    list_datasets,
    load_graph,
    load_planetoid,
    save_graph,
)
from fuseflow.data.degrees import DegreeTarget, fit_power_law
from fuseflow.data.synthetic import COLLAB_DEGREES, scaled_size


def one_line(fn, *args, **kwargs) -> str:
    with pytest.raises(UserError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message and message
    return message


def same_graph(a: Graph, b: Graph) -> None:
    assert a.adjacency.shape == b.adjacency.shape
    assert (a.adjacency != b.adjacency).nnz == 0
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.labels, b.labels)


# ---- built-in and statistics -------------------------------------------------------------------

def test_karate_stats():
    s = karate().describe()
    # Zachary's club: 34 members, 78 friendships stored both ways, instructor (node 33) has 17
    assert (s.nodes, s.stored_edges, s.classes, s.feature_dim) == (34, 156, 2, 34)
    assert s.symmetric and s.isolated_nodes == 0 and s.max_degree == 17
    assert s.mean_degree == pytest.approx(156 / 34) and s.density == pytest.approx(156 / 34**2)
    assert s.feature_density == pytest.approx(1 / 34)  # one-hot features
    assert "karate: 34 nodes, 156 stored edges (symmetric)" in str(s)


def test_list_datasets_names_everything_load_graph_accepts():
    names = list_datasets()
    assert names[:4] == ["karate", "cora", "citeseer", "cora_ml"]
    assert {f"synthetic:{k}" for k in ("cora", "cora_ml", "dblp", "collab", "mag")} <= set(names)


def test_from_edges_drops_self_loops_and_duplicates():
    g = from_edges("t", [0, 0, 1, 2, 2], [1, 1, 1, 0, 2], 3, np.zeros((3, 1)), [0, 0, 1])
    assert sorted(zip(*g.adjacency.nonzero())) == [(0, 1), (2, 0)]
    assert set(g.adjacency.data) == {1.0}


# ---- .npz files --------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [karate, lambda: load_graph("synthetic:mag", scale=0.001, seed=3)])
def test_npz_round_trip(tmp_path, make):
    g = make()
    path = tmp_path / "g.npz"
    save_graph(g, path)
    back = load_graph(str(path))
    same_graph(g, back)
    assert back.name == g.name and back.features.dtype == g.features.dtype
    with np.load(path, allow_pickle=False) as z:  # the documented keys, readable without pickle
        assert {"adj_indptr", "adj_indices", "x_indptr", "x_indices", "x_data", "x_shape", "y"} <= set(z.files)


def test_npz_without_name_is_named_after_the_file(tmp_path):
    save_graph(karate(), tmp_path / "g.npz")
    with np.load(tmp_path / "g.npz") as z:
        arrays = {k: z[k] for k in z.files if k != "name"}
    np.savez(tmp_path / "club.npz", **arrays)
    assert load_graph(tmp_path / "club.npz").name == "club"


def test_real_cora_stats():
    s = load_graph("cora").describe()  # the copy shipped with the package
    # reference §5.2: Cora = 2,708 nodes, 10,556 directed edges, 1,433 features, 7 classes
    assert (s.nodes, s.stored_edges, s.feature_dim, s.classes) == (2708, 10556, 1433, 7)
    assert s.symmetric and s.max_degree > 10 * s.mean_degree  # heavy tail the generators copy


@pytest.mark.parametrize("name,stats", [("citeseer", (3327, 9104, 3703, 6)),
                                        ("cora_ml", (2995, 16316, 2879, 7))])
def test_real_citation_stats(name, stats):
    # citeseer: PyG Planetoid CiteSeer; cora_ml: reference §5.2 (≈2,995 / 16,316 / 2,879 / 7)
    s = load_graph(name).describe()
    assert (s.nodes, s.stored_edges, s.feature_dim, s.classes) == stats


# ---- synthetic generators ----------------------------------------------------------------------

# (key, scale) pairs that run in well under a second each; the citation sets at full size
SIZES = [("cora", 1.0), ("cora_ml", 1.0), ("dblp", 1.0), ("collab", 0.01), ("mag", 0.01),
         ("cora", 0.01)]


@pytest.mark.slow
@pytest.mark.parametrize("key,scale", SIZES)
def test_synthetic_hits_target_sizes(key, scale):
    spec = SYNTHETIC_SPECS[key]
    g = load_graph(f"synthetic:{key}", scale=scale)
    s = g.describe()
    n, stored = scaled_size(spec, scale)
    # scaled targets: round(nodes·scale) and round(edges·scale); the generator draws edges until
    # the count is reached, so the tolerance is zero
    assert n == max(round(spec.nodes * scale), spec.classes)
    assert abs(stored - spec.stored_edges * scale) <= 2
    assert (s.nodes, s.stored_edges) == (n, stored)
    assert (s.feature_dim, s.classes, s.symmetric) == (spec.features, spec.classes, spec.symmetric)
    assert g.adjacency.diagonal().sum() == 0 and set(g.adjacency.data) == {1.0}
    assert s.isolated_nodes == 0
    assert g.features.dtype == np.float32
    if not spec.bag_of_words:
        assert s.feature_density == 1.0
        return
    assert set(np.unique(g.features)) == {0.0, 1.0}
    if scale == 1.0:
        # Poisson(words_per_node) distinct words per node: mean within 5 % of the target
        assert s.feature_density * s.feature_dim == pytest.approx(spec.words_per_node, rel=0.05)


@pytest.mark.parametrize("key", ["cora", "cora_ml", "dblp"])
def test_synthetic_degrees_are_heavy_tailed(key):
    s = load_graph(f"synthetic:{key}").describe()
    # real Cora: max 168 vs mean 3.9 (43×); a Poisson (Erdős–Rényi) graph would give about 3×
    assert s.max_degree > 10 * s.mean_degree


def degree_stats(graph) -> tuple[float, float, int]:
    out = np.diff(graph.adjacency.indptr)
    return float(out.mean()), float(out.std()), int(out.max())


@pytest.mark.parametrize("scale", [0.1, pytest.param(1.0, marks=pytest.mark.slow)])
def test_collab_twin_matches_the_published_degrees(scale):
    """ogbl-collab: mean degree 10.0, std 18.98, max 671 (the fit's targets); the fitted shape is
    relative to the node count, so a tenth of the graph nearly keeps it (std 18.5, max 583 there)."""
    mean, std, top = degree_stats(load_graph("synthetic:collab", scale=scale))
    assert mean == pytest.approx(2358104 / 235868, rel=1e-3)
    assert std == pytest.approx(18.98, rel=0.01 if scale == 1.0 else 0.05)
    assert top == pytest.approx(671, rel=0.03 if scale == 1.0 else 0.15)


def test_unfitted_twins_stay_available():
    """The earlier twins (γ = 2.5, hubs of ~10^4 neighbours at full size) under their own names."""
    assert {"synthetic:collab-unfitted", "synthetic:mag-unfitted"} <= set(list_datasets())
    fitted = degree_stats(load_graph("synthetic:collab", scale=0.05))
    unfitted = degree_stats(load_graph("synthetic:collab-unfitted", scale=0.05))
    assert unfitted[2] > 2 * fitted[2] and unfitted[0] == pytest.approx(2 * 1285465 / 235868, rel=1e-3)


@pytest.mark.slow
def test_mag_twin_has_the_published_counts_and_no_giant_hubs():
    g = load_graph("synthetic:mag")
    mean, std, top = degree_stats(g)
    assert (g.num_nodes, g.adjacency.nnz) == (736389, 5416271) and not g.describe().symmetric
    assert 300 < top < 1000 and 10 < std < 20  # collab's shape at MAG's mean degree (7.36)


@pytest.mark.slow
def test_the_collab_fit_reproduces_its_recorded_shape():
    fit = fit_power_law(DegreeTarget(235868, 2358104, 18.98, 671))
    assert fit.alpha == pytest.approx(COLLAB_DEGREES.alpha, abs=1e-3)
    assert fit.offset == pytest.approx(COLLAB_DEGREES.offset, rel=0.01)


def test_synthetic_homophily_matches_spec():
    g = load_graph("synthetic:cora")
    a = g.adjacency.tocoo()
    same = np.mean(g.labels[a.row] == g.labels[a.col])
    assert same == pytest.approx(SYNTHETIC_SPECS["cora"].homophily, abs=0.05)  # Cora: 0.81


def test_synthetic_is_deterministic_by_seed():
    a, b = load_graph("synthetic:cora", seed=7), load_graph("synthetic:cora", seed=7)
    same_graph(a, b)
    c = load_graph("synthetic:cora", seed=8)
    assert (a.adjacency != c.adjacency).nnz > 0
    assert a.name == "synthetic:cora[scale=1,seed=7]" and load_graph("synthetic:cora").name == "synthetic:cora"


def test_tiny_scale_still_a_valid_graph():
    g = load_graph("synthetic:cora", scale=0.001)  # 7 nodes (one per class), 5 pairs
    assert g.num_nodes == 7 and g.num_classes == 7 and g.adjacency.nnz == 10
    # dblp at 2e-4: 4 nodes (one per class) but round(52,867·2e-4) = 11 pairs > 6: capped, K4
    g = load_graph("synthetic:dblp", scale=0.0002)
    assert g.num_nodes == 4 and g.adjacency.nnz == 12


# ---- Planetoid raw files -----------------------------------------------------------------------

def one_hot(labels, classes=3):
    return np.eye(classes, dtype=np.int64)[labels]


def legacy(data: bytes) -> bytes:
    """Rename globals as a Python 2 / old numpy+scipy pickle spells them (protocol ≤ 2 writes
    globals as text lines, so a plain byte replacement is a valid rename)."""
    return (data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
                .replace(b"scipy.sparse._csr", b"scipy.sparse.csr"))


def write_planetoid(directory: Path, name: str = "tiny", graph=None):
    """A 10-node Planetoid dataset: 6 nodes in allx (3 of them labelled in x), test nodes 8, 6, 9
    in tx (file order), node 7 absent from tx like CiteSeer's isolated test nodes."""
    rng = np.random.default_rng(0)
    feats = (rng.random((10, 5)) < 0.5).astype(np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2, 1, 0, 2, 1])
    test_index = [8, 6, 9]
    parts = {
        "x": sp.csr_matrix(feats[:3]), "y": one_hot(labels[:3]),
        "allx": sp.csr_matrix(feats[:6]), "ally": one_hot(labels[:6]),
        "tx": sp.csr_matrix(feats[test_index]), "ty": one_hot(labels[test_index]),
        "graph": graph if graph is not None else defaultdict(
            list, {0: [1, 2, 2], 1: [0], 2: [0, 2], 3: [4], 6: [8, 9], 8: [6], 9: [6, 5]}),
    }
    for part, obj in parts.items():
        data = pickle.dumps(obj, protocol=0 if part == "allx" else 2)  # 0: via copy_reg
        if part in ("x", "tx", "y"):
            data = legacy(data)
            assert b"numpy.core.multiarray" in data
        (directory / f"ind.{name}.{part}").write_bytes(data)
    (directory / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_index))
    expected_feats = feats.copy()
    expected_feats[7] = 0  # missing from tx: a zero row, label 0 (argmax of a zero row)
    expected_labels = labels.copy()
    expected_labels[7] = 0
    return expected_feats, expected_labels


def test_planetoid_reader_assembles_like_pyg(tmp_path):
    feats, labels = write_planetoid(tmp_path)
    g = load_planetoid(tmp_path, "tiny")
    np.testing.assert_array_equal(g.features, feats)
    np.testing.assert_array_equal(g.labels, labels)
    # adjacency lists made symmetric; the self loop 2→2 and the duplicate 0→2 dropped
    undirected = {(0, 1), (0, 2), (3, 4), (6, 8), (6, 9), (5, 9)}
    expected = undirected | {(v, u) for u, v in undirected}
    assert set(zip(*map(np.ndarray.tolist, g.adjacency.nonzero()))) == expected
    assert g.num_nodes == 10 and g.describe().isolated_nodes == 1  # node 7


def test_load_graph_falls_back_to_planetoid_raw_files(tmp_path):
    raw = tmp_path / "Cora" / "raw"  # PyG's layout
    raw.mkdir(parents=True)
    feats, _ = write_planetoid(raw, "cora")
    g = load_graph("cora", data_dir=tmp_path)
    assert g.name == "cora" and g.num_nodes == 10
    np.testing.assert_array_equal(g.features, feats)


class RunsShell:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class RunsEval:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return builtins.eval, (f"open({str(self.marker)!r}, 'w').close()",)


class RunsSubprocess:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return subprocess.call, (["touch", str(self.marker)],)


@pytest.mark.parametrize("evil,refused", [
    (RunsShell, {f"{os.system.__module__}.system"}),  # posix.system on Linux
    (RunsEval, {"__builtin__.eval", "builtins.eval"}),  # protocol 2 writes the Python 2 name
    (RunsSubprocess, {"subprocess.call", "commands.call"}),  # likewise
])
def test_planetoid_refuses_code_in_pickles(tmp_path, evil, refused):
    marker = tmp_path / "pwned"
    # hidden inside an otherwise ordinary adjacency dict
    write_planetoid(tmp_path, graph=defaultdict(list, {0: [1], 1: [evil(marker)]}))
    message = one_line(load_planetoid, tmp_path, "tiny")
    assert message.split("refusing to unpickle ")[1].split(":")[0] in refused
    assert message.startswith(str(tmp_path / "ind.tiny.graph"))
    assert not marker.exists()


def test_planetoid_errors(tmp_path):
    write_planetoid(tmp_path)
    (tmp_path / "ind.tiny.ty").unlink()
    assert "ind.tiny.ty" in one_line(load_planetoid, tmp_path, "tiny")
    write_planetoid(tmp_path)
    (tmp_path / "ind.tiny.x").write_bytes(pickle.dumps(np.arange(3), protocol=2)[:-9])
    assert "malformed Planetoid pickle" in one_line(load_planetoid, tmp_path, "tiny")
    write_planetoid(tmp_path, graph={0: [1], 1: [42]})
    assert "outside 0..9" in one_line(load_planetoid, tmp_path, "tiny")


# ---- errors ------------------------------------------------------------------------------------

def test_unknown_names():
    assert "unknown dataset 'pubmd'" in one_line(load_graph, "pubmd")
    assert "synthetic:cora" in one_line(load_graph, "synthetic:corra")
    assert "scale applies to synthetic" in one_line(load_graph, "karate", scale=0.5)
    assert "positive" in one_line(load_graph, "synthetic:cora", scale=0)
    assert "non-negative integer" in one_line(load_graph, "synthetic:cora", seed=-1)


def test_missing_files(tmp_path):
    message = one_line(load_graph, "cora", data_dir=tmp_path)
    assert "cora.npz not found" in message and str(tmp_path) in message
    missing = tmp_path / "nope.npz"
    assert one_line(load_graph, str(missing)).startswith(f"{missing}: graph file not found")


def test_a_data_dir_without_the_file_names_it_and_the_shipped_copy(tmp_path):
    message = one_line(load_graph, "citeseer", data_dir=tmp_path)
    assert message.startswith(f"{tmp_path}: dataset file citeseer.npz not found") and "drop --data-dir" in message


def rewrite(tmp_path: Path, **changes) -> Path:
    """karate as .npz with some arrays replaced (None: removed)."""
    save_graph(karate(), tmp_path / "ok.npz")
    with np.load(tmp_path / "ok.npz") as z:
        arrays = {k: z[k] for k in z.files}
    for key, value in changes.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("changes,needle", [
    (dict(y=None, x_shape=None), "missing key(s) x_shape, y"),
    (dict(y=np.zeros(33, dtype=np.int64)), "y has 33 labels but the adjacency has 34 nodes"),
    (dict(x_shape=np.array([30, 34])), "has 30 rows but the adjacency has 34 nodes"),
    (dict(adj_indptr=np.arange(35)), "adj_indptr is not a valid row-pointer array"),
    (dict(adj_indices=np.full(156, 99)), "adj_indices out of range for 34 nodes"),
    (dict(x_indices=np.full(34, 50)), "x_indices out of range for 34 features"),
    (dict(x_data=np.ones(3)), "x_indices has 34 entries but x_data has 3"),
    (dict(adj_indices=np.zeros(156, dtype=np.int64)), "self loop"),
    (dict(y=np.zeros(34)), "y must be a 1-d integer array"),
])
def test_malformed_npz(tmp_path, changes, needle):
    path = rewrite(tmp_path, **changes)
    message = one_line(load_graph, path)
    assert needle in message and message.startswith(str(path))


def test_unreadable_npz(tmp_path):
    text = tmp_path / "text.npz"
    text.write_text("not a zip")
    assert "not a readable .npz" in one_line(load_graph, text)
    objects = tmp_path / "objects.npz"
    np.savez(objects, adj_indptr=np.array([{"a": 1}], dtype=object))
    assert "adj_indptr has dtype object" in one_line(load_graph, objects)


def test_save_graph_refuses_self_loops(tmp_path):
    g = karate()
    g.adjacency = g.adjacency + sp.eye(34, format="csr")
    assert "self loops" in one_line(save_graph, g, tmp_path / "g.npz")
