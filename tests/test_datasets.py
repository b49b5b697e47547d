"""Datasets after `pip install`: shipped real graphs, checked downloads into a cache (served
here from a local HTTP server on 127.0.0.1), and graphs from scipy and PyG-style objects."""
from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import threading

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import fuseflow
from fuseflow import UserError
from fuseflow.data import cache_dir, catalogue, from_pyg, from_scipy, karate, load_graph, save_graph
from fuseflow.models.registry import build


def one_line(fn, *args, **kwargs) -> str:
    with pytest.raises(UserError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message and message
    return message


# ---- shipped graphs ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(catalogue.SHIPPED))
def test_shipped_files_match_their_checksums(name):
    path = catalogue.shipped_path(name)
    assert catalogue.sha256_of(path) == catalogue.SHIPPED[name].sha256
    assert path.stat().st_size < 2_000_000  # the four together are about 2.7 MB, DBLP 1.6 MB


def test_cora_needs_no_data_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSEFLOW_DATA", str(tmp_path / "empty"))  # nothing there, nothing needed
    graph = load_graph("cora")
    assert (graph.num_nodes, graph.adjacency.nnz) == (2708, 10556)
    assert not (tmp_path / "empty").exists()


def test_real_dblp_is_shipped(monkeypatch, tmp_path):
    """The CitationFull DBLP graph: the counts PyG's CitationFull('DBLP') reports, symmetric,
    binary bag-of-words features at 0.318 % density, checked against its checksum on load."""
    monkeypatch.setenv("FUSEFLOW_DATA", str(tmp_path / "empty"))
    catalogue.verified_path.cache_clear()
    graph = load_graph("dblp")
    stats = graph.describe()
    assert (stats.nodes, stats.stored_edges, graph.features.shape, stats.classes) == (
        17716, 105734, (17716, 1639), 4)
    assert stats.symmetric and stats.isolated_nodes == 0 and stats.max_degree == 339
    assert set(np.unique(graph.features)) == {0.0, 1.0}
    assert round(stats.feature_density, 5) == 0.00318
    assert catalogue.verified_path.cache_info().misses == 1  # the checksum was checked
    assert "dblp" in fuseflow.data.list_datasets() and "synthetic:dblp" in fuseflow.data.list_datasets()


def test_a_tampered_shipped_file_is_refused(monkeypatch, tmp_path):
    copy = tmp_path / "cora.npz"
    shutil.copy(catalogue.shipped_path("cora"), copy)
    with open(copy, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\0\0\0\0")
    monkeypatch.setattr(catalogue, "shipped_path", lambda name: copy)
    catalogue.verified_path.cache_clear()
    try:
        assert "does not match its checksum" in one_line(load_graph, "cora")
    finally:
        catalogue.verified_path.cache_clear()


def test_a_data_dir_copy_wins_over_the_shipped_one(tmp_path):
    save_graph(karate(), tmp_path / "cora.npz")
    assert load_graph("cora", data_dir=tmp_path).num_nodes == 34


# ---- downloads -----------------------------------------------------------------------------------

@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving tmp_path/www; yields (base URL, served directory, hits)."""
    root = tmp_path / "www"
    root.mkdir()
    hits = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep test output clean
            pass

        def do_GET(self):
            hits.append(self.path)
            super().do_GET()

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root, hits
    finally:
        httpd.shutdown()
        httpd.server_close()


def served_karate(root) -> str:
    save_graph(karate(), root / "club.npz")
    return hashlib.sha256((root / "club.npz").read_bytes()).hexdigest()


def test_download_once_then_read_from_the_cache(server, tmp_path):
    base, root, hits = server
    digest = served_karate(root)
    url = f"{base}/club.npz#sha256={digest}"
    cache = tmp_path / "cache"
    first = load_graph(url, data_dir=cache)
    assert first.num_nodes == 34 and hits == ["/club.npz"]
    assert [p.name for p in cache.iterdir()] == [f"club-{digest[:12]}.npz"]  # no temporary left
    (root / "club.npz").unlink()  # the server no longer has it: the cached copy is used
    again = load_graph(url, data_dir=cache)
    assert (again.adjacency != first.adjacency).nnz == 0 and hits == ["/club.npz"]


def test_the_cache_directory_follows_fuseflow_data(server, tmp_path, monkeypatch):
    base, root, _ = server
    digest = served_karate(root)
    monkeypatch.setenv("FUSEFLOW_DATA", str(tmp_path / "env-cache"))
    assert cache_dir() == tmp_path / "env-cache"
    load_graph(f"{base}/club.npz#sha256={digest}")
    assert len(list((tmp_path / "env-cache").iterdir())) == 1


def test_a_wrong_checksum_keeps_nothing(server, tmp_path):
    base, root, _ = server
    served_karate(root)
    cache = tmp_path / "cache"
    message = one_line(load_graph, f"{base}/club.npz#sha256={'0' * 64}", data_dir=cache)
    assert "expected 0000" in message and "nothing was kept" in message
    assert list(cache.iterdir()) == []


def test_download_errors_are_one_line(server, tmp_path):
    base, root, _ = server
    served_karate(root)
    assert "needs its SHA-256" in one_line(load_graph, f"{base}/club.npz", data_dir=tmp_path)
    assert "HTTP 404" in one_line(load_graph, f"{base}/missing.npz#sha256={'a' * 64}", data_dir=tmp_path)
    closed = "http://127.0.0.1:9/club.npz#sha256=" + "a" * 64  # port 9 (discard) is not listening
    assert "download failed" in one_line(load_graph, closed, data_dir=tmp_path)


def test_a_download_larger_than_the_budget_is_stopped(server, tmp_path):
    base, root, _ = server
    digest = served_karate(root)
    message = one_line(load_graph, f"{base}/club.npz#sha256={digest}", data_dir=tmp_path / "cache",
                       budget=fuseflow.Budget(1000))
    assert "download of" in message and "the limit of 1000 B" in message
    assert list((tmp_path / "cache").iterdir()) == []


# ---- adapters ------------------------------------------------------------------------------------

def test_from_scipy_gives_the_same_graph():
    club = karate()
    weighted = club.adjacency * 3.0 + sp.eye(34, format="csr")  # weights and self loops are dropped
    graph = from_scipy(weighted, club.features, club.labels, name="club")
    assert (graph.adjacency != club.adjacency).nnz == 0 and graph.name == "club"
    np.testing.assert_array_equal(graph.labels, club.labels)


def test_from_pyg_takes_torch_tensors_without_pyg():
    club = karate()
    rows, cols = club.adjacency.nonzero()

    class Data:  # the attributes torch_geometric.data.Data has
        edge_index = torch.tensor(np.stack([rows, cols]))
        x = torch.tensor(club.features, dtype=torch.float32)
        y = torch.tensor(club.labels)
        num_nodes = 34

    graph = from_pyg(Data(), name="club")
    assert (graph.adjacency != club.adjacency).nnz == 0
    np.testing.assert_array_equal(graph.features, club.features)


@pytest.mark.parametrize("make, needle", [
    (lambda c: from_scipy(sp.random(3, 4, density=0.5), np.ones((3, 1))), "must be square"),
    (lambda c: from_scipy(c.adjacency, np.ones((5, 2))), "expected (34, F)"),
    (lambda c: from_scipy(c.adjacency, c.features, np.full(34, 0.5)), "fractional labels"),
    (lambda c: from_scipy(c.adjacency, np.full((34, 2), np.nan)), "NaN"),
    (lambda c: from_pyg(object()), "no edge_index"),
])
def test_adapter_errors(make, needle):
    assert needle in one_line(make, karate())


def test_a_graph_object_runs_through_a_built_in_model():
    club = karate()
    case = build("gcn", dataset=from_scipy(club.adjacency, club.features, club.labels, name="club"))
    assert case.dataset == "club" and case.inputs["A"].shape == (34, 34)
    result = fuseflow.simulate(case.program, case.presets["partial"], case.inputs)
    assert result.verified


def test_a_gcn_study_builds_on_real_dblp():
    """Every preset of GCN compiles on the real DBLP and is estimated (simulating it whole takes
    minutes: the suite does that); the estimates see the real graph's 105,734 edges."""
    case = build("gcn", dataset="dblp")
    assert case.inputs["A"].shape == (17716, 17716) and case.inputs["A"].nnz == 105734
    study = fuseflow.study(case, max_tokens=0)
    assert study.dataset == "dblp"
    rows = study.to_json()
    assert [r["schedule"] for r in rows] == ["unfused", "partial", "full"]
    assert all(r["est_cycles"] > 0 and "token events" in r["skipped"] for r in rows)
