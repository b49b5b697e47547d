// Reductions into an unfilled tensor.empty() and an op reading one, as the field writes them: the
// reference compiler reads them as zeros (a sparse-encoded one is zeros by MLIR's semantics).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(i, j) -> (i, j)>
func.func @empty_init(%A: tensor<8x6xf32, #CSR>, %X: tensor<6x5xf32>) -> (tensor<8x5xf32>, tensor<8x5xf32, #CSR>) {
  %e = tensor.empty() : tensor<8x5xf32>
  %Y = linalg.matmul ins(%A, %X : tensor<8x6xf32, #CSR>, tensor<6x5xf32>) outs(%e : tensor<8x5xf32>) -> tensor<8x5xf32>
  %es = tensor.empty() : tensor<8x5xf32, #CSR>
  %S = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%Y : tensor<8x5xf32>) outs(%es : tensor<8x5xf32, #CSR>) {
  ^bb0(%y: f32, %o: f32):
    %s = arith.addf %o, %y : f32
    linalg.yield %s : f32
  } -> tensor<8x5xf32, #CSR>
  return %Y, %S : tensor<8x5xf32>, tensor<8x5xf32, #CSR>
}
