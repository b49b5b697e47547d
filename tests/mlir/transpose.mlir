// Transposes: T = A^T as a linalg.generic reading A through (d0, d1) -> (d1, d0), with A stored
// CSC (map (i, j) -> (j : dense, i : compressed)); and U = B^T via linalg.transpose.
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
#swap = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @transpose(%A: tensor<6x9xf32, #CSC>, %B: tensor<4x7xf32>) -> (tensor<9x6xf32>, tensor<7x4xf32>) {
  %e1 = tensor.empty() : tensor<9x6xf32>
  %T = linalg.generic {indexing_maps = [#swap, #id], iterator_types = ["parallel", "parallel"]}
      ins(%A : tensor<6x9xf32, #CSC>) outs(%e1 : tensor<9x6xf32>) {
  ^bb0(%a: f32, %out: f32):
    linalg.yield %a : f32
  } -> tensor<9x6xf32>
  %e2 = tensor.empty() : tensor<7x4xf32>
  %U = linalg.transpose ins(%B : tensor<4x7xf32>) outs(%e2 : tensor<7x4xf32>) permutation = [1, 0]
  return %T, %U : tensor<9x6xf32>, tensor<7x4xf32>
}
