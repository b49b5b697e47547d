// Unary and min ops in one element-wise body:
// O = min(tanh(A), -B) + sqrt(|A|) * rsqrt(B * B + 1), with A CSR and B dense.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @unary_ops(%A: tensor<8x5xf32, #CSR>, %B: tensor<8x5xf32>) -> tensor<8x5xf32> {
  %one = arith.constant 1.0 : f32
  %empty = tensor.empty() : tensor<8x5xf32>
  %O = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%A, %B : tensor<8x5xf32, #CSR>, tensor<8x5xf32>) outs(%empty : tensor<8x5xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %t = math.tanh %a : f32
    %nb = arith.negf %b : f32
    %mn = arith.minimumf %t, %nb : f32
    %abs = math.absf %a : f32
    %sq = math.sqrt %abs : f32
    %bb = arith.mulf %b, %b : f32
    %bb1 = arith.addf %bb, %one : f32
    %rs = math.rsqrt %bb1 : f32
    %prod = arith.mulf %sq, %rs : f32
    %sum = arith.addf %mn, %prod : f32
    linalg.yield %sum : f32
  } -> tensor<8x5xf32>
  return %O : tensor<8x5xf32>
}
