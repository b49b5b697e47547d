"""The `fuseflow` command's entry point: a thin router. `cmdline.grammar` parses the command line
(importing no compiler, simulator, torch or numba, so that `fuseflow --help` and `fuseflow help`
answer at once); the chosen command's module under `cmdline/` is imported when it runs (`cmdline/gpu`
for `fuseflow gpu`). Bad input (`FuseflowError`) prints one line `fuseflow: error: ...` and exits
with status 2; an internal error is status 3 (a bug in fuseflow).

    >>> main(["help", "schedules"]) == 0  # doctest: +SKIP
"""
from __future__ import annotations

import os
import sys

from .cmdline import resident
from .cmdline.grammar import build_parser, command_named
from .cmdline.quiet import quiet
from .errors import FuseflowError


def _internal(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"fuseflow: internal error: {type(err).__name__}: {text} (rerun with --debug for the traceback and " \
           "please report it)"


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: the process's own, which a `simulate` offers to the
    resident worker when `FUSEFLOW_WORKER=1`, `cmdline.resident`)."""
    if argv is None and resident.enabled():
        return resident.dispatch(sys.argv[1:], run)
    return run(argv)


def run(argv: list[str] | None = None) -> int:
    """Parse `argv` and run its command in this process; the exit status."""
    try:
        args = build_parser(command_named(sys.argv[1:] if argv is None else argv)).parse_args(argv)
    except SystemExit as done:  # --help, --version, or a one-line usage error (status 2)
        return done.code if isinstance(done.code, int) else 2
    try:
        with quiet(not args.debug):
            return args.run(args)
    except FuseflowError as err:
        print(f"fuseflow: error: {err.one_line()}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("fuseflow: interrupted (a sweep resumes when rerun with the same arguments)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (MemoryError, RecursionError) as err:  # the input is larger or deeper than fuseflow can take
        if args.debug:
            raise
        what, fix = ("ran out of memory", "give a smaller input, or set --max-memory to be stopped before "
                     "allocating") if isinstance(err, MemoryError) else \
            ("the input is nested too deeply (Python's recursion limit)", "give a smaller or flatter input")
        print(f"fuseflow: error: {what} (fix: {fix}; rerun with --debug for the traceback)", file=sys.stderr)
        return 2
    except Exception as err:  # an internal bug: one line unless --debug
        if args.debug:
            raise
        print(_internal(err), file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
