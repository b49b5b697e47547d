"""GCN and GraphSAGE written with PyTorch Geometric layers (`pip install .[pyg]`)."""
from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import GCNConv, SAGEConv


class PygGCN(nn.Module):
    """softmax(Â · ReLU(Â · X · W1ᵀ + b1) · W2ᵀ + b2); `normalize=False` keeps Â the given
    adjacency (fuseflow's built-in GCN), True is PyG's D^-1/2 (A + I) D^-1/2."""

    def __init__(self, features: int = 34, hidden: int = 16, classes: int = 2, normalize: bool = False):
        super().__init__()
        self.conv1 = GCNConv(features, hidden, normalize=normalize)
        self.conv2 = GCNConv(hidden, classes, normalize=normalize)

    def forward(self, x, edge_index):
        h = torch.relu(self.conv1(x, edge_index))
        return torch.softmax(self.conv2(h, edge_index), dim=1)


class PygSAGE(nn.Module):
    """Two SAGEConv layers with ReLU (sum aggregation: fuseflow's built-in GraphSAGE; or mean)."""

    def __init__(self, features: int = 34, hidden: int = 16, classes: int = 2, aggr: str = "sum"):
        super().__init__()
        self.layer1 = SAGEConv(features, hidden, aggr=aggr)
        self.layer2 = SAGEConv(hidden, classes, aggr=aggr)

    def forward(self, x, edge_index):
        h = torch.relu(self.layer1(x, edge_index))
        return torch.relu(self.layer2(h, edge_index))
