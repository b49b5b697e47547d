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
