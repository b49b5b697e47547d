// SDDMM in two steps: P = A * B (linalg.matmul), then O = S .* P (element-wise mask multiply);
// S is stored DCSR.
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#id = affine_map<(i, j) -> (i, j)>

func.func @sddmm_masked(%S: tensor<40x30xf32, #DCSR>, %A: tensor<40x8xf32>, %B: tensor<8x30xf32>)
    -> tensor<40x30xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<40x30xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<40x30xf32>) -> tensor<40x30xf32>
  %P = linalg.matmul ins(%A, %B : tensor<40x8xf32>, tensor<8x30xf32>)
                     outs(%init : tensor<40x30xf32>) -> tensor<40x30xf32>
  %O = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%S, %P : tensor<40x30xf32, #DCSR>, tensor<40x30xf32>) outs(%empty : tensor<40x30xf32>) {
  ^bb0(%s: f32, %p: f32, %out: f32):
    %m = arith.mulf %s, %p : f32
    linalg.yield %m : f32
  } -> tensor<40x30xf32>
  return %O : tensor<40x30xf32>
}
