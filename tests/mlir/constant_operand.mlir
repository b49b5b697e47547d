// Constants inside a fused group, as a LayerNorm writes them: the row sum is divided by a tensor
// filled with 16.0 (a linalg.fill read as data), the variance by 4.0 * 4.0 computed in the body.
#row = affine_map<(i, j) -> (i)>
#id = affine_map<(i, j) -> (i, j)>
#v = affine_map<(i) -> (i)>
func.func @constant_operand(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %z = arith.constant 0.0 : f32
  %n = arith.constant 16.0 : f32
  %c4 = arith.constant 4.0 : f32
  %eps = arith.constant 1.0e-05 : f32
  %e8 = tensor.empty() : tensor<8xf32>
  %zero = linalg.fill ins(%z : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %count = linalg.fill ins(%n : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%zero : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %mean = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]}
      ins(%sum, %count : tensor<8xf32>, tensor<8xf32>) outs(%e8 : tensor<8xf32>) {
  ^bb0(%s: f32, %c: f32, %o: f32):
    %m = arith.divf %s, %c : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %mean : tensor<8x16xf32>, tensor<8xf32>) outs(%zero : tensor<8xf32>) {
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %d = arith.subf %a, %m : f32
    %d2 = arith.mulf %d, %d : f32
    %s = arith.addf %d2, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %var = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%sq : tensor<8xf32>) outs(%e8 : tensor<8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %k = arith.mulf %c4, %c4 : f32
    %r = arith.divf %s, %k : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %var : tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %ve = arith.addf %s, %eps : f32
    %r = math.rsqrt %ve : f32
    %t = arith.mulf %d, %r : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
