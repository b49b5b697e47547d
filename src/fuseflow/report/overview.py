"""One picture of a compiled schedule: its kernels and the tensors that pass between them.

A kernel is a box naming its ops, dataflow order and size (and, after a simulation, its cycles);
a tensor is an ellipse with its shape and storage: inputs grey, intermediates white, outputs
bold. Arrows run from each tensor to the kernels that read it and from each kernel to what it
writes, so the kernels' order and what is materialized between them read at a glance.

    >>> import fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> c = compile_schedule(fuseflow.from_mlir("tests/mlir/matmul_chain.mlir"), "unfused")
    >>> dot = overview_dot(c)
    >>> "k0 -> t_T" in dot and "t_T -> k1" in dot
    True
"""
from __future__ import annotations

import html
import textwrap

from ..sam.draw import _attrs, _q, best_layout, for_column, write_picture


def ops_text(ops: list[str], most: int = 6) -> str:
    """A kernel's ops, shortened when there are many: `t50, t52, t53, …, t98 (40 ops)`."""
    if len(ops) <= most:
        return ", ".join(ops)
    return ", ".join(ops[:most - 2]) + f", …, {ops[-1]} ({len(ops)} ops)"


def kernel_title(kernel) -> str:
    """`kernel 1: t32, t33, …, t48 (10 ops) · order i,j,l,k,n,p,m`."""
    return f"kernel {kernel.index}: {ops_text(kernel.group)} · order {','.join(kernel.order)}"


def _tensor_id(name: str) -> str:
    return "t_" + "".join(c if c.isalnum() else "_" for c in name)


def kernel_io(compiled, kernel) -> tuple[list[str], list[str]]:
    """(tensors the kernel reads, tensors it writes), by the program's names."""
    if kernel.is_reshape:
        op = compiled.program.producer(kernel.group[0])
        return [op.input], [op.output]
    reads = [m.stores(n) for n, m in kernel.graph.tensors.items() if m.role == "input"]
    writes = [n for n, m in kernel.graph.tensors.items() if m.role == "output"]
    return list(dict.fromkeys(reads)), writes


def _kernel_label(kernel, result=None, reads: list[str] = (), wrap: int = 40) -> str:
    ops = "<br/>".join(html.escape(line) for line in textwrap.wrap(ops_text(kernel.group), wrap))
    rows = [f'<tr><td><b>kernel {kernel.index}</b></td></tr>', f'<tr><td><font point-size="9">{ops}</font></td></tr>']
    if reads:  # inputs named in the box (the picture for a column draws no ellipses for them)
        text = "<br/>".join(html.escape(line) for line in textwrap.wrap("reads " + ", ".join(reads), wrap))
        rows.append(f'<tr><td><font point-size="9" color="#555555">{text}</font></td></tr>')
    if kernel.is_reshape:
        rows.append('<tr><td><font point-size="9">reshape (a view, no graph)</font></td></tr>')
    else:
        rows.append(f'<tr><td><font point-size="9">order {html.escape(",".join(kernel.order))} · '
                    f'{len(kernel.graph.nodes)} nodes</font></td></tr>')
    if result is not None:
        rows.append(f'<tr><td><font point-size="9" color="#1f5fbf">{result.cycles:,} cycles</font></td></tr>')
    return '<<table border="0" cellborder="0" cellspacing="0">' + "".join(rows) + "</table>>"


def _tensor_label(compiled, name: str) -> str:
    tensor = compiled.program.tensors.get(name)
    shape = "×".join("?" if d is None else str(d) for d in tensor.shape) if tensor is not None else ""
    fmt = compiled.formats.get(name) or (tensor.format if tensor is not None else None)
    storage = ",".join(str(x) for x in fmt.levels) if fmt is not None and fmt.levels else "scalar"
    return (f'<<b>{html.escape(name)}</b><br/><font point-size="8">{html.escape(shape)} '
            f'{html.escape(storage)}</font>>')


def overview_dot(compiled, results=None, rankdir: str = "LR", prefix: str = "") -> str:
    """Graphviz text of the overview; `results` (a SimResult) adds each kernel's cycles."""
    program = compiled.program
    lines = [f"digraph {_q(program.name)} {{",
             f'  graph [rankdir={rankdir}, nodesep=0.15, ranksep=0.35, fontname="Helvetica", fontsize=12, '
             f'labelloc=t, label={_q(f"{program.name}: {compiled.schedule}")}];',
             '  node [fontname="Helvetica", fontsize=10];', '  edge [color="#555555", arrowsize=0.7];']
    tensors: list[str] = []
    edges = []
    by_kernel = {k.index: k for k in (results.kernels if results is not None else [])}
    for kernel in compiled.kernels:
        reads, writes = kernel_io(compiled, kernel)
        attrs = {"id": f"{prefix}k{kernel.index}", "shape": "box", "style": "rounded,filled",
                 "fillcolor": "#eef3fb" if not kernel.is_reshape else "#f3f3f3", "color": "#4e79a7",
                 "label": _kernel_label(kernel, by_kernel.get(kernel.index)),
                 "tooltip": f"kernel {kernel.index}: {', '.join(kernel.group)}"}
        lines.append(f"  k{kernel.index} [{_attrs(attrs)}];")
        tensors += reads + writes
        edges += [(_tensor_id(t), f"k{kernel.index}") for t in reads]
        edges += [(f"k{kernel.index}", _tensor_id(t)) for t in writes]
    for name in dict.fromkeys(tensors):
        role = "input" if name in program.inputs else "output" if name in program.outputs else "temp"
        attrs = {"id": f"{prefix}{_tensor_id(name)}", "shape": "ellipse", "style": "filled",
                 "fillcolor": {"input": "#e6e6e6", "temp": "white", "output": "#fff2b8"}[role],
                 "penwidth": 2 if role == "output" else 1, "label": _tensor_label(compiled, name),
                 "tooltip": f"{role} {name}"}
        lines.append(f"  {_tensor_id(name)} [{_attrs(attrs)}];")
    lines += [f"  {a} -> {b};" for a, b in dict.fromkeys(edges)]
    lines.append("}")
    return "\n".join(lines)


def column_overview_dot(compiled, results=None) -> str:
    """The overview for a paper's column: top-down, each kernel's inputs named in its box, each
    intermediate tensor the words on the edges from its writer to its readers (name, shape,
    storage), outputs yellow ellipses; narrow and short enough to print 8.5 cm wide."""
    program = compiled.program
    title = "\n".join(textwrap.wrap(f"{program.name}: {compiled.schedule}", 44))
    lines = [f"digraph {_q(program.name)} {{",
             f'  graph [rankdir=TB, nodesep=0.15, ranksep=0.25, fontname="Helvetica", fontsize=10, labelloc=t, '
             f'label={_q(title)}];', '  node [fontname="Helvetica", fontsize=10, margin="0.06,0.02"];',
             '  edge [color="#555555", arrowsize=0.6, fontname="Helvetica", fontsize=9];']
    by_kernel = {k.index: k for k in (results.kernels if results is not None else [])}
    writer: dict[str, str] = {}
    readers: dict[str, list[str]] = {}
    for kernel in compiled.kernels:
        reads, writes = kernel_io(compiled, kernel)
        attrs = {"id": f"k{kernel.index}", "shape": "box", "style": "rounded,filled", "color": "#4e79a7",
                 "fillcolor": "#eef3fb", "label": _kernel_label(kernel, by_kernel.get(kernel.index),
                                                                [t for t in reads if t in program.inputs], 26)}
        lines.append(f"  k{kernel.index} [{_attrs(attrs)}];")
        writer.update({t: f"k{kernel.index}" for t in writes})
        for t in reads:
            readers.setdefault(t, []).append(f"k{kernel.index}")
    for name, source in writer.items():
        tensor = compiled.program.tensors.get(name)
        shape = "×".join("?" if d is None else str(d) for d in tensor.shape) if tensor is not None else ""
        words = f"{name} {shape}"
        targets = readers.get(name, [])
        if name in program.outputs:
            attrs = {"shape": "ellipse", "style": "filled,bold", "label": name, "fillcolor": "#fff2b8"}
            lines.append(f"  {_tensor_id(name)} [{_attrs(attrs)}];")
            targets = targets + [_tensor_id(name)]
        lines += [f"  {source} -> {target} [{_attrs({'label': words})}];" for target in targets]
    lines.append("}")
    return "\n".join(lines)


def overview_svg(compiled, results=None, prefix: str = "") -> str:
    """The overview as SVG, left-to-right or top-down, whichever shows larger on one screen."""
    return best_layout(overview_dot(compiled, results, d, prefix) for d in ("LR", "TB"))[1]


def render_overview(compiled, path: str, results=None, column: bool = False) -> str:
    """Draw the overview to an SVG, PNG or PDF file (`column`: top-down, for a paper's column)."""
    if column:
        return write_picture(for_column(column_overview_dot(compiled, results)), path)
    dot, picture = best_layout(overview_dot(compiled, results, d) for d in ("LR", "TB"))
    return write_picture(dot, path, picture)
