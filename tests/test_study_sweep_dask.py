"""A sweep of more than 50 schedules on a local dask.distributed cluster gives the same rows as
the local executor."""
from __future__ import annotations

import os

import pytest

from fuseflow.studies.db import SweepDB
from fuseflow.studies.runner import SweepSpec, run_sweep

distributed = pytest.importorskip("distributed")

HERE = os.path.dirname(__file__)
BATCH = os.path.join(HERE, "mlir", "batch_matmul.mlir")
SPMV = os.path.join(HERE, "mlir", "spmv.mlir")
RESULT = ("program", "schedule", "data", "seed", "status", "cycles", "flops", "mem_reads", "mem_writes",
          "bytes", "verified", "label", "est_cycles")


def spec(db: str, **kw) -> SweepSpec:
    # batch_matmul: 18 distinct orders (layout=induced) x 3 densities, spmv: 2 x 3
    return SweepSpec([BATCH, SPMV], ["full layout=induced"], orders="all", densities=[0.05, 0.2, 0.5],
                     engine="oracle", db=db, **kw)


def rows(db: str) -> dict:
    database = SweepDB(db)
    try:
        return {(r.program, r.schedule, r.data, r.seed): tuple(getattr(r, k) for k in RESULT)
                for r in database.rows()}
    finally:
        database.close()


@pytest.mark.slow
def test_dask_cluster_matches_local(tmp_path):
    local_db, dask_db = str(tmp_path / "local.db"), str(tmp_path / "dask.db")
    local = run_sweep(spec(local_db), progress=False)
    assert local.simulated >= 50 and local.failed == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster:
        remote = run_sweep(spec(dask_db, executor="dask", scheduler=cluster.scheduler_address), progress=False)
    assert remote.simulated == local.simulated and remote.failed == 0
    assert rows(dask_db) == rows(local_db)
    assert all(r[RESULT.index("verified")] == 1 for r in rows(dask_db).values())


def test_local_process_pool_matches_serial(tmp_path):
    serial_db, pool_db = str(tmp_path / "serial.db"), str(tmp_path / "pool.db")
    small = dict(densities=[0.2])
    run_sweep(SweepSpec([BATCH], ["full layout=induced"], orders="all", max_orders=6, engine="oracle",
                        db=serial_db, **small), progress=False)
    run_sweep(SweepSpec([BATCH], ["full layout=induced"], orders="all", max_orders=6, engine="oracle",
                        db=pool_db, jobs=2, **small), progress=False)
    assert rows(pool_db) == rows(serial_db) and len(rows(pool_db)) >= 6


@pytest.mark.slow
def test_unreachable_scheduler(tmp_path):
    from fuseflow.errors import UserError

    with pytest.raises(UserError, match="cannot reach the dask scheduler"):
        run_sweep(spec(str(tmp_path / "x.db"), executor="dask", scheduler="tcp://127.0.0.1:9", connect_timeout=2),
                  progress=False)


def test_a_scheduler_address_that_is_not_dask_is_one_line():
    """No port ('bogus': was exit 3, ValueError), or a TCP service that is not dask (an HTTP
    server: dask's client waited for its handshake forever): exit 2 in one line, in seconds."""
    import socket
    import threading

    from fuseflow.cluster import dask_client
    from fuseflow.errors import UserError

    with pytest.raises(UserError, match="not a dask scheduler's address"):
        with dask_client("bogus"):
            pass
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()  # accepts, says nothing
    try:
        with pytest.raises(UserError, match="does not answer as a dask scheduler"):
            with dask_client(f"tcp://127.0.0.1:{server.getsockname()[1]}"):
                pass
    finally:
        server.close()
