"""Draw docs/gcn_layer_fused.svg: one GCN layer, ReLU((A·X)·Wᵀ + b), fused into one dataflow graph."""
import torch, warnings
warnings.filterwarnings("ignore")
import fuseflow
from fuseflow.fusion.compile import compile_schedule
from fuseflow.sam.draw import render
class GCNLayer(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(8, 4)
    def forward(self, A, X):
        return torch.relu(self.lin(A @ X))
A = (torch.rand(12, 12) < 0.3).float()
p = fuseflow.from_torch(GCNLayer(), A.to_sparse_csr(), torch.randn(12, 8), formats={"A": "compressed,compressed"})
c = compile_schedule(p, "full layout=induced order=i,l,k,j")
print(c.kernels[0].table.dump())
render(c.kernels[0].graph, "docs/gcn_layer_fused.svg")

