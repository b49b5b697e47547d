// SpMM Y = A * X in loop order i,k,j: A stored CSR, row-major (i : dense, k : compressed),
// written as a linalg.generic whose iteration dims are (d0 = i, d1 = k, d2 = j).
#CSR = #sparse_tensor.encoding<{ map = (i, k) -> (i : dense, k : compressed) }>

#mapA = affine_map<(i, k, j) -> (i, k)>
#mapX = affine_map<(i, k, j) -> (k, j)>
#mapY = affine_map<(i, k, j) -> (i, j)>

func.func @spmm_ikj(%A: tensor<32x24xf32, #CSR>, %X: tensor<24x16xf32>) -> tensor<32x16xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<32x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<32x16xf32>) -> tensor<32x16xf32>
  %Y = linalg.generic {indexing_maps = [#mapA, #mapX, #mapY],
                       iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%A, %X : tensor<32x24xf32, #CSR>, tensor<24x16xf32>) outs(%init : tensor<32x16xf32>) {
  ^bb0(%a: f32, %x: f32, %acc: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x16xf32>
  return %Y : tensor<32x16xf32>
}
