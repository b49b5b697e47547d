// An i64 input (counts) cast to f32 in the body (arith.sitofp) and scaled by a float input, and
// an i64 result from integer ops and an arith.fptosi of a value that is always whole.
#id = affine_map<(i, j) -> (i, j)>
func.func @integers(%N: tensor<6x5xi64>, %X: tensor<6x5xf32>) -> (tensor<6x5xf32>, tensor<6x5xi64>) {
  %three = arith.constant 3.0 : f32
  %one = arith.constant 1 : i64
  %e = tensor.empty() : tensor<6x5xf32>
  %ei = tensor.empty() : tensor<6x5xi64>
  %Y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%N, %X : tensor<6x5xi64>, tensor<6x5xf32>) outs(%e : tensor<6x5xf32>) {
  ^bb0(%n: i64, %x: f32, %o: f32):
    %f = arith.sitofp %n : i64 to f32
    %p = arith.mulf %f, %x : f32
    linalg.yield %p : f32
  } -> tensor<6x5xf32>
  %T = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%N : tensor<6x5xi64>) outs(%ei : tensor<6x5xi64>) {
  ^bb0(%n: i64, %o: i64):
    %f = arith.sitofp %n : i64 to f32
    %g = arith.mulf %f, %three : f32
    %t = arith.fptosi %g : f32 to i64
    %s = arith.addi %t, %one : i64
    linalg.yield %s : i64
  } -> tensor<6x5xi64>
  return %Y, %T : tensor<6x5xf32>, tensor<6x5xi64>
}
