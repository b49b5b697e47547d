"""Numpy reference evaluator: the gold result every simulated output is checked against.

It is independent of any lowering. Values are dense arrays, except large sparse matrices, which
stay scipy sparse (`ir.values`): products with them follow their nonzeros (`ir.sparse_eval`),
so the cost of a graph convolution is edges x features, not nodes². An op with a sparse operand
outside those forms sees it densified, if that fits in memory.

A product reads every matrix the program stores sparse (`stored_sparse`) as its stored entries,
whatever the size of its data: a position such an operand does not store contributes an exact
zero, as in MLIR's sparsifier, `torch.sparse` and fuseflow's simulator (`0 * inf` never arises
there), and a sparse x sparse product costs its nonzeros, not an n³ dense contraction.

    >>> import numpy as np
    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir('''
    ... func.func @spmv(%A: tensor<2x2xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
    ...   %z = arith.constant 0.0 : f32
    ...   %e = tensor.empty() : tensor<2xf32>
    ...   %f = linalg.fill ins(%z : f32) outs(%e : tensor<2xf32>) -> tensor<2xf32>
    ...   %y = linalg.matvec ins(%A, %x : tensor<2x2xf32>, tensor<2xf32>) outs(%f : tensor<2xf32>) -> tensor<2xf32>
    ...   return %y : tensor<2xf32>
    ... }''')
    >>> reference(p, {"A": np.eye(2), "x": np.array([3.0, 4.0])})["y"].tolist()
    [3.0, 4.0]
"""
from __future__ import annotations

import string
from typing import Mapping

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..scalar_ops import REDUCTIONS, is_identity
from . import sparse_eval
from .background import backgrounds
from .expr import Const, In, product_factors
from .program import IndexOp, Program, ReshapeOp, op_output
from .values import DENSE_LIMIT, as_value, densify, is_sparse, shape_of
from .verify import infer_shapes

CHUNK_ELEMENTS = 1 << 25  # largest iteration space evaluated in one piece by the general path


def to_dense(value, dtype=np.float64) -> np.ndarray:
    """numpy array, scipy.sparse matrix/array, or torch tensor (dense or sparse) -> ndarray."""
    return densify(as_value(value, dtype, dense_limit=1 << 62), dtype=dtype)


def bind_inputs(program: Program, tensors: Mapping | None, dtype=np.float64,
                dense_limit: int = DENSE_LIMIT) -> dict:
    """A value for every program input: supplied data first, then known constants. Large sparse
    matrices stay sparse (see `ir.values.as_value`), everything else is a dense array."""
    tensors = dict(tensors or {})
    unknown = sorted(set(tensors) - set(program.inputs))
    if unknown:
        raise UserError(f"data given for {unknown[0]!r}, which is not an input of program "
                        f"{program.name}", None, f"inputs are {', '.join(program.inputs)}")
    bound = {}
    for name in program.inputs:
        if name in tensors:
            bound[name] = as_value(tensors[name], dtype, dense_limit)
        elif name in program.constants:
            bound[name] = as_value(program.constants[name], dtype, dense_limit)
        else:
            raise UserError(f"no data for input {name!r} of program {program.name}", None,
                            "pass it, or generate inputs with fuseflow.random_inputs(program)")
    return bound


def reference(program: Program, tensors: Mapping | None = None, dtype=np.float64,
              keep_intermediates: bool = False, dense_limit: int = DENSE_LIMIT) -> dict:
    """Evaluate `program` in numpy; returns {name: array} of its outputs (and of every op's
    result with `keep_intermediates`), dense arrays or, for sparse results of more than
    `dense_limit` elements, scipy sparse arrays.

    - `tensors`: {input name (or `argK`): numpy array or scipy sparse matrix}; None for a
      program whose inputs are all constants.
    - `dtype`: the numpy float type computed in (default float64).
    """
    run = ReferenceRun(program, tensors, dtype, dense_limit)
    names = [op_output(op) for op in program.ops] if keep_intermediates else list(program.outputs)
    return run.values(names)


class ReferenceRun:
    """The reference evaluated op by op as values are asked for (`values`), holding a result
    only while a later op reads it or the caller keeps it (`keep`): a caller that needs the
    intermediates one group at a time (a partitioned run, kernel by kernel) never holds them
    all. `check(nbytes, what)`, if given, is asked before each dense result is computed (a
    memory budget's check, which raises when it does not fit).

        >>> from fuseflow.frontend import from_mlir
        >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
        >>> import fuseflow; run = ReferenceRun(p, fuseflow.random_inputs(p, seed=1))
        >>> first = p.ops[0].output.tensor; sorted(run.values([first])) == [first]
        True
        >>> run.keep([]); first in run.held()  # a later op reads it
        True
        >>> _ = run.values(p.outputs); run.keep([]); run.held() == set(p.inputs)
        True
    """

    def __init__(self, program: Program, tensors: Mapping | None, dtype=np.float64,
                 dense_limit: int = DENSE_LIMIT, check=None):
        self.program, self.dtype, self.dense_limit, self.check = program, dtype, dense_limit, check
        self.env = bind_inputs(program, tensors, dtype, dense_limit)
        self.shapes = infer_shapes(program, {name: shape_of(a) for name, a in self.env.items()})
        self.last_read = {name: k for k, op in enumerate(program.ops) for name in op.tensors_read}
        self.producer = {op_output(op): k for k, op in enumerate(program.ops)}
        self.sparse = stored_sparse(program)
        self.done = 0  # ops evaluated
        self.kept: set[str] = set()
        self.returned: dict = {}  # results as returned (`_as_returned`), made once

    def values(self, names, check=None) -> dict:
        """{name: value} of `names` (inputs or op results; other names are left out),
        evaluating ops up to the last one they need; they are kept until `keep` says otherwise.
        `check`, if given, is asked in place of the run's own for the ops this call evaluates;
        when it raises, the op it was asked for is not evaluated, and a later call goes on from it."""
        names = [n for n in names if n in self.env or n in self.producer]
        self.kept |= set(names)
        last = max((self.producer.get(n, -1) for n in names), default=-1)
        while self.done <= last:
            self._step(self.check if check is None else check)
        out = {}
        for name in names:
            if name in self.producer and name not in self.returned:
                self.returned[name] = _as_returned(self.env[name], self.dense_limit, self.dtype)
            out[name] = self.returned.get(name, self.env[name])
        return out

    def keep(self, names) -> None:
        """Hold only `names` (besides the inputs and what later ops read); the rest is dropped."""
        self.kept = set(names)
        for name in [n for n in self.env if not self._wanted(n)]:
            self.env.pop(name)
            self.returned.pop(name, None)

    def held(self) -> set[str]:
        return set(self.env)

    def _wanted(self, name: str) -> bool:
        return name in self.program.inputs or name in self.kept or self.last_read.get(name, -1) >= self.done

    def _step(self, check) -> None:
        op, k = self.program.ops[self.done], self.done
        out, env, dtype = op_output(op), self.env, self.dtype
        into = self._reusable(op, k)
        if check is not None:
            size = int(np.prod(self.shapes[out], dtype=np.float64))
            what = f"the reference's {out} {tuple(self.shapes[out])}"
            if not any(is_sparse(env[n]) for n in op.tensors_read if n in env):
                check(_step_bytes(op, size, into is not None, dtype), what)
            elif out not in self.sparse:  # a sparse operand's product, kept dense: its result at least
                check(size * np.dtype(dtype).itemsize, what)
        if isinstance(op, ReshapeOp):
            source = densify(env[op.input], f"input {op.input} of a reshape", dtype)
            env[out] = np.reshape(source, self.shapes[out])
        elif into is not None:
            env[out] = _evaluate_general(op, env, dtype, self.shapes[out], into=into)
        else:
            env[out] = _evaluate(op, _as_stored(op, env, self.sparse, dtype), self.shapes[out], dtype)
        self.done += 1
        for name in op.tensors_read:  # an intermediate no later op reads and nobody keeps is dropped
            if self.last_read[name] == k and not self._wanted(name):
                env.pop(name, None)
                self.returned.pop(name, None)

    def _reusable(self, op, k: int):
        """The array of an input whose memory op k's result can take (`in_place_operand`), when
        nothing else holds it: an intermediate op k reads last, that no caller keeps or was
        given, sharing memory with no other value; else None."""
        name = in_place_operand(op, self.shapes)
        if name is None or name in self.program.inputs or name in self.kept or name in self.returned or \
                self.last_read.get(name) != k:
            return None
        array = self.env.get(name)
        if any(is_sparse(self.env.get(a.tensor)) for a in op.inputs) or not isinstance(array, np.ndarray):
            return None
        if array.dtype != self.dtype or not array.flags.c_contiguous or not array.flags.writeable:
            return None
        if any(n != name and isinstance(v, np.ndarray) and np.may_share_memory(v, array) for n, v in self.env.items()):
            return None
        return array


def _step_bytes(op, size: int, in_place: bool, dtype) -> int:
    """Bytes evaluating a dense op of `size` result elements takes at most: written in place, a
    piece's temporaries; a product einsum computes straight into its result (once more when it
    is scaled or starts from an `init` other than the reduction's identity); the general path
    writes pieces of `CHUNK_ELEMENTS` into one result (two pieces' temporaries beside it), but
    combines a reduced first loop piece by piece and copies a transposed result once.

        >>> from fuseflow.frontend import from_mlir
        >>> mm, relu = from_mlir("tests/mlir/matmul_chain.mlir").ops[0], from_mlir("tests/mlir/relu.mlir").ops[1]
        >>> [round(_step_bytes(op, 10**8, False, np.float64) / 8e8, 2) for op in (mm, relu)]  # x the result
        [1.0, 1.67]
    """
    piece = min(size, CHUNK_ELEMENTS)
    itemsize = np.dtype(dtype).itemsize
    if in_place:
        return 2 * piece * itemsize
    if isinstance(op, ReshapeOp):
        return 2 * size * itemsize
    if _takes_product_path(op):
        once = is_identity(op.init, op.reduce_kind) and all(not isinstance(f, Const) for f in product_factors(op.body))
        return (size if once else 2 * size + piece) * itemsize
    kept = [v for v in op.vars if v not in op.reduce_vars]
    twice = list(op.vars[:1]) != kept[:1] or kept != list(op.output.vars) or not is_identity(op.init, op.reduce_kind)
    return (2 * size + piece if twice else size + 2 * piece) * itemsize


def in_place_operand(op, shapes: Mapping) -> str | None:
    """The input an elementwise op can write its result over, piece by piece: the op reduces
    nothing and starts from nothing, takes the general path (`_evaluate_dense`: not a product
    einsum evaluates), and reads that input, of the result's shape, only at the result's own
    coordinates (one access, its indices the op's loop order). Each piece of rows is computed
    before it is written, from those rows only, so the values are the same as into a new array.

        >>> from fuseflow.frontend import from_mlir
        >>> p = from_mlir("tests/mlir/relu.mlir")
        >>> [in_place_operand(op, {n: t.shape for n, t in p.tensors.items()}) for op in p.ops]
        [None, 'AX']
    """
    if isinstance(op, ReshapeOp) or op.reduce_vars or op.init is not None or _takes_product_path(op):
        return None
    out = op_output(op)
    if tuple(op.output.indices) != tuple(op.vars):
        return None
    for name in dict.fromkeys(a.tensor for a in op.inputs):
        accesses = [a for a in op.inputs if a.tensor == name]
        if len(accesses) == 1 and tuple(accesses[0].indices) == tuple(op.vars) and \
                tuple(shapes.get(name, ())) == tuple(shapes.get(out, ())) and name != out:
            return name
    return None


def _takes_product_path(op: IndexOp) -> bool:
    """Whether `_evaluate_dense` evaluates `op` as a product (einsum)."""
    factors = product_factors(op.body)
    covered = {v for a in op.inputs for v in a.vars} >= set(op.output.vars)
    return factors is not None and covered and op.reduce_kind in (None, "sum") and \
        any(isinstance(f, In) for f in factors)


def stored_sparse(program: Program) -> set[str]:
    """The matrices a program stores as exactly their nonzeros: a 2-D sparse format whose
    innermost level is compressed (no dense tiles), with background 0.

        >>> from fuseflow.frontend import from_mlir
        >>> sorted(stored_sparse(from_mlir("tests/mlir/spmv.mlir")))
        ['A']
    """
    bg = backgrounds(program)
    return {name for name, t in program.tensors.items()
            if t.format.rank == 2 and not t.format.block and t.format.levels[-1].is_compressed and bg.get(name) == 0.0}


def _as_stored(op, env, sparse: set[str], dtype):
    """`env` with the stored-sparse operands of a product (`stored_sparse`) as scipy matrices
    of their stored entries; other ops see values as they are."""
    if product_factors(op.body) is None or op.reduce_kind not in (None, "sum"):
        return env
    wanted = [a.tensor for a in op.inputs if a.tensor in sparse and not is_sparse(env[a.tensor])
              and np.ndim(env[a.tensor]) == 2]
    return {**env, **{name: _stored_entries(env[name], dtype) for name in wanted}} if wanted else env


def _stored_entries(array, dtype) -> sp.csr_array:
    """A dense matrix as a scipy `csr_array` of its nonzeros (NaN counts as stored)."""
    array = np.asarray(array, dtype=dtype)
    rows, cols = np.nonzero(array)
    return sp.csr_array((array[rows, cols], (rows, cols)), shape=array.shape)


def _as_returned(value, dense_limit: int, dtype):
    """A result as `bind_inputs` would hold it: sparse only when larger than `dense_limit`."""
    return as_value(value, dtype, dense_limit) if is_sparse(value) else value


def _access_array(op: IndexOp, k: int, env) -> np.ndarray:
    """Input k with constant indices removed (they index unit dims)."""
    access = op.inputs[k]
    arr = env[access.tensor]
    return arr[tuple(0 if isinstance(i, int) else slice(None) for i in access.indices)]


def _letters(vars_: tuple[str, ...]) -> dict[str, str]:
    assert len(vars_) <= 52, "too many index variables for the einsum path"
    return dict(zip(vars_, string.ascii_letters))


def _evaluate(op: IndexOp, env, out_shape, dtype):
    result = None
    if any(is_sparse(env[a.tensor]) for a in op.inputs):
        result = sparse_eval.evaluate(op, env, out_shape, dtype)
        if result is not None and not is_sparse(result) and np.shape(result) != tuple(out_shape):
            result = np.reshape(result, out_shape)  # a unit dimension the sparse path leaves out (A's row sums, mx1)
        if result is not None and is_identity(op.init, op.reduce_kind):
            return result
        env = {**env, **{a.tensor: densify(env[a.tensor], f"operand {a.tensor} of {op}", dtype)
                         for a in op.inputs if is_sparse(env[a.tensor])}}
    if result is not None:  # a sparse path's result still to start from `init`
        result = densify(result, f"the result of {op}", dtype)
    else:
        result = _evaluate_dense(op, env, out_shape, dtype)
    if op.init is not None and not is_identity(op.init, op.reduce_kind):  # 0 + x is x: no second array
        init = densify(env[op.init], f"the start of {op}", dtype) if isinstance(op.init, str) else dtype(op.init)
        combine = REDUCTIONS[op.reduce_kind or "sum"].numpy
        result = combine(init, result) if op.reduce_vars else result
    return np.ascontiguousarray(result, dtype=dtype)


def _evaluate_dense(op: IndexOp, env, out_shape, dtype) -> np.ndarray:
    if _takes_product_path(op):
        result = _evaluate_product(op, product_factors(op.body), env, dtype)
    else:
        result = _evaluate_general(op, env, dtype, out_shape)
    return result.reshape(out_shape) if result.size == int(np.prod(out_shape)) else \
        np.broadcast_to(result, out_shape)


def _evaluate_product(op: IndexOp, factors, env, dtype) -> np.ndarray:
    letter = _letters(op.vars)
    operands, subscripts, scale = [], [], dtype(1)
    for factor in factors:
        if isinstance(factor, Const):
            scale = scale * dtype(factor.value)
            continue
        operands.append(_access_array(op, factor.index, env))
        subscripts.append("".join(letter[v] for v in op.inputs[factor.index].vars))
    out = "".join(letter[v] for v in op.output.vars)
    result = np.einsum(",".join(subscripts) + "->" + out, *operands, optimize=len(operands) > 2)
    return result * scale if scale != 1 else result


def _evaluate_general(op: IndexOp, env, dtype, out_shape=(), into: np.ndarray | None = None) -> np.ndarray:
    """`op` evaluated over pieces of rows of its loop space, each reduced or written into the
    result as it comes; `into` (an operand, see `in_place_operand`) receives the result in
    place of a new array."""
    vars_ = op.vars
    letter = _letters(vars_)
    extent: dict[str, int] = {v: d for v, d in zip(op.output.indices, out_shape) if isinstance(v, str)}
    views = []
    for k, access in enumerate(op.inputs):
        arr = _access_array(op, k, env)
        for v, d in zip(access.vars, arr.shape):
            extent[v] = d
        present = [v for v in vars_ if v in access.vars]
        if present != list(access.vars):
            arr = np.einsum("".join(letter[v] for v in access.vars) + "->" + "".join(letter[v] for v in present), arr)
        views.append(arr.reshape([extent[v] if v in access.vars else 1 for v in vars_]))
    full = [extent[v] for v in vars_]
    reduce_axes = tuple(vars_.index(v) for v in op.reduce_vars)
    out_vars = op.output.vars
    if not vars_:
        return np.asarray(op.body.evaluate(views, dtype), dtype=dtype)
    rows = max(1, CHUNK_ELEMENTS // max(1, int(np.prod(full[1:]))))
    axis_is_reduced = vars_[0] in op.reduce_vars
    result = None
    for start in range(0, full[0], rows):  # pieces combined (reduced) or written into one result as they come
        part = [v[start:start + rows] if v.shape[0] != 1 else v for v in views]
        shape = [min(rows, full[0] - start)] + full[1:]
        value = np.broadcast_to(np.asarray(op.body.evaluate(part, dtype), dtype=dtype), shape)
        if reduce_axes:
            value = REDUCTIONS[op.reduce_kind].numpy.reduce(value, axis=reduce_axes)
        if axis_is_reduced:
            result = value if result is None else REDUCTIONS[op.reduce_kind].numpy(result, value)
            continue
        if result is None:
            result = into.reshape(full) if into is not None else \
                np.empty((full[0],) + value.shape[1:], dtype=value.dtype)
        result[start:start + value.shape[0]] = value
    kept = [v for v in vars_ if v not in op.reduce_vars]
    return np.transpose(result, [kept.index(v) for v in out_vars])
