"""Older MLIR spellings rewritten to today's before parsing, so dumps of older torch-mlir and
sparse-compiler versions import: the sparse encoding's `lvlTypes`/`dimLevelType` with
`dimToLvl`/`dimOrdering`, `linalg.init_tensor`, `tensor.expand_shape` without `output_shape`,
`linalg.elemwise_unary/binary`, and `arith.maxf`/`arith.minf`. Today's text passes unchanged;
lines stay where they were (locations keep pointing at the source).

    >>> print(modernize('#CSC = #sparse_tensor.encoding<{ lvlTypes = [ "dense", "compressed" ], '
    ...                 'dimToLvl = affine_map<(i, j) -> (j, i)> }>'))
    #CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
    >>> modernize("%e = linalg.init_tensor [%n, 4] : tensor<?x4xf32>")
    '%e = tensor.empty(%n) : tensor<?x4xf32>'
"""
from __future__ import annotations

import re

LEVEL_TYPES = {"dense": "dense", "compressed": "compressed", "compressed-nu": "compressed(nonunique)",
               "compressed-no": "compressed(nonordered)", "compressed-nu-no": "compressed(nonunique, nonordered)",
               "singleton": "singleton", "singleton-nu": "singleton(nonunique)",
               "singleton-no": "singleton(nonordered)", "singleton-nu-no": "singleton(nonunique, nonordered)"}
BINARY_FNS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max_signed": "max", "min_signed": "min",
              "powf": "powf"}
UNARY_FNS = ("exp", "log", "abs", "ceil", "floor", "negf", "reciprocal", "round", "sqrt", "rsqrt", "square",
             "tanh", "erf")
WIDTHS = {"pointerBitWidth": "posWidth", "indexBitWidth": "crdWidth"}


def modernize(text: str) -> str:
    """`text` with the older forms above in today's syntax."""
    text = re.sub(r"#sparse_tensor\.encoding<\{(.*?)\}>", _encoding, text, flags=re.S)
    text = re.sub(r"linalg\.init_tensor\s*\[([^\]]*)\]", _init_tensor, text)
    text = re.sub(r"(tensor\.expand_shape\s+%[\w.$\-]+\s*(\[\[[\d,\s\[\]]*\]\]))(\s*:\s*tensor<[^>]*>\s*into\s*"
                  r"tensor<([^>]*)>)", _expand_shape, text)
    text = re.sub(r"linalg\.elemwise_(unary|binary)(\s*\{[^{}]*\})?", _elemwise, text)
    return re.sub(r"\barith\.(max|min)f\b", lambda m: f"arith.{m.group(1)}imumf", text)


def _encoding(match: re.Match) -> str:
    body = match.group(1)
    types = re.search(r"\b(?:lvlTypes|dimLevelType)\s*=\s*\[([^\]]*)\]", body)
    if types is None:
        return match.group(0)  # today's `map = ...` form
    levels = [LEVEL_TYPES.get(t, t) for t in re.findall(r'"([^"]*)"', types.group(1))]
    ordering = re.search(r"\b(?:dimToLvl|dimOrdering)\s*=\s*affine_map<\(([^)]*)\)\s*->\s*\(([^)]*)\)>", body)
    if ordering is not None:
        dims = ordering.group(1)
        results = [r.strip() for r in ordering.group(2).split(",")]
    else:
        dims = ", ".join(f"d{k}" for k in range(len(levels)))
        results = [f"d{k}" for k in range(len(levels))]
    if len(results) != len(levels):
        return match.group(0)  # let the parser say what is wrong
    items = [f"map = ({dims}) -> ({', '.join(f'{r} : {t}' for r, t in zip(results, levels))})"]
    for old, new in (*WIDTHS.items(), ("posWidth", "posWidth"), ("crdWidth", "crdWidth")):
        width = re.search(rf"\b{old}\s*=\s*(\d+)", body)
        if width:
            items.append(f"{new} = {width.group(1)}")
    return "#sparse_tensor.encoding<{ " + ", ".join(items) + " }>"


def _init_tensor(match: re.Match) -> str:
    sizes = [s.strip() for s in match.group(1).split(",") if s.strip()]
    return f"tensor.empty({', '.join(s for s in sizes if s.startswith('%'))})"


def _expand_shape(match: re.Match) -> str:
    if "output_shape" in match.group(0):
        return match.group(0)
    dims = match.group(4).split(",")[0].split("x")[:-1]  # `2x3x4xf32, #enc` -> 2, 3, 4
    if not dims or not all(d.isdigit() for d in dims):
        return match.group(0)  # dynamic sizes: the parser asks for them
    return f"{match.group(1)} output_shape [{', '.join(dims)}]{match.group(3)}"


def _elemwise(match: re.Match) -> str:
    attrs = match.group(2) or ""
    fun = re.search(r"fun\s*=\s*#linalg\.(?:unary|binary)_fn<(\w+)>", attrs)
    if match.group(1) == "binary":
        name = BINARY_FNS.get(fun.group(1) if fun else "add")
    else:
        name = fun.group(1) if fun else "exp"
        name = name if name in UNARY_FNS else None
    if name is None:
        return match.group(0)  # a function without a named op: the parser names it
    return f"linalg.{name}"
