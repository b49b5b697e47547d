// A shared producer P = 2A read by R1 = P*B (B CSR: filters rows) and by Z = R1 + P*D. With
// layout=induced, B's dense level follows the order, so its intersection may filter any dimension:
// P must not be shared then.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id2 = affine_map<(i, j) -> (i, j)>
#mP = affine_map<(i, j, k) -> (i, j)>
#mB = affine_map<(i, j, k) -> (i, k)>
#mO = affine_map<(i, j, k) -> (i, j, k)>
func.func @ind(%A: tensor<6x5xf32>, %B: tensor<6x4xf32, #CSR>, %D: tensor<6x4xf32>)
    -> tensor<6x5x4xf32> {
  %e = tensor.empty() : tensor<6x5xf32>
  %e3 = tensor.empty() : tensor<6x5x4xf32>
  %P = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%A : tensor<6x5xf32>) outs(%e : tensor<6x5xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 2.0 : f32
    %r = arith.mulf %a, %c : f32
    linalg.yield %r : f32
  } -> tensor<6x5xf32>
  %R1 = linalg.generic {indexing_maps = [#mP, #mB, #mO], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%P, %B : tensor<6x5xf32>, tensor<6x4xf32, #CSR>) outs(%e3 : tensor<6x5x4xf32>) {
  ^bb0(%p: f32, %b: f32, %o: f32):
    %m = arith.mulf %p, %b : f32
    linalg.yield %m : f32
  } -> tensor<6x5x4xf32>
  %Z = linalg.generic {indexing_maps = [#mO, #mP, #mB, #mO], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%R1, %P, %D : tensor<6x5x4xf32>, tensor<6x5xf32>, tensor<6x4xf32>) outs(%e3 : tensor<6x5x4xf32>) {
  ^bb0(%r: f32, %p: f32, %d: f32, %o: f32):
    %m = arith.mulf %p, %d : f32
    %s = arith.addf %r, %m : f32
    linalg.yield %s : f32
  } -> tensor<6x5x4xf32>
  return %Z : tensor<6x5x4xf32>
}
