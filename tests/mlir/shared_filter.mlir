// T = 2*A is read by Y = T * M (an intersection) and by Z = T + Y (a union): Z needs all of T.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @shared(%A: tensor<6x6xf32, #CSR>, %M: tensor<6x6xf32, #CSR>) -> tensor<6x6xf32> {
  %e = tensor.empty() : tensor<6x6xf32>
  %T = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%A : tensor<6x6xf32, #CSR>) outs(%e : tensor<6x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 2.0 : f32
    %r = arith.mulf %a, %c : f32
    linalg.yield %r : f32
  } -> tensor<6x6xf32>
  %Y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%T, %M : tensor<6x6xf32>, tensor<6x6xf32, #CSR>) outs(%e : tensor<6x6xf32>) {
  ^bb0(%t: f32, %m: f32, %o: f32):
    %r = arith.mulf %t, %m : f32
    linalg.yield %r : f32
  } -> tensor<6x6xf32>
  %Z = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%T, %Y : tensor<6x6xf32>, tensor<6x6xf32>) outs(%e : tensor<6x6xf32>) {
  ^bb0(%t: f32, %y: f32, %o: f32):
    %r = arith.addf %t, %y : f32
    linalg.yield %r : f32
  } -> tensor<6x6xf32>
  return %Z : tensor<6x6xf32>
}
