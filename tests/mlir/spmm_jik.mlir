// SpMM Y = A * X in loop order j,k,i: A stored CSC (column-major, map (i,k) -> (k : dense, i : compressed)),
// written as a linalg.generic whose iteration dims are (d0 = j, d1 = k, d2 = i).
#CSC = #sparse_tensor.encoding<{ map = (i, k) -> (k : dense, i : compressed) }>

#mapA = affine_map<(j, k, i) -> (i, k)>
#mapX = affine_map<(j, k, i) -> (k, j)>
#mapY = affine_map<(j, k, i) -> (i, j)>

func.func @spmm_jik(%A: tensor<32x24xf32, #CSC>, %X: tensor<24x16xf32>) -> tensor<32x16xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<32x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<32x16xf32>) -> tensor<32x16xf32>
  %Y = linalg.generic {indexing_maps = [#mapA, #mapX, #mapY],
                       iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%A, %X : tensor<32x24xf32, #CSC>, tensor<24x16xf32>) outs(%init : tensor<32x16xf32>) {
  ^bb0(%a: f32, %x: f32, %acc: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<32x16xf32>
  return %Y : tensor<32x16xf32>
}
