// Row softmax of a CSR matrix: m(i) = max_j X(i,j) (init -inf), E = exp(X - m broadcast),
// s(i) = sum_j E(i,j), O = E / s. The row max is kept as a 16x1 tensor via tensor.expand_shape
// and broadcast with a (d0, d1) -> (d0, 0) map; the row sum is broadcast with (d0, d1) -> (d0).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col0 = affine_map<(i, j) -> (i, 0)>

func.func @softmax(%X: tensor<16x12xf32, #CSR>) -> tensor<16x12xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16xf32>
  %minit = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%X : tensor<16x12xf32, #CSR>) outs(%minit : tensor<16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    linalg.yield %mx : f32
  } -> tensor<16xf32>
  %m2 = tensor.expand_shape %m [[0, 1]] output_shape [16, 1] : tensor<16xf32> into tensor<16x1xf32>
  %e2 = tensor.empty() : tensor<16x12xf32>
  %E = linalg.generic {indexing_maps = [#id, #col0, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X, %m2 : tensor<16x12xf32, #CSR>, tensor<16x1xf32>) outs(%e2 : tensor<16x12xf32>) {
  ^bb0(%x: f32, %mi: f32, %out: f32):
    %d = arith.subf %x, %mi : f32
    %ex = math.exp %d : f32
    linalg.yield %ex : f32
  } -> tensor<16x12xf32>
  %sinit = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%E : tensor<16x12xf32>) outs(%sinit : tensor<16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %a = arith.addf %x, %acc : f32
    linalg.yield %a : f32
  } -> tensor<16xf32>
  %O = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%E, %s : tensor<16x12xf32>, tensor<16xf32>) outs(%e2 : tensor<16x12xf32>) {
  ^bb0(%x: f32, %si: f32, %out: f32):
    %q = arith.divf %x, %si : f32
    linalg.yield %q : f32
  } -> tensor<16x12xf32>
  return %O : tensor<16x12xf32>
}
