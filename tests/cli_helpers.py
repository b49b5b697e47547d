"""Helpers shared by the command-line tests."""
from __future__ import annotations

from fuseflow.cli import main


def error_of(argv, capsys) -> str:
    """Run `fuseflow argv`; check that it failed with exit status 2 and one line
    `fuseflow[ COMMAND]: error: ...` on stderr (no traceback); return that line."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("fuseflow") and ": error: " in err and err.count("\n") == 1, err
    return err
