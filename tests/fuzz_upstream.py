"""The fuzzer's second, independent oracle: upstream MLIR itself. A random program is lowered by
MLIR's own sparsifier pipeline (`sparsifier{enable-runtime-library=false}`: sparse code
generated inline, no runtime library, which torch-mlir's wheel does not ship) and run by MLIR's
ExecutionEngine, both through torch-mlir's Python bindings; its outputs are then compared with
fuseflow's.

The program is the fuzzer's own text in float64 (float32 would overflow `exp` where fuseflow's
float64 does not), with each sparse argument taken dense and converted inside the function
(`sparse_tensor.convert` to its CSR/CSC/DCSR encoding: the stored entries are the nonzeros, as
fuseflow stores them), because the ExecutionEngine passes dense memrefs only. A program the
sparsifier or the JIT refuses is not a failure of fuseflow: `UpstreamRun.reason` says why.
MLIR's pipeline crashes the process on some programs (a segmentation fault in the sparsifier,
or an abort after taking gigabytes), so long runs call it in a child process (`UpstreamWorker`)
of bounded memory, restarted after a crash.

    >>> from fuzz_programs import RandomChooser, random_program
    >>> p = random_program(RandomChooser(7)); p.describe()[:60]
    '[a0:4x12:dense, a1:4x5:dense, a2:12x3:csr, a3:5x1:dense] t0='
    >>> run = run_upstream(p, p.data(0))
    >>> [np.array_equal(run.outputs[name], want) for name, want in p.evaluate(p.data(0)).items()]
    [True]
    >>> p = random_program(RandomChooser(0)); p.describe()[:53]  # one upstream cannot lower
    '[a0:8x1:csc, a1:1x1:csc] t0=relu[](a0); t1=exp[](t0);'
    >>> run_upstream(p, p.data(0)).reason[:60]
    'MLIRError: failed to legalize unresolved source materializat'
"""
from __future__ import annotations

import ctypes
import multiprocessing
import re
import resource
from dataclasses import dataclass

import numpy as np

from fuzz_programs import RandomProgram

PIPELINE = "builtin.module(sparsifier{enable-runtime-library=false})"
ENTRY = "fuzz"
TIMEOUT_S = 120  # a program upstream takes longer on is recorded as unlowered (the worker restarts)
CHILD_MEMORY = 2 << 30  # bytes of address space the child running upstream may take


@dataclass
class UpstreamRun:
    """Upstream MLIR's outputs by name, or None with the reason it could not run the program."""

    outputs: dict[str, np.ndarray] | None
    reason: str = ""


def upstream_text(p: RandomProgram) -> str:
    """The program in float64 with dense arguments converted to their sparse encodings inside,
    its function callable through the C interface."""
    text = p.mlir().replace("0xFF800000 : f32", "0xFFF0000000000000 : f64").replace("f32", "f64")
    converts = []
    for v in p.inputs:
        if v.fmt == "dense":
            continue
        dense = f"tensor<{v.shape[0]}x{v.shape[1]}xf64>"
        sparse = v.type.replace("f32", "f64")
        text = text.replace(f"%{v.name}: {sparse}", f"%{v.name}_dense: {dense}", 1)
        converts.append(f"  %{v.name} = sparse_tensor.convert %{v.name}_dense : {dense} to {sparse}")
    head, body = text.split(" {\n", 1)
    return head + " attributes { llvm.emit_c_interface } {\n" + "".join(c + "\n" for c in converts) + body


def run_upstream(p: RandomProgram, data: dict[str, np.ndarray]) -> UpstreamRun:
    """Lower and run `p` on `data` with upstream MLIR (see the module's docstring)."""
    from torch_mlir import ir, passmanager  # noqa: PLC0415 - torch-mlir's bindings load only for this oracle
    from torch_mlir.execution_engine import ExecutionEngine  # noqa: PLC0415 - as above
    from torch_mlir.runtime import (  # noqa: PLC0415 - as above
        get_ranked_memref_descriptor,
        make_nd_memref_descriptor,
        ranked_memref_to_numpy,
    )

    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(upstream_text(p))
            passmanager.PassManager.parse(PIPELINE).run(module.operation)
            engine = ExecutionEngine(module, opt_level=2)
        except Exception as err:  # noqa: BLE001 - whatever upstream refuses is recorded, not raised
            return UpstreamRun(None, _first_line(err))
        kinds = [make_nd_memref_descriptor(2, ctypes.c_double) for _ in p.outputs]
        results = type("Results", (ctypes.Structure,), {"_fields_": [(f"r{k}", t) for k, t in enumerate(kinds)]})()
        keep = [np.ascontiguousarray(data[v.name], dtype=np.float64) for v in p.inputs]
        args = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in keep]
        engine.invoke(ENTRY, ctypes.pointer(ctypes.pointer(results)), *args)
        outputs = {v.name: ranked_memref_to_numpy([getattr(results, f"r{k}")]).copy()
                   for k, v in enumerate(p.outputs)}
    return UpstreamRun(outputs)


def _first_line(err: Exception) -> str:
    """The error's first diagnostic without its location, so that reasons tally."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    detail = next((line for line in lines if "error:" in line), lines[0] if lines else "")
    detail = re.sub(r'^error: ("[^"]*":\d+:\d+: )?', "", detail)
    return f"{type(err).__name__}: {detail[:160]}"


class UpstreamWorker:
    """`run_upstream` in a child process that lives across programs; a program that kills it
    (MLIR crashes on some) or runs past `timeout` is recorded as unlowered and the next program
    gets a fresh child.

        >>> from fuzz_programs import RandomChooser, random_program
        >>> p = random_program(RandomChooser(7))
        >>> with UpstreamWorker() as worker:
        ...     sorted(worker.run(p, p.data(0)).outputs) == p.output_names()
        True
    """

    def __init__(self, timeout: float = TIMEOUT_S):
        self.timeout, self.process, self.conn = timeout, None, None

    def run(self, p: RandomProgram, data: dict) -> UpstreamRun:
        if self.process is None:
            self.conn, child = multiprocessing.get_context("spawn").Pipe()
            self.process = multiprocessing.get_context("spawn").Process(target=_serve, args=(child,), daemon=True)
            self.process.start()
        self.conn.send((p, data))
        if self.conn.poll(self.timeout):
            try:
                return self.conn.recv()
            except EOFError:  # the child died
                self.process.join(10)
        died = self.process.exitcode
        self.close()
        return UpstreamRun(None, f"upstream's process crashed (exit status {died})" if died is not None
                           else f"upstream took over {self.timeout:g} s")

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve(conn) -> None:
    """The child's loop: programs in, `UpstreamRun`s out, until the parent closes the pipe. Its
    address space is capped at `CHILD_MEMORY` (the pipeline takes several GB on a few programs
    before it aborts; a run needs about 0.2 GB)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > CHILD_MEMORY:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, hard))
    while True:
        try:
            p, data = conn.recv()
        except EOFError:
            return
        conn.send(run_upstream(p, data))
