"""Command-line options of the test suite: `--fuzz N` runs the random-program fuzzer
(tests/test_fuzz.py) on N programs drawn afresh instead of its fixed few hundred."""


def pytest_addoption(parser):
    parser.addoption("--fuzz", type=int, default=None, metavar="N",
                     help="run the random-program fuzzer on N new programs (default: a fixed 300)")


def pytest_configure(config):
    """Buffers the fast engine reuses are filled with garbage when given back, so that a kernel
    reading a slot it did not write gives wrong results here instead of passing by luck."""
    import os

    from fuseflow.sim.fast import pool

    pool.POISON = True
    # commands the tests run as processes run in them, not in a resident worker (cmdline.resident;
    # the default, kept where a developer's shell sets FUSEFLOW_WORKER=1)
    os.environ["FUSEFLOW_WORKER"] = "0"
