"""A dense matrix stored compressed is converted a piece of rows at a time (`sim.storage
._dense_compressed`), with the CSR arrays scipy's own conversion gives, in either mode order."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.sim import storage


@pytest.mark.parametrize("shape", [(13, 5), (1, 9), (9, 1), (0, 3), (40, 17)])
def test_dense_to_compressed_in_pieces_equals_scipy(monkeypatch, shape):
    monkeypatch.setattr(storage, "DENSE_PIECE", 7)  # pieces of one or a few rows
    rng = np.random.default_rng(len(shape) + shape[0])
    m = rng.random(shape) * (rng.random(shape) < 0.4)
    for matrix in (m, m.T):
        got, want = storage._dense_compressed(matrix), sp.csr_array(matrix)
        want.sort_indices()
        assert got.shape == want.shape
        assert got.indptr.tolist() == want.indptr.tolist() and got.indices.tolist() == want.indices.tolist()
        assert got.data.tolist() == want.data.tolist()


@pytest.mark.parametrize("fmt,fill", [("dense,dense", 0.0), ("dense,compressed;block=4x4", 0.0),
                                      ("dense,dense", float("-inf"))])
def test_stored_tensor_travels_packed_and_comes_back_the_same(monkeypatch, fmt, fill):
    """A stored tensor pickled (to a dask worker) sends only its values other than fill when
    they are few, and unpickles bit for bit: -0.0, NaN and the fill where they were."""
    import pickle  # noqa: PLC0415 - only this test

    from fuseflow.ir.formats import TensorFormat  # noqa: PLC0415 - only this test

    monkeypatch.setattr(storage, "PACK_LEAST", 64)
    rng = np.random.default_rng(3)
    a = np.full((40, 40), fill)
    at = rng.choice(a.size, 60, replace=False)
    a.flat[at] = rng.standard_normal(60)
    a.flat[at[:2]] = [-0.0, np.nan]
    t = storage.StoredTensor.from_dense(a, TensorFormat.parse(fmt), fill)
    sent = pickle.dumps(t)
    back = pickle.loads(sent)
    assert isinstance(storage.packed(t.vals, fill), storage.PackedValues)
    assert len(sent) < len(pickle.dumps(t.vals))  # 60 values sent, not all stored positions
    assert back.vals.shape == t.vals.shape and back.vals.dtype == t.vals.dtype
    assert np.array_equal(back.vals.view(np.uint64), t.vals.view(np.uint64))
    assert np.array_equal(back.to_dense(), t.to_dense(), equal_nan=True)
    dense = storage.StoredTensor.from_dense(rng.standard_normal((40, 40)), TensorFormat.parse("dense,dense"))
    assert isinstance(storage.packed(dense.vals, 0.0), np.ndarray)  # mostly not fill: sent as it is
