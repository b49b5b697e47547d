"""dask.distributed for sweeps and suites: a client on an existing scheduler, or on a
`LocalCluster` sized to the machine (one single-threaded worker process per core, each with an
equal share of the memory), and the memory guard a task gets on its worker.

    >>> local_workers(None) >= 1, local_memory_share(2, 8 * 2**30) == 4 * 2**30
    (True, True)
    >>> worker_budget(None) is None  # not on a dask worker, no --max-memory: the engine's default
    True
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from .errors import UserError
from .memory import Budget

GUARD_SHARE = 0.9  # a task's memory guard: this much of its worker's memory limit (dask stops it at 95%)
PROGRESS_TOPIC = "fuseflow-progress"  # workers' progress events (Worker.log_event), read by the client
SIMULATION_MODULES = ("fuseflow.partition.windows", "fuseflow.sim.fast")  # what a window task imports
PARENT_POLL_SECONDS = 1.0  # how often a worker checks that its sweep is still alive
# A local cluster's own upkeep, cut to what fuseflow needs (no dashboard): dask's statistical
# profiler (a thread in every worker waking every 10 ms) and the event loops' 20 ms ticks took
# the cores from the window tasks (GCN CiteSeer full sharded on 2 cores: each window's wall 5-7%
# above its CPU, and 1.3 s of the driver's CPU while they ran; with these, 1%, and 0.4 s). Work
# stealing stays: a suite's queued task may wait on a busy worker while the other is free.
QUIET_CLUSTER = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                 "distributed.admin.system-monitor.interval": "5s"}


def exit_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the sweep that started it dies, even by SIGKILL
    (which runs no cleanup): Linux's parent-death signal, and a watcher thread elsewhere."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="fuseflow-parent-watch", daemon=True).start()


def local_workers(workers: int | None) -> int:
    """Workers of a local cluster: `workers`, else one per core this process may use."""
    if workers:
        return workers
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def local_memory_share(workers: int, max_memory: int | None) -> int:
    """Bytes each local worker may take: `max_memory` (all workers together), else the memory
    available now with the engine's headroom, split evenly."""
    total = max_memory if max_memory else Budget().allowed()
    return max(1, total // workers)


def worker_budget(max_memory: int | None = None) -> Budget | None:
    """The memory guard of a task: `max_memory` if given, else on a dask worker with a memory
    limit `GUARD_SHARE` of that limit, else None (the engine's default: what is available)."""
    if max_memory:
        return Budget(max_memory)
    if "distributed" not in sys.modules:  # dask was never imported here: not a worker
        return None
    from distributed import get_worker  # noqa: PLC0415 - dask is optional and slow to import

    try:
        limit = get_worker().memory_manager.memory_limit
    except ValueError:  # not inside a worker's task
        return None
    return Budget(int(limit * GUARD_SHARE)) if limit else None


def post_progress(message: dict) -> bool:
    """Send a progress event from a task on a dask worker to its client; False elsewhere."""
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker  # noqa: PLC0415 - dask is optional and slow to import

    try:
        get_worker().log_event(PROGRESS_TOPIC, message)
    except ValueError:
        return False
    return True


def _exit_plugin(parent: int):
    from distributed.diagnostics.plugin import WorkerPlugin  # noqa: PLC0415 - dask is optional and slow to import

    class ExitWithParent(WorkerPlugin):
        """Ends a local worker when the process that started its cluster dies, even by SIGKILL."""

        name = "fuseflow-exit-with-parent"

        def setup(self, worker) -> None:
            exit_with_parent(parent)

    return ExitWithParent()


def _import_distributed():
    try:
        import dask  # noqa: PLC0415 - dask is optional and slow to import
        import distributed  # noqa: PLC0415 - dask is optional and slow to import
    except ImportError:
        raise UserError("the dask executor needs dask.distributed", "--executor",
                        "pip install 'dask[distributed]'") from None
    return dask, distributed


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None, max_memory: int | None = None,
                timeout: float = 30.0, preload: tuple[str, ...] = ()):
    """A `distributed.Client` on the scheduler at `scheduler`, else on a local cluster of
    `local_workers(workers)` processes, each with `local_memory_share` bytes (its tasks' memory
    guard: `worker_budget`). Local workers run one task at a time; the engine's memory guard, not
    dask, keeps them within their share (dask would kill a worker whose memory a previous large
    case left high, and every task queued on it); they never pause or spill (tasks hold no dask
    data); a task whose worker died is tried once more; they end with the process that started
    them; `preload`: modules a local worker imports as it starts."""
    dask, distributed = _import_distributed()
    if scheduler:
        _answers_like_dask(scheduler, timeout)
        try:
            client = distributed.Client(scheduler, timeout=timeout)
        except (OSError, TimeoutError) as err:
            raise UserError(f"cannot reach the dask scheduler at {scheduler}: {err}", "--scheduler") from None
        except (ValueError, MemoryError) as err:  # no port ("bogus"), or not a dask service at all
            raise UserError(f"{scheduler} is not a dask scheduler's address: {str(err) or type(err).__name__}",
                            "--scheduler", "give tcp://HOST:PORT of a running dask scheduler") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = local_workers(workers)
    settings = {"distributed.scheduler.allowed-failures": 1, "distributed.worker.memory.target": False,
                "distributed.worker.memory.spill": False, "distributed.worker.memory.pause": False,
                "distributed.worker.memory.terminate": False, **QUIET_CLUSTER}
    with dask.config.set(settings):
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           memory_limit=local_memory_share(n, max_memory),
                                           dashboard_address=None, silence_logs=logging.ERROR,
                                           preload=list(preload))
        try:
            client = distributed.Client(cluster)
            try:
                client.register_plugin(_exit_plugin(os.getpid()))
                yield client
            finally:
                client.close()
        finally:
            cluster.close()


HANDSHAKE_SECONDS = 5.0  # a dask scheduler sends its handshake as soon as it accepts a connection


def _answers_like_dask(scheduler: str, timeout: float) -> None:
    """For a tcp:// address (or HOST:PORT): a UserError unless something there accepts a
    connection and speaks first within HANDSHAKE_SECONDS, as a dask scheduler does (an HTTP
    server waits for a request: dask's client would wait for it forever)."""
    from distributed.comm.addressing import parse_address, parse_host_port  # noqa: PLC0415 - dask is optional

    try:
        protocol, location = parse_address(scheduler)
        if protocol != "tcp":
            return
        host, port = parse_host_port(location)
    except ValueError:
        return  # Client reports a malformed address itself
    try:
        with socket.create_connection((host, port), timeout=min(timeout, HANDSHAKE_SECONDS)) as sock:
            sock.settimeout(HANDSHAKE_SECONDS)
            if not sock.recv(8):
                raise UserError(f"{scheduler} closed the connection at once: not a dask scheduler", "--scheduler")
    except TimeoutError:
        raise UserError(f"{scheduler} accepts connections but does not answer as a dask scheduler (nothing within "
                        f"{HANDSHAKE_SECONDS:g} s)", "--scheduler",
                        "give tcp://HOST:PORT of a running dask scheduler") from None
    except OSError as err:
        raise UserError(f"cannot reach the dask scheduler at {scheduler}: {err}", "--scheduler") from None


@contextlib.contextmanager
def dask_client_soon(scheduler: str | None = None, workers: int | None = None, max_memory: int | None = None,
                     timeout: float = 30.0):
    """`dask_client` started on a thread: yields at once a `concurrent.futures.Future` of the
    client, so the caller can load its model and compile while the workers' processes start
    and import the engine (`SIMULATION_MODULES`) on the other cores; the client and its cluster
    close on exit, once they have started."""
    stack = contextlib.ExitStack()
    with ThreadPoolExecutor(1, thread_name_prefix="fuseflow-cluster") as pool:
        client = pool.submit(stack.enter_context, dask_client(scheduler, workers, max_memory, timeout,
                                                              SIMULATION_MODULES))
        try:
            yield client
        finally:
            if client.exception() is None:  # a start that failed closed what it had started
                stack.close()
