"""`fuseflow inspect MODEL`: the model's Program in index notation, and its ops by source line
(the names schedules use).

    fuseflow inspect tests/mlir/spmm_ikj.mlir [--json]
"""
from __future__ import annotations

import linecache
import os

from ..ir.program import op_output
from .args import budget_of
from .source import load_source


def _ops_by_line(program) -> list[str]:
    """Op names (as schedules use them) grouped by the source line that made them, with the
    line's text where the file can be read."""
    lines: dict[tuple[str, int], list[str]] = {}
    for op in program.ops:
        path, _, rest = (op.loc or "?").partition(":")
        number = rest.split(":")[0]
        lines.setdefault((path, int(number) if number.isdigit() else 0), []).append(op_output(op))
    rows = [(f"{os.path.basename(path)}:{number}:" if number else f"{path}:", " ".join(names),
             linecache.getline(path, number).strip() if number else "") for (path, number), names in lines.items()]
    width = min(48, max(len(where) + 1 + len(names) for where, names, _ in rows))
    return [f"  {f'{where} {names}':<{width}}   {text}".rstrip() for where, names, text in rows]


def run(args) -> int:
    source = load_source(args, budget_of(args))
    if args.json:
        print(source.program.to_json_text())
        return 0
    print(source.program)
    print("ops by source line (schedules name an op by the tensor it writes; `partial` groups each line):")
    print("\n".join(_ops_by_line(source.canonical())))
    return 0
