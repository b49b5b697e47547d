"""Files the reference tools read: Comal graphs with their tensor files, and SAM `.gv` graphs.

`emit_comal(compiled, data, DIR)` writes one directory per kernel, ready for
`comal.run_graph("DIR/k0/graph.bin", "DIR/k0")`:

- `graph.bin`: the `tortilla.ComalGraph` protobuf (`sam.comal`), `graph.txt` the same as text;
- for every tensor the kernel reads, the files Comal reads, one number per line, numbered by
  tensor dimension as the reference's compiler and SAM's data generator number them:
  `tensor_<T>_mode_shape` (the size of each dimension, dimension 0 first; of the block grid for a
  blocked tensor), `tensor_<T>_mode_<m>_seg` and `tensor_<T>_mode_<m>_crd` for the compressed
  level that stores dimension m (a CSC matrix, `order=1,0`, stores dimension 1 outermost), and
  `tensor_<T>_mode_vals` (the values in position order; a tile's values row by row). A universe
  scan's tensor only has a shape. Inputs hold the given (or generated) data; a tensor an earlier
  kernel wrote holds the numpy reference's values;
- `expected/`: the same files for what the kernel writes, from the numpy reference;
- `notes.txt`: the nodes Comal has no exact equivalent for.

`DIR/manifest.json` lists the kernels in the order to run them. `emit_sam_gv(compiled, DIR)`
writes `k<N>.gv` per kernel SAM's simulator can run (`sam.samgv`) and says why it refuses the others.

    >>> import tempfile, fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> c = compile_schedule(fuseflow.from_mlir("tests/mlir/spmv.mlir"), "full")
    >>> out = tempfile.mkdtemp()
    >>> summary = emit_comal(c, fuseflow.random_inputs(c.program, seed=1), out)
    >>> sorted(os.listdir(os.path.join(out, "k0")))[:5]
    ['expected', 'graph.bin', 'graph.txt', 'notes.txt', 'tensor_A_mode_1_crd']
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
from google.protobuf import text_format

from .errors import UserError
from .ir.formats import TensorFormat
from .ir.reference import bind_inputs, reference
from .sam.comal import comal_name, entry_point, to_comal
from .sam.comal_loader import check
from .sam.samgv import NotInSam, to_samgv
from .sim.storage import Level, StoredTensor

FORMATS = ("comal", "sam-gv")


def _write_numbers(path: str, values, integer: bool) -> None:
    np.savetxt(path, np.asarray(values).reshape(-1), fmt="%d" if integer else "%.17g")


def write_tensor_files(stored: StoredTensor, name: str, directory: str) -> list[str]:
    """The files Comal reads for one stored tensor (see the module docstring); returns their names."""
    prefix = os.path.join(directory, f"tensor_{name}_mode_")
    order = stored.fmt.mode_order if stored.fmt else tuple(range(len(stored.levels)))
    by_dim = [0] * len(stored.levels)
    for k, level in enumerate(stored.levels):
        by_dim[order[k]] = level.dim
    _write_numbers(prefix + "shape", by_dim, True)
    written = [f"tensor_{name}_mode_shape"]
    for k, level in enumerate(stored.levels):
        if level.is_compressed:
            m = order[k]
            _write_numbers(f"{prefix}{m}_seg", level.seg, True)
            _write_numbers(f"{prefix}{m}_crd", level.crd, True)
            written += [f"tensor_{name}_mode_{m}_seg", f"tensor_{name}_mode_{m}_crd"]
    _write_numbers(prefix + "vals", stored.vals, False)
    return written + [f"tensor_{name}_mode_vals"]


def _read_numbers(path: str, integer: bool) -> np.ndarray:
    return np.atleast_1d(np.loadtxt(path, dtype=np.int64 if integer else np.float64, ndmin=1))


def read_tensor_files(name: str, directory: str, fmt: TensorFormat, shape, fill: float = 0.0) -> StoredTensor:
    """The inverse of `write_tensor_files`: the stored tensor `name` in format `fmt`."""
    prefix = os.path.join(directory, f"tensor_{name}_mode_")
    dims = _read_numbers(prefix + "shape", True)
    levels = []
    for k, lf in enumerate(fmt.levels):
        m = fmt.mode_order[k]  # files are numbered by the dimension a level stores
        if lf.is_compressed:
            levels.append(Level("compressed", int(dims[m]), _read_numbers(f"{prefix}{m}_seg", True),
                                _read_numbers(f"{prefix}{m}_crd", True)))
        else:
            levels.append(Level("dense", int(dims[m])))
    vals = _read_numbers(prefix + "vals", False)
    if fmt.block:
        vals = vals.reshape((-1,) + tuple(fmt.block))
    return StoredTensor(levels, vals, tuple(shape), fmt, fill)


def _values(compiled, data: dict) -> dict[str, np.ndarray]:
    """Every tensor of the program, dense: the inputs and the numpy reference's results."""
    program = compiled.program
    inputs = bind_inputs(program, {n: v for n, v in data.items() if n in program.inputs})
    return {**inputs, **reference(program, inputs, keep_intermediates=True)}


def _kernel_dir(directory: str, kernel) -> str:
    path = os.path.join(directory, f"k{kernel.index}")
    os.makedirs(os.path.join(path, "expected"), exist_ok=True)
    return path


def emit_comal(compiled, data: dict, directory: str) -> dict:
    """Write every kernel's Comal graph and tensor files under `directory`; returns the manifest."""
    values = _values(compiled, data)
    manifest = {"schedule": str(compiled.schedule), "program": compiled.program.name,
                "run": "in order: comal.<entry>(<kernel>/graph.bin, <kernel>) for each kernel that loads",
                "kernels": []}
    for kernel in compiled.kernels:
        if kernel.is_reshape:
            manifest["kernels"].append({"index": kernel.index, "reshape": kernel.group[0],
                                        "note": "a reshape of dense data: no graph"})
            continue
        graph, path = kernel.graph, _kernel_dir(directory, kernel)
        export = to_comal(graph)
        with open(os.path.join(path, "graph.bin"), "wb") as handle:
            handle.write(export.message.SerializeToString())
        with open(os.path.join(path, "graph.txt"), "w") as handle:
            handle.write(text_format.MessageToString(export.message))
        with open(os.path.join(path, "notes.txt"), "w") as handle:
            handle.write("".join(n + "\n" for n in export.notes))
        files: dict[str, list[str]] = {}
        for name, meta in graph.tensors.items():
            stored = StoredTensor.from_dense(values[meta.stores(name)], TensorFormat.of(meta), meta.fill)
            where = path if meta.role == "input" else os.path.join(path, "expected")
            files[comal_name(name)] = write_tensor_files(stored, comal_name(name), where)
        for name, dim in export.universes.items():
            _write_numbers(os.path.join(path, f"tensor_{name}_mode_shape"), [dim], True)
            files[name] = [f"tensor_{name}_mode_shape"]
        entry = entry_point(graph)
        loader = check(export.message, entry or "run_graph", path)
        refused = [str(r) for r in loader.rejections] if entry else \
            ["tiles of a side Comal has no true-block mode for (16, 32, 64)"] + [str(r) for r in loader.rejections]
        manifest["kernels"].append({
            "index": kernel.index, "name": graph.name, "ops": kernel.group, "order": kernel.order,
            "graph": f"k{kernel.index}/graph.bin", "data": f"k{kernel.index}", "entry": entry,
            "loads": not refused, "refused": refused,
            "reads": {comal_name(n): m.stores(n) for n, m in graph.tensors.items() if m.role == "input"},
            "writes": [comal_name(n) for n, m in graph.tensors.items() if m.role == "output"],
            "files": files, "notes": export.notes})
    with open(os.path.join(directory, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=1)
    return manifest


@dataclass
class SamExport:
    """What `emit_sam_gv` did: the `.gv` files written, and each kernel refused with the reason."""
    paths: list[str]
    refused: list[tuple[str, str]]


def emit_sam_gv(compiled, directory: str) -> SamExport:
    """Write `k<N>.gv` (SAM's Graphviz form, as SAM's simulator runs it) for every kernel with a
    graph that SAM can run; the others are refused with the reason (`sam.samform`), no file."""
    export = SamExport([], [])
    for kernel in compiled.kernels:
        if kernel.is_reshape:
            continue
        try:
            text = to_samgv(kernel.graph)
        except NotInSam as why:
            export.refused.append((f"k{kernel.index}", str(why)))
            continue
        path = os.path.join(directory, f"k{kernel.index}.gv")
        with open(path, "w") as handle:
            handle.write(text)
        export.paths.append(path)
    return export


def emit(compiled, fmt: str, directory: str, data: dict) -> str:
    """Write `fmt` (comal or sam-gv) files of every kernel into `directory`; a one-line summary."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}", "--emit", f"use one of {', '.join(FORMATS)}")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {directory}: {err.strerror}", "--emit") from None
    if fmt == "sam-gv":
        export = emit_sam_gv(compiled, directory)
        wrote = f"wrote {len(export.paths)} SAM graph{'s' * (len(export.paths) != 1)} to {directory}/"
        if export.refused:
            kernel, why = export.refused[0]
            more = f" ({len(export.refused) - 1} more kernels refused)" if len(export.refused) > 1 else ""
            raise NotInSam(f"SAM's simulator cannot run {kernel}: {why}{more}; {wrote}", "--emit sam-gv")
        return wrote
    manifest = emit_comal(compiled, data, directory)
    graphs = [k for k in manifest["kernels"] if "graph" in k]
    notes = sum(len(k["notes"]) for k in graphs)
    refused = [f"k{k['index']}: {k['refused'][0]}" for k in graphs if k["refused"]]
    return (f"wrote {len(graphs)} Comal graph{'s' * (len(graphs) != 1)} with their tensor files to {directory}/"
            + (f" ({notes} nodes without an exact Comal equivalent: see the notes.txt files)" if notes else "")
            + "".join(f"\nComal's loader would refuse {r}" for r in refused))
