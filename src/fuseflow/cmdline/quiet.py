"""Keep libraries' warnings and log lines out of command output (shown again with --debug).

PyTorch warns that sparse CSR support is in beta and logs tracebacks of its fake-tensor tracer
before fuseflow's own one-line error; neither helps a user of the command. Inside `quiet()`
Python warnings are ignored and logging below CRITICAL is off; both are restored on exit.

    >>> import logging, warnings
    >>> with quiet(True):
    ...     warnings.warn("noise")
    ...     logging.getLogger("torch").error("noise")
    >>> logging.root.manager.disable
    0
"""
from __future__ import annotations

import contextlib
import logging
import warnings


@contextlib.contextmanager
def quiet(enabled: bool = True):
    """Silence library warnings and log records while the block runs (no-op if not enabled)."""
    if not enabled:
        yield
        return
    previous = logging.root.manager.disable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.ERROR)
        try:
            yield
        finally:
            logging.disable(previous)
