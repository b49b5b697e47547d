"""The paper's 26 benchmark chains: G1-G10 (FFN), S1-S8 (gated FFN), C1-C8 (ResNet conv chains),
and `parse_chain`, which reads a benchmark id or a chain written out.

    >>> len(BENCHMARKS), BENCHMARKS["G5"].dims, BENCHMARKS["C8"].dims
    (26, (128, 16384, 4096, 4096), (49, 512, 4608, 2048))
    >>> parse_chain("gated:128,512,64,64:spatial").strategy
    'spatial'
"""
from __future__ import annotations

from fuseflow.errors import UserError

from .chains import KINDS, Chain, conv_chain

_G = [  # id, m, n, k, l, model (Table VII)
    ("G1", 128, 512, 32, 256, "DLRM-0"), ("G2", 128, 256, 512, 64, "DLRM-1"),
    ("G3", 128, 512, 416, 256, "DLRM-2"), ("G4", 128, 3072, 768, 768, "GPT-2-Small"),
    ("G5", 128, 16384, 4096, 4096, "GPT-6.7B"), ("G6", 128, 4096, 1024, 1024, "GPT2-medium"),
    ("G7", 128, 768, 768, 768, "nlp_gpt3_base"), ("G8", 128, 8192, 2048, 2048, "OPT-1.3B"),
    ("G9", 128, 2048, 512, 512, "Performer"), ("G10", 128, 1536, 384, 384, "BERT"),
]
_S = [  # Table VI
    ("S1", 128, 8192, 3072, 3072, "llama-3.2-3B"), ("S2", 128, 5632, 2048, 2048, "llama-1.1B"),
    ("S3", 128, 11008, 4096, 4096, "Llama-2-7b"), ("S4", 128, 8192, 2048, 2048, "Qwen2.5-2.1B"),
    ("S5", 128, 11008, 2048, 2048, "Qwen2.5-3B"), ("S6", 128, 8960, 1536, 1536, "Qwen2.5-1.5B"),
    ("S7", 128, 9728, 2560, 2560, "Qwen3-4B"), ("S8", 128, 3072, 1024, 1024, "Qwen3-0.6B"),
]
_C = [  # Table V: IC, H=W, OC1, OC2, k1 (k2 = 1); batch 1 (the paper does not state it)
    ("C1", 64, 56, 256, 64, 1), ("C2", 128, 28, 512, 128, 1), ("C3", 256, 14, 1024, 256, 1),
    ("C4", 512, 7, 2048, 512, 1), ("C5", 64, 56, 64, 256, 3), ("C6", 128, 28, 128, 512, 3),
    ("C7", 256, 14, 256, 1024, 3), ("C8", 512, 7, 512, 2048, 3),
]

BENCHMARKS: dict[str, Chain] = {}
for _id, _m, _n, _k, _l, _model in _G:
    BENCHMARKS[_id] = Chain(_id, "ffn", _m, _n, _k, _l, act="relu", note=_model)
for _id, _m, _n, _k, _l, _model in _S:
    BENCHMARKS[_id] = Chain(_id, "gated", _m, _n, _k, _l, act="silu", note=_model)
for _id, _ic, _hw, _oc1, _oc2, _k1 in _C:
    BENCHMARKS[_id] = conv_chain(_id, _ic, _hw, _oc1, _oc2, _k1, note=f"ResNet {_k1}x{_k1}")

GPT67B_EXAMPLE = Chain("GPT-6.7B (M=256)", "ffn", 256, 16384, 4096, 4096)  # the paper's Table III example


def parse_chain(text: str) -> Chain:
    """Parse ``ffn:M,N,K,L[:act]``, ``gated:M,N,K,L[:strategy]`` or
    ``conv:IC,HW,OC1,OC2,k1[,batch]``; a benchmark id (G5, S1, C3) is looked up first."""
    key = text.strip()
    if key.upper() in BENCHMARKS:
        return BENCHMARKS[key.upper()]
    kind, sep, rest = key.partition(":")
    where = f"--chain {text!r}"
    if not sep or kind not in KINDS:
        raise UserError("expected a benchmark id (G1-G10, S1-S8, C1-C8) or KIND:EXTENTS", where,
                        "e.g. G5, ffn:128,512,64,64:gelu, gated:128,512,64,64:spatial, conv:64,56,256,64,1")
    parts = rest.split(":")
    try:
        nums = [int(v) for v in parts[0].split(",")]
    except ValueError:
        raise UserError(f"extents {parts[0]!r} are not comma-separated integers", where) from None
    option = parts[1] if len(parts) > 1 else None
    if len(parts) > 2:
        raise UserError("too many ':' fields", where)
    if kind == "conv":
        if len(nums) not in (5, 6) or option:
            raise UserError("conv takes IC,HW,OC1,OC2,k1[,batch]", where)
        return conv_chain(key, *nums)
    if len(nums) != 4:
        raise UserError(f"{kind} takes 4 extents M,N,K,L, got {len(nums)}", where)
    if kind == "ffn":
        return Chain(key, "ffn", *nums, act=option or "relu")
    return Chain(key, "gated", *nums, act="silu", strategy=option or "auto")
