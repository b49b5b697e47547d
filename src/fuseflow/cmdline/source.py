"""One model vocabulary for every command: an `.mlir` file, a PyTorch class, or a built-in model.

Every command that takes a model (`inspect`, `orders`, `compile`, `simulate`, `study fusion`)
accepts it the same ways:

    fuseflow CMD model.mlir [--func F] [--format A=dense,compressed] [--shape A=64x8] [--inputs data.npz]
    fuseflow CMD --torch net.py:Net --input 34x34:csr --input 34x16 [--init JSON]   (or net.py:Net)
    fuseflow CMD --model gcn --dataset cora [--data-dir DIR] [--scale S] [--block B]  (or model:gcn)

The flags are `cmdline.grammar.add_source_arguments`; what a MODEL text names is decided by
`models.resolve` (the rules sweeps and suites follow too). `load_source(args)` loads it as a
`Source`: the program (canonical for built-in models, whose schedules name its ops), its presets,
and the data given (a model's dataset, `--inputs`).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from ..checks import DYNAMIC_SIZE, check_allocation, dynamic_shapes, generation_note, input_shapes
from ..data.inputs import read_inputs
from ..errors import UserError
from ..files import read_file
from ..frontend import from_mlir
from ..frontend.torch_loader import TIMEOUT as TORCH_TIMEOUT
from ..frontend.torch_loader import program_from_torch_spec
from ..ir.canonicalize import prepare
from ..ir.generate import complete_inputs
from ..models.resolve import resolve
from ..schedule.schedule import Schedule, statement_groups
from .args import format_items, shape_items


@dataclass
class Source:
    """A resolved model: what the commands compile, simulate or study."""

    kind: str  # mlir | torch | model
    label: str  # the file, FILE.py:Class or model name, for messages
    program: object
    given: dict = field(default_factory=dict)  # input data supplied (a model's dataset, --inputs)
    shapes: dict = field(default_factory=dict)  # --shape
    presets: dict = field(default_factory=dict)
    dataset: str | None = None
    note: str = ""
    layers: tuple[int, int] | None = None  # a built-in case's (decoders simulated, decoders of the model)

    def schedule(self, text: str | None) -> Schedule | None:
        """The schedule `--schedule` names, parsed here once (the command passes the record down):
        a built-in model's preset name is its preset (no schedule: its `full` preset); anything else
        is read as it is (for an MLIR file or a PyTorch class, `full` is the plain schedule `full`,
        and None the first schedule that compiles; studies use presets)."""
        if self.kind == "model":
            text = self.presets.get(text or "full", text)
        return None if text is None else Schedule.parse(text)

    def input_shapes(self) -> dict:
        """Every input's shape (given data, --shape, declarations); a dynamic dimension nothing
        determines is refused with a --shape hint."""
        return input_shapes(self.program, self.given, self.shapes, flag="--shape")

    def data(self, density: float, seed: int, budget=None) -> dict:
        """The given inputs plus generated ones for the rest, sizes checked against `budget`."""
        shapes = self.input_shapes()
        check_allocation(self.program, self.given, shapes, budget, f"inputs of {self.program.name}", density)
        note = generation_note(self.program, self.given, shapes, density)
        if note:
            print(f"fuseflow: note: {note}", file=sys.stderr, flush=True)
        return complete_inputs(self.program, self.given, density, seed, shapes)

    def canonical(self):
        """The program in the canonical form schedules name ops in (`fusion.compile.prepare`)."""
        return self.program if self.kind == "model" else prepare(self.program, self.input_shapes())

    def as_case(self, density: float, seed: int, budget=None):
        """A `ModelCase` for the fusion study."""
        from ..models.registry import ModelCase  # noqa: PLC0415 - models load torch (slow); only studies need them

        name = self.label if self.kind == "model" else self.program.name
        return ModelCase(name, self.dataset or "generated", self.canonical(),
                         self.data(density, seed, budget), dict(self.presets), self.note, self.layers)


def _one_source(args) -> tuple[str, str, str]:
    given = [(flag, value) for flag, value in (("MODEL", args.source), ("--torch", args.torch),
                                               ("--model", args.model)) if value]
    explicit = [g for g in given if not (g[0] == "--model" and g[1] == args.default_model)]
    if len(explicit) > 1:
        raise UserError(f"{' and '.join(f for f, _ in explicit)} both name a model", "command line",
                        "give one of: an .mlir file, --torch FILE.py:Class, --model NAME")
    if not given:
        raise UserError("no model given", "command line",
                        "give an .mlir file, --torch FILE.py:Class or --model NAME (e.g. --model gcn)")
    flag, value = (explicit or given)[0]
    if flag == "--torch":
        return "torch", value, flag
    ref = resolve(value, flag)
    return ref.kind, ref.name, flag


def load_source(args, budget=None) -> Source:
    """The model the command line names, with its data (see the module docstring)."""
    kind, value, flag = _one_source(args)
    formats, shapes = format_items(args.format), shape_items(args.shape)
    if kind == "model":
        source = _model_source(value, args, budget)
    elif kind == "torch":
        source = _torch_source(value, args, formats)
    else:
        source = _mlir_source(value, args, formats)
    _refuse_unused(kind, args, flag)
    if args.inputs:
        source.given = {**source.given, **read_inputs(args.inputs, source.program, "--inputs", budget)}
    unknown = sorted(set(shapes) - set(source.program.inputs) - {"?"})
    if unknown:
        raise UserError(f"--shape names {unknown[0]!r}, which is not an input of {source.program.name}", "--shape",
                        f"inputs are {', '.join(source.program.inputs)}")
    source.shapes = dynamic_shapes(source.program, shapes, source.given, DYNAMIC_SIZE,
                                   lambda text: print(f"fuseflow: note: {text}", file=sys.stderr))
    return source


def _refuse_unused(kind: str, args, flag: str) -> None:
    """Flags that do not apply to this kind of model are refused rather than ignored."""
    unused = {"model": ["--input", "--init", "--timeout", "--func", "--format"], "torch": ["--func", "--dataset"],
              "mlir": ["--input", "--init", "--timeout", "--dataset"]}[kind]
    for option in unused:
        if getattr(args, option[2:].replace("-", "_"), None):
            kinds = {"model": "built-in models", "torch": "PyTorch classes", "mlir": "MLIR files"}
            raise UserError(f"{option} does not apply to {kinds[kind]}", flag,
                            f"drop {option}" + (" (give data to an MLIR program with --inputs FILE.npz)"
                                                if option == "--dataset" else ""))


def _model_source(name: str, args, budget) -> Source:
    from ..models.registry import MODELS, build  # noqa: PLC0415 - models load torch (slow); only they need it

    if name not in MODELS:
        raise UserError(f"unknown model {name!r}", "--model", f"built-in models: {', '.join(MODELS)}")
    case = build(name, args.dataset, scale=args.scale, seed=args.seed, block=args.block, density=args.density,
                 data_dir=args.data_dir, budget=budget)
    return Source("model", name, case.program, dict(case.inputs), presets=dict(case.presets),
                  dataset=case.dataset, note=case.note, layers=case.layers)


def _generic_presets(program) -> dict:
    from ..models.presets import as_schedule, reference_unfused  # noqa: PLC0415 - models load torch (slow)

    return {"unfused": as_schedule(reference_unfused(program)), "partial": as_schedule(statement_groups(program)),
            "full": "full layout=induced"}


def _torch_source(spec: str, args, formats: dict) -> Source:
    program = program_from_torch_spec(spec, args.input, args.init, args.density, args.seed, formats,
                                      args.timeout or TORCH_TIMEOUT)
    return Source("torch", spec, program, presets=_generic_presets(prepare(program)))


def read_mlir(path: str, flag: str = "MODEL") -> str:
    """The text of an MLIR file, refusing directories, unreadable files and non-UTF-8 bytes."""
    data = read_file(path, flag)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})", path,
                        "save the file as UTF-8") from None


def _mlir_source(path: str, args, formats: dict) -> Source:
    if not os.path.exists(path):
        raise UserError(f"no such MLIR file {path!r}", "command line", "check the path")
    read_mlir(path)
    try:
        program = from_mlir(path, func=args.func, formats=formats, strict=getattr(args, "strict", False))
    except RecursionError:
        raise UserError("the program nests its ops or expressions more deeply than fuseflow's importer "
                        "follows (Python's recursion limit, about 1,000 levels)", path,
                        "split it into shorter chains of ops, or into several functions") from None
    return Source("mlir", path, program,
                  presets=_generic_presets(prepare(program, dynamic_shapes(program, shape_items(args.shape, "--shape"),
                                                                           {}, DYNAMIC_SIZE))))
