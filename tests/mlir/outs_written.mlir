// A kernel that returns nothing and writes its results into arguments through `outs`, as the
// reference compiler's tests write kernels: X += A·B starts from X's own values, then ReLU writes
// into that result again (so into %X), and exp(A) is written into %Z.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#spmm = {
  indexing_maps = [affine_map<(i, k, j) -> (i, k)>, affine_map<(i, k, j) -> (k, j)>,
                   affine_map<(i, k, j) -> (i, j)>],
  iterator_types = ["parallel", "reduction", "parallel"]
}
#id = affine_map<(i, j) -> (i, j)>
func.func @outs_written(%A: tensor<8x6xf32, #CSR>, %B: tensor<6x5xf32>, %X: tensor<8x5xf32>,
                        %Z: tensor<8x6xf32>) {
  %XB = linalg.generic #spmm ins(%A, %B : tensor<8x6xf32, #CSR>, tensor<6x5xf32>) outs(%X : tensor<8x5xf32>) {
  ^bb0(%a: f32, %b: f32, %x: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %x, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x5xf32>
  %zero = arith.constant 0.0 : f32
  %R = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%XB : tensor<8x5xf32>) outs(%XB : tensor<8x5xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x5xf32>
  %E = linalg.exp ins(%A : tensor<8x6xf32, #CSR>) outs(%Z : tensor<8x6xf32>) -> tensor<8x6xf32>
  return
}
