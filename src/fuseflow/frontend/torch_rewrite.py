"""PyTorch as people write it, rewritten on the FX graph into the forms torch-mlir imports.

`rewrite(module, inputs, names)` traces `module` with torch.fx (PyTorch Geometric layers kept
whole) and rewrites, before torch-mlir sees anything:

* `torch.sparse.mm`, `torch.spmm`, `torch.sparse.addmm` (and `reduce="sum"`) into `A @ X`
  (`beta * M + alpha * (A @ B)`): torch-mlir imports sparse operands of `@`, not these ops;
* a sparse tensor built inside `forward` from its inputs (`torch.sparse_coo_tensor`,
  `torch.sparse_csr_tensor`, `x.to_sparse()`, ...) into a sparse input of its own, computed once
  from the example inputs (its data is kept as the program's constant);
* PyTorch Geometric's `GCNConv` into `Â·X·Wᵀ + b` and `SAGEConv` (sum or mean aggregation) into
  `X·W_rᵀ + (M·X)·W_lᵀ + b_l`, where the sparse adjacency Â (PyG's own `gcn_norm` when the layer
  normalises) or M (divided by in-degrees for the mean) is computed from the layer's
  `edge_index` (a `2 x E` tensor, or a sparse adjacency `adj_t`) and becomes a sparse input.
  Aggregation comes first, as in fuseflow's built-in GCN and GraphSAGE.

Ops with no such form are refused in one line naming the form that works. `rewrite` returns
None when the module needs none of this (it is then exported as it is).

    >>> import torch
    >>> class Net(torch.nn.Module):
    ...     def forward(self, A, X):
    ...         return torch.sparse.mm(A, X)
    >>> r = rewrite(Net(), [torch.eye(3).to_sparse(), torch.ones(3, 2)], ["A", "X"])
    >>> [n.target.__name__ for n in r.module.graph.nodes if n.op == "call_function"]
    ['matmul']
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

from ..errors import NotSupported, UserError

SPARSE_BUILDERS = ("sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_compressed_tensor")
SPARSE_CONVERSIONS = ("to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc")
# torch.sparse functions with no import path, and the form fuseflow takes instead
REFUSED = {
    "softmax": "torch.softmax(S.masked_fill(A == 0, float('-inf')), dim) with S dense (it visits A's entries)",
    "log_softmax": "torch.log_softmax(S.masked_fill(A == 0, float('-inf')), dim)",
    "sum": "a dense sum, S.sum(dim), with S declared sparse by its input's layout",
    "sampled_addmm": "M * (A @ B) with M sparse (an SDDMM)",
    "spsolve": "nothing: fuseflow computes products, not solves",
}
GRAPH_LAYERS = ("GCNConv", "SAGEConv")


@dataclass
class Rewritten:
    """A traced module in importable form, with the example inputs its `forward` now takes
    (`names` in order) and the data of the inputs the rewrite added (`constants`)."""

    module: object
    inputs: list
    names: list[str]
    constants: dict = field(default_factory=dict)


def _is_pyg(module) -> bool:
    return type(module).__module__.startswith("torch_geometric.")


def _tracer():
    import torch.fx  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):  # PyG layers stay whole: they are rewritten as units
            return _is_pyg(m) and hasattr(m, "propagate") or super().is_leaf_module(m, qualname)

    return Tracer()


def rewrite(module, inputs: list, names: list[str]) -> Rewritten | None:
    """The module rewritten (see the module docstring), or None when nothing needs it."""
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it
    import torch.fx  # noqa: PLC0415

    has_pyg = any(_is_pyg(m) and hasattr(m, "propagate") for m in module.modules())
    try:
        graph = _tracer().trace(module)
    except Exception as err:  # noqa: BLE001 - a model torch.fx cannot trace is exported as it is
        if has_pyg:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise NotSupported(f"tracing {type(module).__name__} with torch.fx failed: {first}", "from_torch",
                               "keep forward() free of data-dependent Python control flow") from None
        return None
    traced = torch.fx.GraphModule(module, graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        return None  # *args or defaults the tracer cannot bind: export the module as it is
    state = _State(traced, dict(zip(placeholders, inputs)), dict(zip(placeholders, names)))
    for node in list(graph.nodes):
        state.visit(node)
    if not state.changed:
        return None
    return state.finish()


class _State:
    """One pass over a traced graph: products renamed, sparse builders and graph layers lifted."""

    def __init__(self, traced, values: dict, names: dict):
        self.traced, self.graph = traced, traced.graph
        self.values, self.names = values, names
        self.changed = False
        self.lifted: dict = {}  # key -> (placeholder node, value)
        import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

        # every node's example value, from one eager run before the graph changes
        lifts = any(n.op == "call_module" and _is_pyg(traced.get_submodule(n.target)) or
                    n.op == "call_function" and getattr(n.target, "__name__", "") in SPARSE_BUILDERS or
                    n.op == "call_method" and n.target in SPARSE_CONVERSIONS for n in self.graph.nodes)
        self.evaluated = _evaluate(traced, list(values.values())) if lifts else {}

        self.refused = {getattr(torch.sparse, name): name for name in REFUSED if hasattr(torch.sparse, name)}

    def visit(self, node) -> None:
        import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

        if node.op == "call_function" and node.target in (torch.sparse.mm, torch.spmm, torch.sparse.addmm):
            self._product(node)
        elif node.op == "call_function" and node.target in self.refused:
            name = self.refused[node.target]
            raise NotSupported(f"torch.sparse.{name}", "from_torch", f"write it as {REFUSED[name]}")
        elif node.op == "call_function" and getattr(node.target, "__name__", "") in SPARSE_BUILDERS or \
                node.op == "call_method" and node.target in SPARSE_CONVERSIONS:
            self._lift_builder(node)
        elif node.op == "call_module":
            layer = self.traced.get_submodule(node.target)
            if _is_pyg(layer) and hasattr(layer, "propagate"):
                self._graph_layer(node, layer)

    def _product(self, node) -> None:
        import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

        reduce = node.kwargs.get("reduce", node.args[2] if node.target is torch.sparse.mm and len(node.args) > 2
                                 else "sum")
        if reduce != "sum":
            raise NotSupported(f"torch.sparse.mm(..., reduce={reduce!r})", "from_torch",
                               "reduce='sum' (A @ X); a max or mean aggregation is a masked max or a scaled A")
        if node.target is torch.sparse.addmm:
            node.target, node.kwargs = _addmm, dict(node.kwargs)
        else:
            node.target, node.args, node.kwargs = operator.matmul, tuple(node.args[:2]), {}
        self.changed = True

    def _lift_builder(self, node) -> None:
        value = self._value(node, "a sparse tensor built in forward()")
        self._replace(node, node.name, value)

    def _graph_layer(self, node, layer) -> None:
        kind = type(layer).__name__
        if kind not in GRAPH_LAYERS:
            raise NotSupported(f"PyTorch Geometric layer {kind}", "from_torch",
                               "use GCNConv or SAGEConv, or write the layer with A @ X")
        x, graph_arg = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("edge_index")
        if len(node.args) > 2 or set(node.kwargs) - {"edge_index"}:
            raise NotSupported(f"{kind} called with edge weights or a size", "from_torch",
                               "fold edge weights into a sparse adjacency passed as edge_index")
        if isinstance(x, tuple) or getattr(layer, "project", False) or getattr(layer, "normalize", False) and \
                kind == "SAGEConv" or getattr(layer, "aggr", "sum") not in ("sum", "add", "mean"):
            raise NotSupported(f"{kind} with {_layer_options(layer)}", "from_torch",
                               "fuseflow takes SAGEConv(aggr='sum' or 'mean') without project/normalize "
                               "and one node-feature tensor")
        adjacency, suffix = _adjacency(layer, self._value(graph_arg, f"the edge_index of {kind}"),
                                       self._value(x, f"the node features of {kind}").shape[-2])
        base = self.names.get(graph_arg, graph_arg.name) if graph_arg.op == "placeholder" else graph_arg.name
        adj = self._lifted(f"{base}_{suffix}", adjacency)
        with self.graph.inserting_before(node):
            out = self._linear(self.graph.call_function(operator.matmul, (adj, x)),
                               f"{node.target}.lin" if kind == "GCNConv" else f"{node.target}.lin_l",
                               f"{node.target}.bias" if kind == "GCNConv" else None)
            if kind == "SAGEConv" and layer.root_weight:
                out = self.graph.call_function(operator.add, (self._linear(x, f"{node.target}.lin_r"), out))
        node.replace_all_uses_with(out)
        self.graph.erase_node(node)
        self.changed = True

    def _linear(self, x, lin: str, bias: str | None = None):
        import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

        layer = self.traced.get_submodule(lin)
        weight = self.graph.get_attr(f"{lin}.weight")
        if bias is None and getattr(layer, "bias", None) is not None:
            bias = f"{lin}.bias"
        has_bias = bias is not None and _attr(self.traced, bias) is not None
        args = (x, weight, self.graph.get_attr(bias)) if has_bias else (x, weight)
        return self.graph.call_function(torch.nn.functional.linear, args)

    def _value(self, node, what: str):
        """The example value of `node` (an eager run of the traced module on the example inputs)."""
        if node in self.values:
            return self.values[node]
        if node not in self.evaluated:
            raise UserError(f"cannot compute {what} from the example inputs", "from_torch")
        return self.evaluated[node]

    def _lifted(self, name: str, value):
        if name not in self.lifted:
            placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
            with self.graph.inserting_after(placeholders[-1]):
                self.lifted[name] = (self.graph.placeholder(_fresh(name, self.names.values(), self.lifted)), value)
        return self.lifted[name][0]

    def _replace(self, node, name: str, value) -> None:
        node.replace_all_uses_with(self._lifted(name, value))
        self.graph.erase_node(node)
        self.changed = True

    def finish(self) -> Rewritten:
        """Dead code (what computed the lifted tensors) and unused inputs removed."""
        self.graph.eliminate_dead_code()
        for node in [n for n in self.graph.nodes if n.op == "placeholder" and not n.users]:
            if node in self.names:
                self.graph.erase_node(node)
        self.traced.recompile()
        inputs, names, constants = [], [], {}
        by_node = {node: (name, value) for name, (node, value) in self.lifted.items()}
        for node in (n for n in self.graph.nodes if n.op == "placeholder"):
            if node in self.values:
                inputs.append(self.values[node])
                names.append(self.names[node])
            else:
                inputs.append(by_node[node][1])
                names.append(node.target)
                constants[node.target] = by_node[node][1]
        return Rewritten(self.traced, inputs, names, constants)


def _addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """`torch.sparse.addmm` as `@` and elementwise ops (what torch-mlir imports)."""
    product = mat1 @ mat2 if alpha == 1 else alpha * (mat1 @ mat2)
    if beta == 0:
        return product
    return input + product if beta == 1 else beta * input + product


def _attr(module, dotted: str):
    *path, last = dotted.split(".")
    return getattr(module.get_submodule(".".join(path)), last)


def _fresh(name: str, taken, lifted) -> str:
    out, k = name, 1
    while out in set(taken) | set(lifted):
        out, k = f"{name}_{k}", k + 1
    return out


def _layer_options(layer) -> str:
    return ", ".join(f"{k}={getattr(layer, k)!r}" for k in ("aggr", "project", "normalize") if hasattr(layer, k))


def _evaluate(traced, inputs: list) -> dict:
    """Every node's value in one eager run of `traced` on `inputs`."""
    import torch.fx  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    seen: dict = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            seen[n] = super().run_node(n)
            return seen[n]

    try:
        with torch.no_grad():
            Recorder(traced).run(*inputs)
    except Exception as err:  # noqa: BLE001 - whatever the user's forward raises on its example inputs
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise NotSupported(f"running {type(traced).__name__} on its example inputs (to build its sparse "
                           f"adjacency) failed: {first}", "from_torch",
                           "build sparse tensors only from forward()'s inputs, before other computation") from None
    return seen


def _adjacency(layer, graph, nodes: int):
    """(sparse CSR adjacency the layer aggregates with, its name suffix): rows are targets."""
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    if not isinstance(graph, torch.Tensor):
        raise NotSupported(f"an edge_index of type {type(graph).__name__}", "from_torch",
                           "pass edge_index as a 2 x E tensor or a torch sparse adjacency (adj_t)")
    kind = type(layer).__name__
    if graph.layout == torch.strided:
        if graph.dim() != 2 or graph.shape[0] != 2 or graph.is_floating_point():
            raise UserError(f"edge_index of {kind} has shape {list(graph.shape)}", "from_torch",
                            "give a 2 x E integer tensor (sources, targets) or a sparse adjacency")
        source, target = (graph[0], graph[1]) if layer.flow == "source_to_target" else (graph[1], graph[0])
        adj_t = torch.sparse_coo_tensor(torch.stack([target, source]), torch.ones(graph.shape[1]), (nodes, nodes))
    else:
        adj_t = graph.to_sparse_coo().float()
    if kind == "SAGEConv" and layer.aggr == "mean":  # PyG divides by the count of edges into each node
        index = adj_t.indices() if adj_t.is_coalesced() else adj_t._indices()
        degree = torch.zeros(nodes).index_add_(0, index[0], torch.ones(index.shape[1]))
        adj_t = adj_t.coalesce()
        index, values = adj_t.indices(), adj_t.values()
        mean = torch.sparse_coo_tensor(index, values / degree[index[0]], (nodes, nodes))
        return mean.to_sparse_csr(), "mean"
    adj_t = adj_t.coalesce()
    if kind == "GCNConv" and layer.normalize:
        from torch_geometric.nn.conv.gcn_conv import gcn_norm  # noqa: PLC0415 - optional extra 'pyg'

        index, weight = adj_t.indices(), adj_t.values()
        edge_index, edge_weight = gcn_norm(torch.stack([index[1], index[0]]), weight, nodes, layer.improved,
                                           layer.add_self_loops, "source_to_target", torch.float32)
        adj_t = torch.sparse_coo_tensor(torch.stack([edge_index[1], edge_index[0]]), edge_weight,
                                        (nodes, nodes)).coalesce()
        return adj_t.to_sparse_csr(), "gcn"
    return adj_t.to_sparse_csr(), "adj"
