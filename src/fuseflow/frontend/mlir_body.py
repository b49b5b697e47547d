"""The scalar region of a linalg op -> an expression tree over its block arguments.

Block argument k becomes `In(k)` (inputs first, then outputs, as linalg orders
them); the importer later renumbers or removes the output slots.
"""
from __future__ import annotations

import re

from ..errors import NotSupported
from ..ir.expr import Binary, Compare, Const, Expr, In, Select, Unary, simplify

BINARY_OPS = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
              "arith.maximumf": "max", "arith.minimumf": "min", "arith.maxnumf": "max",
              "arith.minnumf": "min",
              # integer ops on integer values are exact in float64 (up to 2**53)
              "arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul", "arith.maxsi": "max",
              "arith.minsi": "min"}
UNARY_OPS = {"arith.negf": "neg", "math.exp": "exp", "math.sqrt": "sqrt", "math.rsqrt": "rsqrt",
             "math.tanh": "tanh", "math.erf": "erf", "math.absf": "abs"}
CASTS = {"arith.extf", "arith.truncf", "arith.sitofp", "arith.extsi"}  # the value is unchanged
TO_INTEGER = {"arith.fptosi"}  # truncation toward zero: the value is unchanged when it is integral
SUPPORTED = ("arith.addf/subf/mulf/divf/maximumf/minimumf/negf/cmpf/select/constant/extf/truncf, "
             "arith.addi/subi/muli/maxsi/minsi/sitofp/extsi, arith.fptosi of integral values, "
             "math.exp/sqrt/rsqrt/tanh/erf/absf, math.powf and math.fpowi with a constant exponent 1-4")
# arith.cmpf predicates by enum value: false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno true
CMPF = {1: "eq", 2: "gt", 3: "ge", 4: "lt", 5: "le", 6: "ne", 8: "eq", 9: "gt", 10: "ge", 11: "lt",
        12: "le", 13: "ne"}


def region_expression(op, result: int, where_of) -> Expr:
    """The expression of the op's body that yields result number `result`."""
    block = op.regions[0].blocks[0]
    slots = {arg: In(k) for k, arg in enumerate(block.arguments)}
    terminator = list(block.operations)[-1]
    parent = where_of(op)

    def located(inner) -> str:  # a named op's implicit body has no locations of its own
        where = where_of(inner)
        return where if re.search(r":\d+:\d+$", where) else parent

    return simplify(_convert(terminator.operands[result], slots, {}, located))


def _float_constant(op, where) -> float:
    from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

    attr = op.attributes["value"]
    if isinstance(attr, ir.FloatAttr) or str(op.result.type).startswith(("f", "bf")):
        return float(ir.FloatAttr(attr).value)
    if isinstance(attr, ir.IntegerAttr):
        return float(ir.IntegerAttr(attr).value)
    raise NotSupported(f"scalar constant {attr}", where)


INTEGRAL_OPS = {"arith.addf", "arith.subf", "arith.mulf", "arith.maximumf", "arith.minimumf", "arith.maxnumf",
                "arith.minnumf", "arith.negf", "math.absf", "arith.select", *CASTS, *TO_INTEGER}


def _integral(value) -> bool:
    """True when `value` is a whole number whatever the inputs: an integer-typed value, an integral
    constant, or sums, products, maxima and selections of such (a select's condition aside)."""
    from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

    if isinstance(value.type, ir.IntegerType):
        return True
    owner = value.owner
    if isinstance(owner, ir.Block) or not hasattr(owner, "name"):
        return False
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name == "arith.constant":
        try:
            return float(_float_constant(op, None)).is_integer()
        except NotSupported:
            return False
    operands = list(op.operands)[1:] if op.name == "arith.select" else list(op.operands)
    return op.name in INTEGRAL_OPS and all(_integral(v) for v in operands)


def _convert(value, slots, memo, where_of) -> Expr:
    from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

    if value in slots:
        return slots[value]
    if value in memo:
        return memo[value]
    owner = value.owner
    if isinstance(owner, ir.Block) or not hasattr(owner, "name"):
        raise NotSupported("a block argument from an enclosing region in a linalg body", None)
    op = owner.operation if hasattr(owner, "operation") else owner
    where = where_of(op)
    args = [lambda k=k: _convert(op.operands[k], slots, memo, where_of) for k in range(len(op.operands))]
    name = op.name
    if name in BINARY_OPS:
        expr: Expr = Binary(BINARY_OPS[name], args[0](), args[1]())
    elif name in UNARY_OPS:
        expr = Unary(UNARY_OPS[name], args[0]())
    elif name in CASTS:
        expr = args[0]()
    elif name in TO_INTEGER:
        if not _integral(op.operands[0]):
            raise NotSupported(f"{name} of a value that may have a fraction (fuseflow computes in float64 and "
                               "has no truncation)", where, "convert integer values only (sitofp, then fptosi)")
        expr = args[0]()
    elif name == "arith.constant":
        expr = Const(_float_constant(op, where))
    elif name == "arith.cmpf":
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        if pred not in CMPF:
            names = "false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno true".split()
            raise NotSupported(f"arith.cmpf predicate {names[pred] if 0 <= pred < 16 else pred}", where)
        expr = Compare(CMPF[pred], args[0](), args[1]())
    elif name == "arith.select":
        expr = Select(args[0](), args[1](), args[2]())
    elif name in ("math.powf", "math.fpowi"):  # x**n for a small constant n (GELU's tanh form has x**3)
        base, exponent = args[0](), args[1]()
        if not (isinstance(exponent, Const) and exponent.value in (1.0, 2.0, 3.0, 4.0)):
            raise NotSupported(f"{name} with an exponent other than a constant 1, 2, 3 or 4", where)
        expr = base
        for _ in range(int(exponent.value) - 1):
            expr = Binary("mul", expr, base)
    else:
        raise NotSupported(f"operation {name} in a linalg body (supported: {SUPPORTED})", where,
                           "write the body with those operations")
    memo[value] = expr
    return expr
