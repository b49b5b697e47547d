// Exact GELU of a sparse (DCSR) matrix, element-wise: O = 0.5 * x * (1 + erf(x / sqrt(2))).
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @gelu(%X: tensor<12x10xf32, #DCSR>) -> tensor<12x10xf32> {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %rsqrt2 = arith.constant 0.707106769 : f32
  %empty = tensor.empty() : tensor<12x10xf32>
  %O = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X : tensor<12x10xf32, #DCSR>) outs(%empty : tensor<12x10xf32>) {
  ^bb0(%x: f32, %out: f32):
    %s = arith.mulf %x, %rsqrt2 : f32
    %e = math.erf %s : f32
    %p = arith.addf %e, %one : f32
    %h = arith.mulf %x, %half : f32
    %g = arith.mulf %h, %p : f32
    linalg.yield %g : f32
  } -> tensor<12x10xf32>
  return %O : tensor<12x10xf32>
}
