// Reshapes: F = collapse(X : 2x6 -> 12) is a real reshape; G = F + b; then G gets a unit dim
// (expand 12 -> 1x12) and loses it again (collapse 1x12 -> 12); finally R = expand(H : 12 -> 3x4).
#id = affine_map<(d0) -> (d0)>

func.func @reshape(%X: tensor<2x6xf32>, %b: tensor<12xf32>) -> (tensor<1x12xf32>, tensor<3x4xf32>) {
  %F = tensor.collapse_shape %X [[0, 1]] : tensor<2x6xf32> into tensor<12xf32>
  %empty = tensor.empty() : tensor<12xf32>
  %G = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%F, %b : tensor<12xf32>, tensor<12xf32>) outs(%empty : tensor<12xf32>) {
  ^bb0(%f: f32, %bi: f32, %out: f32):
    %s = arith.addf %f, %bi : f32
    linalg.yield %s : f32
  } -> tensor<12xf32>
  %U = tensor.expand_shape %G [[0, 1]] output_shape [1, 12] : tensor<12xf32> into tensor<1x12xf32>
  %H = tensor.collapse_shape %U [[0, 1]] : tensor<1x12xf32> into tensor<12xf32>
  %R = tensor.expand_shape %H [[0, 1]] output_shape [3, 4] : tensor<12xf32> into tensor<3x4xf32>
  return %U, %R : tensor<1x12xf32>, tensor<3x4xf32>
}
