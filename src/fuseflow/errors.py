"""The two kinds of error a user can meet, and how the CLI shows them.

    >>> raise UserError("shape mismatch for A", where="gcn.mlir:4:5", fix="give A 6 rows")
    Traceback (most recent call last):
    fuseflow.errors.UserError: gcn.mlir:4:5: shape mismatch for A (fix: give A 6 rows)

Anything else that escapes is a bug in fuseflow (an internal assertion).
"""
from __future__ import annotations


class FuseflowError(Exception):
    """Base of the errors that are reported to users as one line; the CLI exits with
    `exit_status` (2: the input is at fault; 3: fuseflow is, e.g. a failed self-check)."""

    exit_status = 2

    def __init__(self, what: str, where: str | None = None, fix: str | None = None):
        self.what, self.where, self.fix = what, where, fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.where}: {self.what}" if self.where else self.what
        if self.fix:
            text += f" (fix: {self.fix})"
        return " ".join(text.split())


class UserError(FuseflowError):
    """Bad input: says what is wrong, where, and how to fix it."""


class NotSupported(FuseflowError):
    """Valid input that fuseflow does not handle yet; names the construct."""
