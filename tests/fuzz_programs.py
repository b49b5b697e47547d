"""Random programs for the fuzzer: chains of 1-5 ops over small matrices (sizes 1-12, unit
dimensions often), written as MLIR text, each with its own numpy evaluation (independent of
`fuseflow.reference`).

Ops: contractions (`linalg.matmul`, and generics contracting a transposed operand), elementwise
add/sub/mul/max of two matrices, ReLU, exp, a matrix with a column `(d0, 0)` or a row `(0, d1)`
broadcast into it, transposes, row and column sum/max reductions kept as `mx1` / `1xn` tensors,
and row softmax. Inputs are dense, CSR, CSC or
DCSR. A generator draws from a `Chooser`, so hypothesis (`HypothesisChooser`) and a plain random
generator (`RandomChooser`, for long runs) build the same programs.

    >>> p = random_program(RandomChooser(3))
    >>> text = p.mlir()
    >>> text.count("func.func"), len(p.inputs) >= 1
    (1, True)
    >>> sorted(p.evaluate(p.data(0))) == p.output_names()
    True
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

ENCODINGS = {
    "dense": "",
    "csr": "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>",
    "csc": "#sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>",
    "dcsr": "#sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>",
}
KINDS = ("matmul", "contract", "add", "sub", "mul", "max", "relu", "exp", "broadcast", "transpose", "reduce", "softmax")
MAPS = {"id": "(d0, d1) -> (d0, d1)", "col": "(d0, d1) -> (d0, 0)", "row": "(d0, d1) -> (0, d1)",
        "t": "(d0, d1) -> (d1, d0)", "ik": "(d0, d1, d2) -> (d0, d2)", "ki": "(d0, d1, d2) -> (d2, d0)",
        "kj": "(d0, d1, d2) -> (d2, d1)", "jk": "(d0, d1, d2) -> (d1, d2)", "ij": "(d0, d1, d2) -> (d0, d1)"}
BINARY = {"add": ("arith.addf", np.add), "sub": ("arith.subf", np.subtract), "mul": ("arith.mulf", np.multiply),
          "max": ("arith.maximumf", np.maximum)}


class Chooser:
    """Where a generator's decisions come from."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, options):
        return options[self.integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        return self.integer(1, 100) <= percent


class RandomChooser(Chooser):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisChooser(Chooser):
    """Decisions drawn from hypothesis's `data` (so failures shrink)."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


@dataclass
class Value:
    """A matrix of the program: a function argument or an op's result."""

    name: str
    shape: tuple[int, int]
    fmt: str = "dense"  # storage of an argument

    @property
    def type(self) -> str:
        enc = "" if self.fmt == "dense" else f", #{self.fmt.upper()}"
        return f"tensor<{self.shape[0]}x{self.shape[1]}xf32{enc}>"


@dataclass
class Step:
    """One op: `kind` over `args` giving `out`; `how` is the binary op, the reduction's kind and
    axis, or the broadcast's map."""

    kind: str
    args: tuple[Value, ...]
    out: Value
    how: tuple = ()


@dataclass
class RandomProgram:
    inputs: list[Value] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    densities: dict[str, float] = field(default_factory=dict)

    def output_names(self) -> list[str]:
        return sorted(v.name for v in self.outputs)

    def describe(self) -> str:
        ins = ", ".join(f"{v.name}:{v.shape[0]}x{v.shape[1]}:{v.fmt}" for v in self.inputs)
        ops = "; ".join(f"{s.out.name}={s.kind}{list(s.how)}({','.join(a.name for a in s.args)})"
                        for s in self.steps)
        return f"[{ins}] {ops} -> {','.join(v.name for v in self.outputs)}"

    # -- data and the numpy evaluation ------------------------------------------------------------
    def data(self, seed: int) -> dict[str, np.ndarray]:
        """Inputs of halves in [-2, 2] (sums are exact), zero where a sparse input stores nothing."""
        rng = np.random.default_rng(seed)
        data = {}
        for v in self.inputs:
            values = rng.integers(-4, 5, size=v.shape) / 2.0
            keep = rng.random(v.shape) < self.densities.get(v.name, 1.0)
            data[v.name] = np.where(keep, values, 0.0)
        return data

    def evaluate(self, data: dict) -> dict[str, np.ndarray]:
        env = {k: np.asarray(a, dtype=np.float64) for k, a in data.items()}
        with np.errstate(over="ignore"):  # exp of exp may overflow to inf, in fuseflow alike
            for step in self.steps:
                env[step.out.name] = _numpy_step(step, [env[a.name] for a in step.args])
        return {v.name: env[v.name] for v in self.outputs}

    # -- MLIR ---------------------------------------------------------------------------------------
    def mlir(self) -> str:
        lines = [f"#{name.upper()} = {enc}" for name, enc in ENCODINGS.items()
                 if enc and any(v.fmt == name for v in self.inputs)]
        args = ", ".join(f"%{v.name}: {v.type}" for v in self.inputs)
        results = ", ".join(v.type for v in self.outputs)
        lines.append(f"func.func @fuzz({args}) -> ({results}) {{")
        lines.append("  %zero = arith.constant 0.0 : f32")
        lines.append("  %ninf = arith.constant 0xFF800000 : f32")
        for step in self.steps:
            lines += ["  " + line for line in _mlir_step(step)]
        lines.append(f"  return {', '.join('%' + v.name for v in self.outputs)} : {results}")
        lines.append("}")
        return "\n".join(lines)


def _numpy_step(step: Step, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    if step.kind == "matmul":
        return x @ args[1]
    if step.kind == "contract":  # how: the maps of x and w, (d0, d1, d2) = (i, j, k)
        return (x.T if step.how[0] == "ki" else x) @ (args[1].T if step.how[1] == "jk" else args[1])
    if step.kind in BINARY:
        return BINARY[step.kind][1](x, args[1])
    if step.kind == "broadcast":
        return BINARY[step.how[0]][1](x, args[1])  # numpy broadcasts the mx1 or 1xn operand
    if step.kind == "relu":
        return np.maximum(x, 0.0)
    if step.kind == "exp":
        return np.exp(x)
    if step.kind == "transpose":
        return x.T.copy()
    if step.kind == "reduce":
        kind, axis = step.how
        return (np.sum if kind == "sum" else np.max)(x, axis=axis, keepdims=True)
    if step.kind == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    raise AssertionError(step.kind)


def _tensor(shape) -> str:
    return f"tensor<{shape[0]}x{shape[1]}xf32>"


def _generic(out: str, ins: list[tuple[str, str, str]], shape, out_map: str, iterators: str, body: list[str],
             init: str | None = None) -> list[str]:
    """A linalg.generic `out` over `ins` (name, type, map key) writing a `shape` tensor through
    `out_map`; its body's block arguments are %x0, %x1, ... and %acc; `init` fills it first."""
    t = _tensor(shape)
    lines = [f"%{out}_e = tensor.empty() : {t}"]
    dest = f"%{out}_e"
    if init is not None:
        lines.append(f"%{out}_i = linalg.fill ins(%{init} : f32) outs(%{out}_e : {t}) -> {t}")
        dest = f"%{out}_i"
    maps = ", ".join(f"affine_map<{MAPS[m]}>" for _, _, m in ins) + f", affine_map<{MAPS[out_map]}>"
    block = ", ".join(f"%x{k}: f32" for k in range(len(ins))) + ", %acc: f32"
    lines.append(f"%{out} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iterators}]}}")
    lines.append(f"    ins({', '.join('%' + n for n, _, _ in ins)} : {', '.join(t for _, t, _ in ins)}) "
                 f"outs({dest} : {t}) {{")
    lines.append(f"^bb0({block}):")
    lines += ["  " + b for b in body]
    lines.append(f"}} -> {t}")
    return lines


PARALLEL = '"parallel", "parallel"'


def _mlir_step(step: Step) -> list[str]:
    out, args = step.out, step.args
    ins = [(a.name, a.type, "id") for a in args]
    if step.kind == "matmul":
        t = _tensor(out.shape)
        return [f"%{out.name}_e = tensor.empty() : {t}",
                f"%{out.name}_i = linalg.fill ins(%zero : f32) outs(%{out.name}_e : {t}) -> {t}",
                f"%{out.name} = linalg.matmul ins(%{args[0].name}, %{args[1].name} : {args[0].type}, {args[1].type}) "
                f"outs(%{out.name}_i : {t}) -> {t}"]
    if step.kind == "contract":
        ins = [(args[0].name, args[0].type, step.how[0]), (args[1].name, args[1].type, step.how[1])]
        return _generic(out.name, ins, out.shape, "ij", '"parallel", "parallel", "reduction"',
                        ["%p = arith.mulf %x0, %x1 : f32", "%r = arith.addf %p, %acc : f32", "linalg.yield %r : f32"],
                        "zero")
    if step.kind == "transpose":
        t = _tensor(out.shape)
        return [f"%{out.name}_e = tensor.empty() : {t}",
                f"%{out.name} = linalg.transpose ins(%{args[0].name} : {args[0].type}) outs(%{out.name}_e : {t}) "
                "permutation = [1, 0]"]
    if step.kind in BINARY or step.kind == "broadcast":
        op = BINARY[step.kind if step.kind in BINARY else step.how[0]][0]
        if step.kind == "broadcast":
            ins[1] = (args[1].name, args[1].type, step.how[1])
        return _generic(out.name, ins, out.shape, "id", PARALLEL,
                        [f"%r = {op} %x0, %x1 : f32", "linalg.yield %r : f32"])
    if step.kind == "relu":
        return _generic(out.name, ins, out.shape, "id", PARALLEL,
                        ["%p = arith.cmpf ugt, %x0, %zero : f32", "%r = arith.select %p, %x0, %zero : f32",
                         "linalg.yield %r : f32"])
    if step.kind == "exp":
        return _generic(out.name, ins, out.shape, "id", PARALLEL, ["%r = math.exp %x0 : f32", "linalg.yield %r : f32"])
    if step.kind == "reduce":
        return _reduction(out.name, args[0], *step.how)
    if step.kind == "softmax":
        return _softmax(out.name, args[0])
    raise AssertionError(step.kind)


def _reduction(out: str, x: Value, kind: str, axis: int) -> list[str]:
    """`kind` over `axis` of x, kept as an mx1 (axis 1) or 1xn (axis 0) tensor."""
    shape = (x.shape[0], 1) if axis == 1 else (1, x.shape[1])
    iterators = '"parallel", "reduction"' if axis == 1 else '"reduction", "parallel"'
    op = "arith.addf" if kind == "sum" else "arith.maximumf"
    return _generic(out, [(x.name, x.type, "id")], shape, "col" if axis == 1 else "row", iterators,
                    [f"%r = {op} %x0, %acc : f32", "linalg.yield %r : f32"], "zero" if kind == "sum" else "ninf")


def _softmax(out: str, x: Value) -> list[str]:
    """Row softmax as torch-mlir writes it: row max, subtract, exp, row sum, divide."""
    m, e, s = f"{out}_max", f"{out}_exp", f"{out}_sum"
    col = (x.shape[0], 1)
    lines = _reduction(m, x, "max", 1)
    lines += _generic(e, [(x.name, x.type, "id"), (m, _tensor(col), "col")], x.shape, "id", PARALLEL,
                      ["%d = arith.subf %x0, %x1 : f32", "%r = math.exp %d : f32", "linalg.yield %r : f32"])
    lines += _reduction(s, Value(e, x.shape), "sum", 1)
    lines += _generic(out, [(e, _tensor(x.shape), "id"), (s, _tensor(col), "col")], x.shape, "id", PARALLEL,
                      ["%r = arith.divf %x0, %x1 : f32", "linalg.yield %r : f32"])
    return lines


# -- the generator ------------------------------------------------------------------------------------
def _size(c: Chooser) -> int:
    return 1 if c.chance(30) else c.integer(2, 12)


class _Builder:
    def __init__(self, c: Chooser):
        self.c = c
        self.p = RandomProgram()
        self.values: list[Value] = []

    def input(self, shape) -> Value:
        v = Value(f"a{len(self.p.inputs)}", tuple(shape), self.c.choice(("dense", "csr", "csc", "dcsr")))
        self.p.inputs.append(v)
        self.p.densities[v.name] = 1.0 if v.fmt == "dense" and self.c.chance(70) else \
            self.c.choice((0.0, 0.2, 0.5, 0.5, 0.8))
        self.values.append(v)
        return v

    def operand(self, shape) -> Value:
        """An existing value of `shape` (half of the time, if there is one), else a new input."""
        same = [v for v in self.values if v.shape == tuple(shape)]
        return self.c.choice(same) if same and self.c.chance(50) else self.input(shape)

    def step(self, kind: str, args: tuple, shape, how: tuple = ()) -> Value:
        out = Value(f"t{len(self.p.steps)}", tuple(shape))
        self.p.steps.append(Step(kind, args, out, how))
        self.values.append(out)
        return out

    def op(self, x: Value) -> Value:
        c, (m, n) = self.c, x.shape
        kind = c.choice(KINDS)
        if kind == "matmul":
            return self._matmul(x)
        if kind == "contract":
            return self._contract(x)
        if kind in BINARY:
            return self.step(kind, (x, self.operand((m, n))), (m, n))
        if kind == "broadcast":
            axis = c.choice(("col", "row"))
            v = self.operand((m, 1) if axis == "col" else (1, n))
            return self.step(kind, (x, v), (m, n), (c.choice(tuple(BINARY)), axis))
        if kind == "transpose":
            return self.step(kind, (x,), (n, m))
        if kind == "reduce":
            axis = c.integer(0, 1)
            return self.step(kind, (x,), (m, 1) if axis == 1 else (1, n), (c.choice(("sum", "max")), axis))
        return self.step(kind, (x,), (m, n))

    def _contract(self, x: Value) -> Value:
        """x·W, x·Wᵀ or xᵀ·W as a linalg.generic."""
        c = self.c
        x_map = c.choice(("ik", "ki"))
        k = x.shape[1] if x_map == "ik" else x.shape[0]
        rows = x.shape[0] if x_map == "ik" else x.shape[1]
        w_map, p = c.choice(("kj", "jk")), _size(c)
        w = self.operand((k, p) if w_map == "kj" else (p, k))
        return self.step("contract", (x, w), (rows, p), (x_map, w_map))

    def _matmul(self, x: Value) -> Value:
        w = self.operand((x.shape[1], _size(self.c)))
        return self.step("matmul", (x, w), (x.shape[0], w.shape[1]))


def random_program(c: Chooser, max_ops: int = 5) -> RandomProgram:
    """A chain of 1-`max_ops` ops, each on the previous result (or, a quarter of the time, an
    earlier value); the last result is returned, and sometimes an earlier one too."""
    b = _Builder(c)
    x = b.input((_size(c), _size(c)))
    for _ in range(c.integer(1, max_ops)):
        computed = [v for v in b.values if v not in b.p.inputs]
        if computed and c.chance(25):
            x = c.choice(computed)
        x = b.op(x)
    b.p.outputs = [x]
    earlier = [s.out for s in b.p.steps if s.out is not x]
    if earlier and c.chance(20):
        b.p.outputs.append(c.choice(earlier))
    return b.p
