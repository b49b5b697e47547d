"""Simulators of SAM graphs: the per-token oracle (`oracle`), tokens, storage and hardware model."""
from .hw import HwConfig
from .oracle import GraphRun, MisalignedStreams, run_graph
from .storage import Level, StoredTensor, WrittenTensor
from .tokens import Done, Empty, Repeat, Stop, Val, format_tokens, parse_tokens

__all__ = ["HwConfig", "GraphRun", "MisalignedStreams", "run_graph", "Level", "StoredTensor",
           "WrittenTensor", "Done", "Empty", "Repeat", "Stop", "Val", "format_tokens", "parse_tokens"]
