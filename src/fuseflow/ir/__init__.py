"""The tensor-program IR: formats, expressions, programs, verifier, reference evaluator."""
from .expr import Binary, Compare, Const, Expr, In, Select, Unary
from .formats import COMPRESSED, DENSE, LevelFormat, TensorFormat
from .program import Access, IndexOp, Program, ReshapeOp, Tensor
from .reference import reference
from .verify import infer_shapes, verify

__all__ = ["Access", "Binary", "COMPRESSED", "Compare", "Const", "DENSE", "Expr", "In", "IndexOp",
           "LevelFormat", "Program", "ReshapeOp", "Select", "Tensor", "TensorFormat", "Unary",
           "infer_shapes", "reference", "verify"]
