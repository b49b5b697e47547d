// Non-finite intermediates read by sparse products: T = X / 0 (every entry +-inf),
// E = exp(100 X) (inf where X > 0.89), then Y = A @ T + A @ E and S = A (.) T with A CSR.
// A position A does not store contributes an exact zero to each product (MLIR's sparsifier,
// torch.sparse), so Y is finite or NaN only in rows where A stores entries of both signs' infs.
#CSR = #sparse_tensor.encoding<{ map = (i, k) -> (i : dense, k : compressed) }>
#id = affine_map<(i, j) -> (i, j)>
#mapA = affine_map<(i, k, j) -> (i, k)>
#mapX = affine_map<(i, k, j) -> (k, j)>
#mapY = affine_map<(i, k, j) -> (i, j)>

func.func @nonfinite(%A: tensor<12x12xf32, #CSR>, %X: tensor<12x12xf32>)
    -> (tensor<12x12xf32>, tensor<12x12xf32, #CSR>) {
  %zero = arith.constant 0.0 : f32
  %hundred = arith.constant 100.0 : f32
  %e = tensor.empty() : tensor<12x12xf32>
  %T = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X : tensor<12x12xf32>) outs(%e : tensor<12x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.divf %x, %zero : f32
    linalg.yield %q : f32
  } -> tensor<12x12xf32>
  %E = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X : tensor<12x12xf32>) outs(%e : tensor<12x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.mulf %x, %hundred : f32
    %x2 = math.exp %s : f32
    linalg.yield %x2 : f32
  } -> tensor<12x12xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<12x12xf32>) -> tensor<12x12xf32>
  %AT = linalg.generic {indexing_maps = [#mapA, #mapX, #mapY], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%A, %T : tensor<12x12xf32, #CSR>, tensor<12x12xf32>) outs(%init : tensor<12x12xf32>) {
  ^bb0(%a: f32, %t: f32, %acc: f32):
    %p = arith.mulf %a, %t : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<12x12xf32>
  %AE = linalg.generic {indexing_maps = [#mapA, #mapX, #mapY], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%A, %E : tensor<12x12xf32, #CSR>, tensor<12x12xf32>) outs(%init : tensor<12x12xf32>) {
  ^bb0(%a: f32, %t: f32, %acc: f32):
    %p = arith.mulf %a, %t : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<12x12xf32>
  %Y = linalg.add ins(%AT, %AE : tensor<12x12xf32>, tensor<12x12xf32>) outs(%e : tensor<12x12xf32>) -> tensor<12x12xf32>
  %es = tensor.empty() : tensor<12x12xf32, #CSR>
  %S = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%A, %T : tensor<12x12xf32, #CSR>, tensor<12x12xf32>) outs(%es : tensor<12x12xf32, #CSR>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %p = arith.mulf %a, %t : f32
    linalg.yield %p : f32
  } -> tensor<12x12xf32, #CSR>
  return %Y, %S : tensor<12x12xf32>, tensor<12x12xf32, #CSR>
}
