// Arguments named from %arg1 and declared out of order (%arg2, %arg0, %arg1), as MLIR test files
// often are: inputs are known by these names, whatever their position.
func.func @args_out_of_order(%arg2: tensor<6x4xf32>, %arg0: tensor<4x3xf32>, %arg1: tensor<3xf32>) -> tensor<6x3xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x3xf32>) -> tensor<6x3xf32>
  %p = linalg.matmul ins(%arg2, %arg0 : tensor<6x4xf32>, tensor<4x3xf32>) outs(%f : tensor<6x3xf32>) -> tensor<6x3xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%p, %arg1 : tensor<6x3xf32>, tensor<3xf32>) outs(%e : tensor<6x3xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}
