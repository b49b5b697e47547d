"""Regenerate docs/interop.md's table: every test program and built-in model preset against Comal
and SAM, from the exports themselves.

For each program (tests/mlir/*.mlir under unfused, partial, full and `full layout=induced`) and
each built-in model preset (GCN and GraphSAGE on karate, SAE small, GPT-3 tiny with 16x16 tiles),
it compiles the schedule, writes the Comal graphs with their tensor files, and asks the replay of
Comal's loader (`sam/comal_loader`) which kernels it takes and `--emit sam-gv` (`sam/samgv`) which
kernels it writes in the form SAM's simulator runs and why it refuses the others. The rows go
between the table markers of docs/interop.md. Usage:
`.venv/bin/python scripts/interop_table.py [--check] [--all]` (a few minutes; GPT-3's full
presets, about 5 minutes each to compile, only with `--all`); `--check` only says whether the
page is current (exit 1 if not).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import fuseflow
from fuseflow.errors import NotSupported, UserError
from fuseflow.fusion.compile import compile_schedule
from fuseflow.interop import emit_comal
from fuseflow.sam.samgv import NotInSam, to_samgv

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "interop.md"
START, END = "<!-- interop-table:start -->", "<!-- interop-table:end -->"
PRESETS = ("unfused", "partial", "full", "full layout=induced")
SKIPPED = "not tried (compiling it takes about 5 minutes: `--all` includes it)"
MODELS = (("gcn", "karate", {}), ("graphsage", "karate", {}), ("sae", "small", {}),
          ("gpt3-bigbird", "tiny", {"block": 16}))


@dataclass
class Row:
    program: str
    preset: str
    kernels: int
    comal: str
    sam: str

    def markdown(self) -> str:
        return f"| {self.program} | {self.preset} | {self.kernels} | {self.comal} | {self.sam} |"


def _verdict(refusals: list[tuple[int, str]], total: int, word: str) -> str:
    """`all N <word>`, or how many do and the first kernel kept out with what keeps it out."""
    if not refusals:
        return f"all {total} {word}" if total != 1 else word
    index, why = refusals[0]
    more = f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else ""
    return f"{total - len(refusals)} of {total}; k{index}: {why.replace('|', '/')}{more}"


def _sam_refusal(graph) -> str | None:
    """Why `--emit sam-gv` refuses a kernel (None when it writes the graph SAM's simulator runs)."""
    try:
        to_samgv(graph)
    except NotInSam as why:
        return str(why)
    return None


def row(program: str, preset: str, schedule: str, source, shapes: dict, data: dict) -> Row:
    try:
        compiled = compile_schedule(source, schedule, shapes)
    except (UserError, NotSupported) as err:  # fuseflow itself refuses the schedule
        reason = str(err).splitlines()[0][:90]
        return Row(program, preset, 0, f"not compiled: {reason}", "not compiled")
    kernels = [k for k in compiled.kernels if not k.is_reshape]
    with tempfile.TemporaryDirectory() as out:
        manifest = emit_comal(compiled, data, out)
    comal = [(k["index"], k["refused"][0]) for k in manifest["kernels"] if k.get("refused")]
    sam = [(k.index, problem) for k in kernels if (problem := _sam_refusal(k.graph))]
    return Row(program, preset, len(kernels), _verdict(comal, len(kernels), "load"),
               _verdict(sam, len(kernels), "export"))


def rows(everything: bool = False) -> list[Row]:
    out = []
    for path in sorted((ROOT / "tests" / "mlir").glob("*.mlir")):
        program = fuseflow.from_mlir(path)
        shapes = {"A": (6, 8)} if path.name == "dynamic.mlir" else None
        data = fuseflow.random_inputs(program, density=0.3, seed=3, shapes=shapes)
        for preset in PRESETS:
            out.append(row(path.name, preset, preset, program, {n: np.shape(v) for n, v in data.items()}, data))
    for name, dataset, options in MODELS:
        case = fuseflow.model(name, dataset=dataset, **options)
        for preset, schedule in case.presets.items():
            if name == "gpt3-bigbird" and preset.startswith("full") and not everything:  # minutes each
                out.append(Row(f"{name} ({dataset})", preset, 0, SKIPPED, SKIPPED))
                continue
            out.append(row(f"{name} ({dataset})", preset, schedule, case.program,
                           {n: np.shape(v) for n, v in case.inputs.items()}, case.inputs))
    return out


def table(found: list[Row]) -> str:
    head = ["| program | preset | kernels | Comal's loader | SAM's simulator (`--emit sam-gv`) |",
            "|---|---|---|---|---|"]
    return "\n".join(head + [r.markdown() for r in found])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether docs/interop.md is current")
    parser.add_argument("--all", action="store_true", help="also GPT-3's full presets (minutes each)")
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    before, rest = page.split(START, 1)
    after = rest.split(END, 1)[1]
    fresh = f"{before}{START}\n{table(rows(args.all))}\n{END}{after}"
    if args.check:
        print("docs/interop.md is current" if fresh == page else "docs/interop.md is out of date")
        return 0 if fresh == page else 1
    PAGE.write_text(fresh)
    print(f"wrote the table of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
