"""MLIR (linalg + tensor + sparse_tensor) -> Program.

A `tensor.empty()` that a reduction starts from or an op reads is zeros, as the reference
compiler reads it (one with a sparse encoding is an empty sparse tensor, zeros by MLIR's own
semantics); for a dense one a note says so on stderr, and `strict=True` refuses it instead.

    >>> p = from_mlir('''
    ... #csr = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
    ... func.func @spmm(%A: tensor<8x8xf32, #csr>, %X: tensor<8x4xf32>) -> tensor<8x4xf32> {
    ...   %z = arith.constant 0.0 : f32
    ...   %e = tensor.empty() : tensor<8x4xf32>
    ...   %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
    ...   %Y = linalg.matmul ins(%A, %X : tensor<8x8xf32, #csr>, tensor<8x4xf32>)
    ...                      outs(%f : tensor<8x4xf32>) -> tensor<8x4xf32>
    ...   return %Y : tensor<8x4xf32>
    ... }''')
    >>> print(p.ops[0])
    Y(i,j) = sum[k] A(i,k) * X(k,j)
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..errors import NotSupported, UserError
from ..ir.expr import Binary, Const, Expr, In, map_inputs, renumber_inputs
from ..ir.formats import TensorFormat
from ..ir.program import Access, IndexOp, Program, ReshapeOp, Tensor, op_output
from ..ir.verify import verify
from ..scalar_ops import REDUCTIONS
from .legacy import modernize
from .mlir_body import region_expression
from .mlir_types import constant_data, element_dtype, format_of, parse_location, resource_blobs, shape_of
from .structured import add_concat, implicit_maps

VAR_NAMES = "ijklmnpqrstuvw"
REDUCERS = {row.op: row.name for row in REDUCTIONS.values()}  # the binary op a reduction folds with -> its kind


def from_mlir(source: str | os.PathLike, func: str | None = None, formats: dict | None = None,
              arg_names: list[str] | None = None, strict: bool = False) -> Program:
    """Parse MLIR text or a `.mlir` file into a Program.

    - `source`: MLIR text (linalg + tensor + sparse_tensor on tensors), or a path (str or
      `os.PathLike`) to a `.mlir` file.
    - `func`: the function to import when the module has several (its name without `@`).
    - `formats`: {input name: "dense,compressed", ...} overriding inputs' storage formats.
    - `arg_names`: new names for the function's arguments, in order.
    - `strict`: refuse reading an unfilled dense `tensor.empty()` (otherwise zeros, with a
      note on stderr).
    """
    text, source_name = _read(source)
    text = modernize(text)
    from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as err:
            raise UserError(_diagnostic(err, source_name), None,
                            "check the MLIR text (it must parse with upstream MLIR)") from None
        func_op = _pick_function(module, func, source_name)
        importer = _Importer(func_op, source_name, resource_blobs(text), arg_names or [], text, strict)
        program = importer.run()
    if formats:
        apply_formats(program, formats)
    verify(program)
    return program


def apply_formats(program: Program, formats: dict) -> None:
    """Replace the declared formats of inputs: {name: "dense,compressed" | TensorFormat}."""
    for name, fmt in formats.items():
        if name not in program.tensors or name not in program.inputs:
            raise UserError(f"format given for {name!r}, which is not an input", f"program {program.name}",
                            f"inputs are {', '.join(program.inputs)}")
        tensor = program.tensors[name]
        if not isinstance(fmt, TensorFormat):
            fmt = TensorFormat.parse(str(fmt), tensor.rank, where=f"format of {name}")
        fmt.check(tensor.rank, f"format of {name}")
        program.tensors[name] = Tensor(tensor.name, tensor.shape, tensor.dtype, fmt)


def _read(source) -> tuple[str, str]:
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and source.strip().endswith(".mlir")):
        path = Path(source)
        if not path.is_file():
            raise UserError(f"no such MLIR file: {path}", None, "give the path of a .mlir file")
        return path.read_text(), str(path)
    return str(source), "<mlir>"


def _diagnostic(err, source_name: str) -> str:
    diags = getattr(err, "error_diagnostics", None) or []
    if diags:
        d = diags[0]
        return f"{parse_location(str(d.location), source_name)}: {d.message.splitlines()[0]}"
    return f"{source_name}: {str(err).splitlines()[-1]}"


def _pick_function(module, wanted: str | None, source_name: str):
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"
             and len(op.regions[0].blocks) > 0]
    names = [str(op.attributes["sym_name"]).strip('"') for op in funcs]
    if not funcs:
        raise UserError("the module has no function with a body", source_name)
    if wanted is not None:
        if wanted not in names:
            raise UserError(f"no function @{wanted}", source_name, f"functions are {', '.join(names)}")
        return funcs[names.index(wanted)]
    if len(funcs) == 1:
        return funcs[0]
    for preferred in ("main", "forward"):
        if preferred in names:
            return funcs[names.index(preferred)]
    raise UserError(f"the module has {len(funcs)} functions", source_name,
                    f"choose one of {', '.join(names)}")


def _clean_name(ssa: str) -> str:
    name = re.sub(r"\W", "_", ssa.lstrip("%"))
    return "t" + name if not name or name[0].isdigit() else name


_SSA = r"%[\w$.\-]+"


class _SourceNames:
    """SSA names as written in the source text (the MLIR parser renumbers them to %0, %arg0, ...).

    A value's name is found from its defining op's parse location (`loc("-":line:col)`),
    so only ops parsed from `text` itself are named this way; others keep the printed name.
    """

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.args: dict = {}

    def offset(self, op) -> int | None:
        match = re.fullmatch(r'loc\("-":(\d+):(\d+)\)', str(op.location))
        if not match or not self.text or int(match.group(1)) > len(self.line_starts):
            return None
        return self.line_starts[int(match.group(1)) - 1] + int(match.group(2)) - 1

    def of(self, value, func_op) -> str | None:
        from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

        if isinstance(value, ir.BlockArgument) or isinstance(value.owner, ir.Block):
            arg = ir.BlockArgument(value)
            if arg.owner != func_op.regions[0].blocks[0]:
                return None
            names = self.function_args(func_op)
            return names[arg.arg_number] if names and len(names) == len(arg.owner.arguments) else None
        start = self.offset(value.owner)
        if start is None:
            return None
        results = rf"((?:{_SSA}(?::\d+)?\s*,\s*)*{_SSA}(?::\d+)?)"  # `%a`, `%a:2`, `%a, %b`
        lhs = re.search(results + r"\s*=\s*$", self.text[max(0, start - 2000):start])
        if not lhs:
            return None
        names = []
        for item in lhs.group(1).split(","):
            name, _, count = item.strip().partition(":")
            names += [name] if not count else [f"{name}_{k}" for k in range(int(count))]
        index = list(value.owner.results).index(value)
        return names[index] if len(names) == len(value.owner.results) else None

    def function_args(self, func_op) -> list[str] | None:
        """`%A`, `%x`, ... from `func.func @f(%A: ..., %x: ...)`."""
        if func_op not in self.args:
            self.args[func_op] = None
            start = self.offset(func_op)
            open_paren = self.text.find("(", start) if start is not None else -1
            if open_paren >= 0:
                depth, pos = 0, open_paren
                for pos in range(open_paren, len(self.text)):
                    depth += {"(": 1, ")": -1}.get(self.text[pos], 0)
                    if depth == 0:
                        break
                self.args[func_op] = re.findall(rf"({_SSA})\s*:", self.text[open_paren:pos])
        return self.args[func_op]


class _Importer:
    """Converts one function lazily, from its return values back to its arguments."""

    def __init__(self, func_op, source_name: str, blobs: dict, arg_names: list[str], text: str = "",
                 strict: bool = False):
        from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

        self.ir = ir
        self.func = func_op
        self.source = source_name
        self.blobs = blobs
        self.dynamic = ir.ShapedType.get_dynamic_size()
        name = str(func_op.attributes["sym_name"]).strip('"')
        self.program = Program(name)
        self.names: dict = {}  # ir.Value -> tensor name
        self.producer_op: dict = {}  # tensor name -> the MLIR operation that defines it
        self.taken: set[str] = set()
        self.arg_names = arg_names
        self.source_names = _SourceNames(text)
        self.strict, self.noted_empty = strict, False

    # -- helpers ---------------------------------------------------------------
    def where(self, op) -> str:
        return parse_location(str(op.location), self.source)

    def fresh(self, wanted: str) -> str:
        name, k = wanted, 1
        while name in self.taken:
            name, k = f"{wanted}_{k}", k + 1
        self.taken.add(name)
        return name

    def tensor_type(self, value, where: str):
        if not isinstance(value.type, self.ir.RankedTensorType):
            raise NotSupported(f"value of type {value.type} (only ranked tensors)", where)
        return self.ir.RankedTensorType(value.type)

    def declare(self, value, where: str, role: str | None = None, name: str | None = None) -> str:
        rt = self.tensor_type(value, where)
        ssa = self.source_names.of(value, self.func) or value.get_name()
        tensor = Tensor(self.fresh(name or _clean_name(ssa)), shape_of(rt, self.dynamic),
                        element_dtype(rt.element_type, where), format_of(rt, where))
        self.program.add_tensor(tensor, role)
        self.names[value] = tensor.name
        owner = value.owner
        if hasattr(owner, "operation") and not isinstance(owner, self.ir.Block):
            self.producer_op[tensor.name] = owner.operation
        return tensor.name

    # -- driver ----------------------------------------------------------------
    def run(self) -> Program:
        block = self.func.regions[0].blocks[0]
        where = self.where(self.func)
        if self.arg_names and len(self.arg_names) != len(block.arguments):
            raise UserError(f"{len(self.arg_names)} argument names for {len(block.arguments)} arguments", where)
        for k, arg in enumerate(block.arguments):
            name = self.arg_names[k] if self.arg_names else None
            self.declare(arg, where, role="input", name=name)
        terminator = list(block.operations)[-1]
        for value in list(terminator.operands) or written_arguments(block):
            name = self.tensor_of(value)
            if name in self.program.inputs:  # returning an argument: make the output a copy
                name = self.copy_of(value, name, self.where(terminator))
            self.program.outputs.append(name)
        # ops in the order the function lists them (the model's execution order; a topological
        # order), rather than the order the lazy conversion met them
        position = {op.operation: k for k, op in enumerate(block.operations)}
        rank = {name: position.get(self.producer_op.get(name), len(position)) for name in self.producer_op}
        self.program.ops.sort(key=lambda op: rank.get(op_output(op), len(position)))
        return self.program

    def copy_of(self, value, source: str, where: str) -> str:
        tensor = self.program.tensors[source]
        out = self.fresh(source + "_out")
        self.program.add_tensor(Tensor(out, tensor.shape, tensor.dtype))
        vars_ = tuple(VAR_NAMES[:tensor.rank])
        self.program.add_op(IndexOp(Access(out, vars_), (Access(source, vars_),), In(0), loc=where))
        return out

    def tensor_of(self, value) -> str:
        """Name of the tensor holding `value`, converting its producer on first use."""
        if value in self.names:
            return self.names[value]
        op = value.owner
        where = self.where(op)
        name = op.name
        if name == "arith.constant":
            return self.constant(value, op, where)
        if name == "linalg.fill":
            return self.fill(value, op, where)
        if name == "linalg.transpose":
            return self.transpose(value, op, where)
        if name == "linalg.broadcast":
            return self.broadcast(value, op, where)
        if name in ("tensor.expand_shape", "tensor.collapse_shape"):
            return self.reshape(value, op, where)
        if name == "tensor.cast":
            self.names[value] = self.tensor_of(op.operands[0])
            return self.names[value]
        if name.startswith("linalg.") and len(op.regions) == 1 and self.maps_of(op) is not None:
            return self.structured(value, op, where)
        if name == "tensor.concat":
            return self.concat(value, op, where)
        if name == "tensor.empty":
            self.empty_as_zeros(value, "reading an uninitialised tensor.empty as data", where,
                                "fill it first (linalg.fill), or leave the body's output argument unread")
            return self.zeros(value, where)
        raise NotSupported(f"operation {name} (supported: linalg.generic; named linalg ops with a body: "
                           "contractions such as matmul, elementwise such as add/mul/max/exp, map, reduce; "
                           "linalg.fill/transpose/broadcast; tensor.expand_shape/collapse_shape/cast/concat; "
                           "arith.constant)", where,
                           "generalise named ops (mlir-opt --linalg-generalize-named-ops) or write it as a "
                           "linalg.generic")

    # -- producers -------------------------------------------------------------
    def constant(self, value, op, where) -> str:
        rt = self.tensor_type(value, where)
        data = constant_data(op.attributes["value"], rt, self.blobs, where)
        name = self.declare(value, where, role="input")
        if data is not None:
            self.program.constants[name] = data
        return name

    def fill(self, value, op, where) -> str:
        scalar = self.scalar_constant(op.operands[0], where)
        name = self.declare(value, where)
        rank = self.program.tensors[name].rank
        vars_ = tuple(VAR_NAMES[:rank])
        self.program.add_op(IndexOp(Access(name, vars_), (), Const(scalar), loc=where))
        return name

    def zeros(self, value, where) -> str:
        """A tensor of zeros (an unfilled tensor.empty read as the reference compiler reads it)."""
        name = self.declare(value, where)
        vars_ = tuple(VAR_NAMES[:self.program.tensors[name].rank])
        self.program.add_op(IndexOp(Access(name, vars_), (), Const(0.0), loc=where))
        return name

    def empty_as_zeros(self, value, what: str, where: str, fix: str) -> None:
        """Accept reading an unfilled tensor.empty as zeros: silently when it has a sparse encoding
        (an empty sparse tensor), with one note for a dense one; refused under `strict`."""
        if not format_of(self.tensor_type(value, where), where).is_dense:
            return
        if self.strict:
            raise NotSupported(f"{what} (MLIR leaves its values undefined; --strict refuses reading it as zeros)",
                               where, fix)
        if not self.noted_empty:
            self.noted_empty = True
            print(f"fuseflow: note: {where}: {what} is read as zeros, as the reference compiler reads it "
                  "(MLIR leaves it undefined; --strict refuses it)", file=sys.stderr)

    def scalar_constant(self, value, where) -> float:
        owner = value.owner
        if not hasattr(owner, "name") or owner.name != "arith.constant":
            raise NotSupported("linalg.fill with a non-constant value", where)
        return float(self.ir.FloatAttr(owner.attributes["value"]).value)

    def init_of(self, value, where) -> float | str | None:
        """The starting value a reduction accumulates into."""
        owner = value.owner
        if hasattr(owner, "name"):
            if owner.name == "tensor.empty":
                self.empty_as_zeros(value, "a reduction into an uninitialised tensor.empty", where,
                                    "fill the init first: linalg.fill with 0 for a sum, -inf (0xFF800000) for a max")
                return 0.0
            if owner.name == "linalg.fill":
                return self.scalar_constant(owner.operands[0], self.where(owner))
        return self.tensor_of(value)

    def transpose(self, value, op, where) -> str:
        perm = list(op.attributes["permutation"])
        source = self.tensor_of(op.operands[0])
        name = self.declare(value, where)
        out_vars = tuple(VAR_NAMES[:len(perm)])
        in_vars = [""] * len(perm)
        for k, p in enumerate(perm):  # out[k] = in[perm[k]]
            in_vars[p] = out_vars[k]
        self.program.add_op(IndexOp(Access(name, out_vars), (Access(source, tuple(in_vars)),), In(0), loc=where))
        return name

    def broadcast(self, value, op, where) -> str:
        added = set(op.attributes["dimensions"])
        source = self.tensor_of(op.operands[0])
        name = self.declare(value, where)
        out_vars = tuple(VAR_NAMES[:self.program.tensors[name].rank])
        in_vars = tuple(v for k, v in enumerate(out_vars) if k not in added)
        self.program.add_op(IndexOp(Access(name, out_vars), (Access(source, in_vars),), In(0), loc=where))
        return name

    def reshape(self, value, op, where) -> str:
        ir = self.ir
        groups = [[ir.IntegerAttr(x).value for x in g] for g in op.attributes["reassociation"]]
        source = self.tensor_of(op.operands[0])
        name = self.declare(value, where)
        src, dst = self.program.tensors[source], self.program.tensors[name]
        expanding = op.name == "tensor.expand_shape"
        big, small = (dst, src) if expanding else (src, dst)
        big_idx: list = [0] * big.rank
        small_idx: list = []
        next_var = iter(VAR_NAMES)
        for g, group in enumerate(groups):
            wide = [d for d in group if big.shape[d] != 1]
            if len(wide) > 1:  # a real reshape, not just unit dimensions
                self.program.add_op(ReshapeOp(name, source, tuple(tuple(g) for g in groups), where))
                return name
            if wide or small.shape[g] != 1:
                var = next(next_var)
                big_idx[wide[0] if wide else group[0]] = var
                small_idx.append(var)
            else:
                small_idx.append(0)
        out_idx, in_idx = (big_idx, small_idx) if expanding else (small_idx, big_idx)
        self.program.add_op(IndexOp(Access(name, tuple(out_idx)), (Access(source, tuple(in_idx)),), In(0),
                                    loc=where))
        return name

    # -- structured linalg ops ---------------------------------------------------
    def maps_of(self, op):
        """The op's indexing maps: its attribute, or those implied by a named elementwise op,
        `linalg.map` or `linalg.reduce`; None for other ops."""
        for key in ("indexing_maps", "linalg.memoized_indexing_maps"):
            if key in op.attributes:
                return [self.ir.AffineMapAttr(m).value for m in op.attributes[key]]
        return implicit_maps(op, self.ir)

    def concat(self, value, op, where) -> str:
        """`tensor.concat` as products with constant 0/1 placement matrices, then their sum
        (`structured.add_concat`)."""
        dim = self.ir.IntegerAttr(op.attributes["dim"]).value
        sources = [self.tensor_of(operand) for operand in op.operands]
        name = self.declare(value, where)
        for part in add_concat(self.program, name, sources, dim, where, self.fresh):
            self.producer_op[part] = op.operation  # listed where the concat is, before its sum
        return name

    def indices(self, amap, where, op_name: str = "a linalg op") -> tuple:
        out = []
        for expr in amap.results:
            if isinstance(expr, self.ir.AffineDimExpr):
                out.append(VAR_NAMES[expr.position] if expr.position < len(VAR_NAMES) else f"d{expr.position}")
            elif isinstance(expr, self.ir.AffineConstantExpr) and expr.value == 0:
                out.append(0)
            else:
                raise NotSupported(f"indexing expression {expr} in {op_name} (only dimensions and constant 0)",
                                   where)
        return tuple(out)

    def structured(self, value, op, where) -> str:
        view = op.opview
        ins = list(view.inputs)
        outs = list(op.operands)[len(ins):]  # destination-style: inputs, then outputs (`inits`, `init`)
        maps = self.maps_of(op)
        result_index = list(op.results).index(value)
        body = region_expression(op, result_index, self.where)
        n_in = len(ins)
        out_slot = n_in + result_index
        out_indices = self.indices(maps[n_in + result_index], where, op.name)
        all_vars = {v for m in maps for v in self.indices(m, where, op.name) if isinstance(v, str)}
        reduce_vars = tuple(sorted(all_vars - set(out_indices), key=_var_key))
        init = None
        kind = None
        used = body.inputs_used()
        if reduce_vars:
            body, kind = self.split_reduction(body, out_slot, where)
            init = self.init_of(outs[result_index], where)
        elif out_slot in used:  # a parallel op reading its output operand: an ordinary input
            init = None
        elif any(n_in <= s for s in used):
            raise NotSupported("a linalg body reading another result's output operand", where)
        name = self.declare(value, where)
        operands = ins + [outs[result_index]]
        operand_maps = maps[:n_in] + [maps[n_in + result_index]]
        slot_of = {n_in + result_index: n_in}
        for s in sorted(body.inputs_used()):  # an unfilled tensor.empty read in the body: zeros
            operand = operands[slot_of.get(s, s)]
            if getattr(operand.owner, "name", None) == "tensor.empty":
                self.empty_as_zeros(operand, "reading an uninitialised tensor.empty as data", self.where(operand.owner),
                                    "fill it first (linalg.fill), or leave the body's output argument unread")
                body = _with_zero(body, s)
        slots = sorted(s for s in body.inputs_used())
        accesses, renumber = [], {}
        for s in slots:
            k = slot_of.get(s, s)
            renumber[s] = len(accesses)
            accesses.append(Access(self.tensor_of(operands[k]), self.indices(operand_maps[k], where)))
        body = renumber_inputs(body, renumber)
        self.program.add_op(IndexOp(Access(name, out_indices), tuple(accesses), body, reduce_vars, kind,
                                    init, where))
        return name

    def split_reduction(self, body: Expr, out_slot: int, where) -> tuple[Expr, str]:
        """`combine(x, out)` -> (x, kind); anything else is not a supported reduction."""
        if isinstance(body, Binary) and body.op in REDUCERS:
            for acc, term in ((body.lhs, body.rhs), (body.rhs, body.lhs)):
                if acc == In(out_slot) and out_slot not in term.inputs_used():
                    return term, REDUCERS[body.op]
        raise NotSupported("a reduction body that is not add/max/min of a term and the accumulator", where,
                           "write it as acc = addf/maximumf/minimumf(term, acc), with the term not reading acc")


def destinations(op) -> list:
    """The operands a destination-style linalg op writes its results into (`outs`, `inits`,
    `init`), one per result; [] for other ops."""
    if not op.name.startswith("linalg.") or not len(op.results):
        return []
    view = op.opview
    ins = list(view.inputs) if hasattr(view, "inputs") else []
    return list(op.operands)[len(ins):][:len(op.results)]


def written_arguments(block) -> list:
    """For a function that returns nothing: the last value written into each argument through
    `outs` (`%r = linalg.generic ... outs(%x ...)` then a bare `return`, as the reference
    compiler's tests write kernels), in argument order. An op whose `outs` is an earlier such
    result writes into the same argument, and its result supersedes that one.

        >>> p = from_mlir('''
        ... func.func @f(%a: tensor<3xf32>, %x: tensor<3xf32>) {
        ...   %r = linalg.exp ins(%a : tensor<3xf32>) outs(%x : tensor<3xf32>) -> tensor<3xf32>
        ...   return
        ... }''')
        >>> p.outputs, str(p.ops[0])
        (['r'], 'r(i) = exp(a(i))')
    """
    owner: dict = {arg: arg for arg in block.arguments}  # an argument or a value written into it -> the argument
    written: dict = {}  # argument -> the last value written into it
    for op in block.operations:
        for k, dest in enumerate(destinations(op)):
            if dest in owner:
                owner[op.results[k]] = owner[dest]
                written[owner[dest]] = op.results[k]
    return [written[arg] for arg in block.arguments if arg in written]


def _with_zero(e: Expr, slot: int) -> Expr:
    """`e` with operand `slot` replaced by the constant 0."""
    return map_inputs(e, lambda leaf: Const(0.0) if leaf.index == slot else leaf)


def _var_key(v: str):
    return (VAR_NAMES.index(v), "") if v in VAR_NAMES else (len(VAR_NAMES), v)
