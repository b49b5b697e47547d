"""Checks at the edge where users hand fuseflow data and schedules (the Python API and the CLI).

What a user can get wrong is refused here in one line, before anything large is allocated or a
graph is built: input arrays that are not real numbers, empty, non-finite or named twice (see
`data.inputs.check_input`); inputs whose generated or converted size would not fit the memory
budget; `par` factors larger than any loop (the compiler checks each against the loop it
splits, without a second compile); block sizes that divide no dimension.

    >>> import numpy as np
    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/spmv.mlir")
    >>> sorted(check_inputs(p, {"arg0": np.eye(64, 48)}))
    ['A']
    >>> check_schedule(p, "full par=j:100")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fuseflow.errors.UserError: schedule: par=j:100 deals 100 lanes, ... 64 iterations (fix: use at most par=j:64)
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .data.inputs import check_input
from .errors import UserError
from .fusion.compile import Compiled
from .ir.program import Program
from .ir.values import DENSE_LIMIT, as_value, shape_of
from .ir.verify import infer_shapes
from .memory import Budget, format_bytes
from .pipeline import prepared
from .request import Partitioning, SimRequest
from .schedule import Schedule
from .sim.hw import HwConfig

FLOAT_BYTES = 8  # inputs are bound as float64
SPARSE_ENTRY_BYTES = 24  # a scipy CSR entry: its value and column, and one more copy while it is built


def check_inputs(program: Program, inputs: dict | None, where: str = "inputs") -> dict[str, np.ndarray]:
    """The given inputs by name (an input's own name, else `argK` for the K-th input), each checked by
    `check_input`; an unknown name or an input given twice is refused. Torch tensors and
    sparse matrices become fuseflow values (`ir.values.as_value`: large sparse matrices stay
    sparse)."""
    names = {f"arg{k}": name for k, name in enumerate(program.inputs)}
    checked, keys = {}, {}
    for key, value in (inputs or {}).items():
        name = key if key in program.inputs else names.get(key, key)  # a name wins over a position
        if name not in program.inputs:
            raise UserError(f"data given for {key!r}, which is not an input of {program.name}", where,
                            f"inputs are {', '.join(program.inputs)} (or arg0..arg{len(names) - 1})")
        if name in checked:
            raise UserError(f"input {name} is given twice (as {keys[name]!r} and {key!r})", where, "keep one")
        keys[name] = key
        value = as_value(value) if sp.issparse(value) or hasattr(value, "detach") else value
        checked[name] = check_input(name, value, where)
    return checked


DYNAMIC_SIZE = 16  # what a dynamic dimension is when the command line gives no --shape for it


def dynamic_shapes(program: Program, shapes: dict, given: dict, default: int | None = None,
                   note=None) -> dict:
    """`shapes` with `"?": N` (one size for every dynamic dimension) expanded into a shape per
    input whose declaration has dynamic dimensions and that has no shape or data; with no `"?"`,
    `default` is that size and `note(text)` is told which inputs took it.

        >>> from fuseflow.frontend import from_mlir
        >>> dynamic_shapes(from_mlir("tests/mlir/dynamic.mlir"), {"?": 32}, {})
        {'A': (32, 8)}
    """
    shapes = dict(shapes or {})
    size = shapes.pop("?", None)
    open_inputs = [n for n in program.inputs if None in program.tensors[n].shape and n not in shapes
                   and n not in given and n not in program.constants]
    if size is None and default is not None and open_inputs:
        size = default
        if note is not None:
            note(f"dynamic dimensions of {', '.join(open_inputs)} are {default} (give --shape '?=N' or "
                 f"--shape NAME=AxB)")
    for name in open_inputs if size is not None else []:
        shapes[name] = tuple(size if d is None else d for d in program.tensors[name].shape)
    return shapes


def input_shapes(program: Program, given: dict, shapes: dict | None = None, flag: str = "shapes") -> dict:
    """Shape of every input without constant data: from `given` arrays, then `shapes`, then the
    declaration; a dynamic dimension nothing determines is refused, naming `flag`."""
    out = {}
    shapes = dynamic_shapes(program, shapes or {}, given)
    for name in program.inputs:
        if name in program.constants and name not in given:
            continue
        shape = shape_of(given[name]) if name in given else tuple((shapes or {}).get(name, program.tensors[name].shape))
        if None in shape:
            declared = "x".join("N" if d is None else str(d) for d in program.tensors[name].shape)
            raise UserError(f"input {name} has a dynamic shape [{declared.replace('x', ',')}]", flag,
                            f"give it, e.g. --shape {name}={declared.replace('N', '16')}" if flag == "--shape"
                            else f"give it, e.g. shapes={{'{name}': (...)}}, or pass its data")
        if 0 in shape:
            raise UserError(f"input {name} has a zero-size dimension {list(shape)}", f"program {program.name}",
                            "give every dimension at least 1 (fuseflow simulates non-empty tensors)")
        out[name] = tuple(int(d) for d in shape)
    infer_shapes(program, {**out, **{n: shape_of(v) for n, v in given.items()}}, allow_dynamic=True)
    return out


def _generated_bytes(program: Program, name: str, shape: tuple, density: float) -> int:
    """Memory `ir.generate.random_inputs` takes for one input and the reference its bound copy:
    a large 2-D sparse input is generated as a scipy matrix, anything else as dense float64."""
    tensor, elements = program.tensors[name], math.prod(shape)
    if not tensor.format.is_dense and len(shape) == 2 and not tensor.format.block and elements > DENSE_LIMIT:
        return math.ceil(elements * density) * SPARSE_ENTRY_BYTES
    return 2 * elements * FLOAT_BYTES


def check_allocation(program: Program, given: dict, shapes: dict, budget: Budget | None, what: str,
                     density: float = 0.1) -> None:
    """Refuse, before generating or converting anything, inputs that would not fit the budget:
    the generated ones (sparse where `random_inputs` makes them sparse) and the reference's
    dense float64 copies of the dense ones given."""
    generated = sum(_generated_bytes(program, n, s, density) for n, s in shapes.items() if n not in given)
    bound = sum(math.prod(shape_of(v)) * FLOAT_BYTES for v in given.values() if not sp.issparse(v))
    (budget or Budget()).check(generated + bound, what)


GENERATED_PER_SECOND = {"dense": 20e6, "sparse": 2e6}  # elements, stored entries of large sparse inputs (one core)
SLOW_SECONDS = 3.0  # generating inputs for longer is said first (`generation_note`)


def generation_note(program: Program, given: dict, shapes: dict, density: float = 0.1) -> str | None:
    """What generating the inputs not `given` will make, when it takes more than a few seconds
    (a note for stderr: the size, the largest inputs named), else None.

        >>> from fuseflow.frontend import from_mlir
        >>> generation_note(from_mlir("tests/mlir/dynamic.mlir"), {}, {"A": (10**8, 8), "W": (8, 4)})
        'generating 6.0 GiB of inputs (A: 100000000x8 dense), which takes a while'
    """
    sizes, seconds = {}, 0.0
    for name, shape in shapes.items():
        if name in given or name in program.constants:
            continue
        tensor, elements = program.tensors[name], math.prod(shape)
        if not tensor.format.is_dense and len(shape) == 2 and not tensor.format.block and elements > DENSE_LIMIT:
            entries = math.ceil(elements * density)  # `random_sparse`: a scipy matrix of its entries
            sizes[name] = (entries * 2 * FLOAT_BYTES, "sparse")
            seconds += entries / GENERATED_PER_SECOND["sparse"]
        else:
            sizes[name] = (elements * FLOAT_BYTES, "dense" if tensor.format.is_dense else "sparse")
            seconds += elements / GENERATED_PER_SECOND["dense"]
    if seconds < SLOW_SECONDS:
        return None
    total = sum(size for size, _ in sizes.values())
    large = sorted((n for n in sizes if sizes[n][0] >= total / 100), key=lambda n: -sizes[n][0])  # the rest: small
    named = [f"{n}: {'x'.join(map(str, shapes[n]))} {sizes[n][1]}" for n in large[:3]]
    more = f" and {len(large) - 3} more" if len(large) > 3 else ""
    return f"generating {format_bytes(total)} of inputs ({', '.join(named)}{more}), which takes a while"


def check_schedule(program: Program, schedule, shapes: dict | None = None) -> Schedule:
    """The parsed schedule, after checking what only the program can tell: no `par` factor
    exceeds the program's largest dimension (the compiler checks each against its own loop's
    extent, `sam.parallel.apply_pars`), and a `block` size divides some dimension (None, the
    default schedule, stays None)."""
    parsed = Schedule.parse(schedule) if isinstance(schedule, str) else schedule
    if parsed is None or not parsed.pars and parsed.block is None:
        return parsed
    dims = _dimensions(program, shapes)
    if parsed.block is not None and not any(d % parsed.block == 0 for d in dims):
        raise UserError(f"block={parsed.block} divides no dimension of {program.name} "
                        f"(sizes {', '.join(map(str, sorted(set(dims))))})", "schedule",
                        "choose a block size that divides the dimensions to be blocked")
    largest = max(dims, default=1)
    for k, levels in parsed.pars.items():
        for var, lanes in levels:
            if lanes > largest:
                raise UserError(f"{_par_item(k, levels)} deals {lanes} lanes, but no loop of "
                                f"{program.name} has more than {largest} iterations", "schedule",
                                f"use at most {_par_item(k, [(var, largest)])}")
    return parsed


def _dimensions(program: Program, shapes: dict | None) -> list[int]:
    known = infer_shapes(program, shapes or {}, allow_dynamic=True)
    return [int(d) for shape in known.values() for d in shape if d is not None]


def _par_item(k: int, levels) -> str:
    return ("par=" if k == 0 else f"par.{k}=") + ",".join(f"{v}:{p}" for v, p in levels)


def check_options(seed: int, density: float) -> None:
    """A generation seed (an int >= 0) and density (in (0, 1]), or a one-line refusal."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"seed {seed!r} must be a non-negative integer", "seed")
    if not isinstance(density, (int, float)) or not 0.0 < float(density) <= 1.0:
        raise UserError(f"density {density!r} is outside (0, 1]", "density")


def check_partitioning(partitioning: Partitioning | None) -> None:
    """Shards and sampling exclude each other; shards are a positive integer."""
    if partitioning is None:
        return
    shards = partitioning.shards
    if shards is not None and (partitioning.fraction is not None or partitioning.error is not None):
        raise UserError("shards and sampling exclude each other", "--shards", "give --shards or --sample/--error")
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, (int, np.integer)) or shards < 1):
        raise UserError(f"shards {shards!r} must be a positive integer", "--shards")


def sim_request(program: Program, schedule=None, inputs: dict | None = None, *, seed: int = 0, density: float = 0.1,
                shapes: dict | None = None, hw: HwConfig | None = None, engine: str = "fast", check: bool = True,
                budget: Budget | None = None, partitioning: Partitioning | None = None) -> SimRequest:
    """The `SimRequest` of what a user asked for, checked here once: options, inputs (sized
    against `budget` before any is generated), the partitioning, the schedule (parsed once);
    then inputs completed from `seed` at `density` and the schedule compiled on them (a
    `Compiled` of `program` is taken as it is).

        >>> from fuseflow.frontend import from_mlir
        >>> r = sim_request(from_mlir("tests/mlir/spmv.mlir"), "full", seed=1)
        >>> sorted(r.data), r.schedule
        (['A', 'x'], 'full')
    """
    check_options(seed, density)
    check_partitioning(partitioning)
    given = check_inputs(program, inputs)
    known = input_shapes(program, given, shapes)
    check_allocation(program, given, known, budget, f"inputs of {program.name}", density)
    parsed = schedule if isinstance(schedule, Compiled) else check_schedule(program, schedule, known)
    data, compiled = prepared(program, parsed, given, seed, density, known)
    return SimRequest(program, compiled, data, seed, density, hw or HwConfig(), engine, check, budget=budget,
                      partitioning=partitioning)
