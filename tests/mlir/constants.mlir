// Constants: Y = (x * W + bias) * scale where W is an elided dense_resource (becomes an input
// without data), bias a splat dense<0.5> and scale an explicit dense<[...]>; x is CSR.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

func.func @constants(%x: tensor<3x8xf32, #CSR>) -> tensor<3x4xf32> {
  %W = arith.constant dense_resource<__elided__> : tensor<8x4xf32>
  %bias = arith.constant dense<5.000000e-01> : tensor<4xf32>
  %scale = arith.constant dense<[1.0, -2.0, 3.0, 0.25]> : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<3x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<3x4xf32>) -> tensor<3x4xf32>
  %xW = linalg.matmul ins(%x, %W : tensor<3x8xf32, #CSR>, tensor<8x4xf32>)
                      outs(%init : tensor<3x4xf32>) -> tensor<3x4xf32>
  %Y = linalg.generic {indexing_maps = [#id, #col, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xW, %bias, %scale : tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>) outs(%empty : tensor<3x4xf32>) {
  ^bb0(%v: f32, %bj: f32, %sj: f32, %out: f32):
    %a = arith.addf %v, %bj : f32
    %m = arith.mulf %a, %sj : f32
    linalg.yield %m : f32
  } -> tensor<3x4xf32>
  return %Y : tensor<3x4xf32>
}
