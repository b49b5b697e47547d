// Masked softmax as PyTorch writes it: S.masked_fill(M == 0, -inf).softmax(-1). Masked positions
// hold -inf, so they drop out of the row max and contribute exp(-inf) = 0 to the row sum: the
// fused graph visits only the entries M stores (background values, see fuseflow.ir.background).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @masked_softmax(%S: tensor<12x10xf32>, %M: tensor<12x10xf32, #CSR>) -> tensor<12x10xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : tensor<12x10xf32>
  %e1 = tensor.empty() : tensor<12xf32>
  %filled = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%S, %M : tensor<12x10xf32>, tensor<12x10xf32, #CSR>) outs(%e2 : tensor<12x10xf32>) {
  ^bb0(%s: f32, %m: f32, %o: f32):
    %masked = arith.cmpf oeq, %m, %zero : f32
    %r = arith.select %masked, %ninf, %s : f32
    linalg.yield %r : f32
  } -> tensor<12x10xf32>
  %minit = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<12xf32>) -> tensor<12xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%filled : tensor<12x10xf32>) outs(%minit : tensor<12xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<12xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%filled, %max : tensor<12x10xf32>, tensor<12xf32>) outs(%e2 : tensor<12x10xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %d = arith.subf %x, %mx : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<12x10xf32>
  %sinit = linalg.fill ins(%zero : f32) outs(%e1 : tensor<12xf32>) -> tensor<12xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<12x10xf32>) outs(%sinit : tensor<12xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<12xf32>
  %out = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %sum : tensor<12x10xf32>, tensor<12xf32>) outs(%e2 : tensor<12x10xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<12x10xf32>
  return %out : tensor<12x10xf32>
}
