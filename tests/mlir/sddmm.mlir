// SDDMM: O(i,j) = S(i,j) * sum_k A(i,k) * B(k,j), the dense product A*B sampled at the nonzeros
// of S (stored DCSR: compressed rows, compressed columns), as one 3-d linalg.generic.
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>

#mapS = affine_map<(i, j, k) -> (i, j)>
#mapA = affine_map<(i, j, k) -> (i, k)>
#mapB = affine_map<(i, j, k) -> (k, j)>
#mapO = affine_map<(i, j, k) -> (i, j)>

func.func @sddmm(%S: tensor<40x30xf32, #DCSR>, %A: tensor<40x8xf32>, %B: tensor<8x30xf32>)
    -> tensor<40x30xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<40x30xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<40x30xf32>) -> tensor<40x30xf32>
  %O = linalg.generic {indexing_maps = [#mapS, #mapA, #mapB, #mapO],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%S, %A, %B : tensor<40x30xf32, #DCSR>, tensor<40x8xf32>, tensor<8x30xf32>)
      outs(%init : tensor<40x30xf32>) {
  ^bb0(%s: f32, %a: f32, %b: f32, %acc: f32):
    %ab = arith.mulf %a, %b : f32
    %sab = arith.mulf %s, %ab : f32
    %sum = arith.addf %acc, %sab : f32
    linalg.yield %sum : f32
  } -> tensor<40x30xf32>
  return %O : tensor<40x30xf32>
}
