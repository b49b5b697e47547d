// The SpGEMM peer case of issue #28 (bench/startup.py): Y = A·X, both 1000x1000 DCSR, into DCSR.
// fuseflow simulate bench/spgemm_peer.mlir --density 0.05 --schedule "full layout=induced order=j,i,k"
// (5% dense inputs; order j,i,k: the reduction j outermost, outer products into an order-2 accumulator)
#SP = #sparse_tensor.encoding<{ map = (i, k) -> (i : compressed, k : compressed) }>
#mapA = affine_map<(i, k, j) -> (i, k)>
#mapX = affine_map<(i, k, j) -> (k, j)>
#mapY = affine_map<(i, k, j) -> (i, j)>
func.func @spgemm(%A: tensor<1000x1000xf32, #SP>, %X: tensor<1000x1000xf32, #SP>) -> tensor<1000x1000xf32, #SP> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1000x1000xf32, #SP>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1000x1000xf32, #SP>) -> tensor<1000x1000xf32, #SP>
  %Y = linalg.generic {indexing_maps = [#mapA, #mapX, #mapY],
                       iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%A, %X : tensor<1000x1000xf32, #SP>, tensor<1000x1000xf32, #SP>) outs(%init : tensor<1000x1000xf32, #SP>) {
  ^bb0(%a: f32, %x: f32, %acc: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1000x1000xf32, #SP>
  return %Y : tensor<1000x1000xf32, #SP>
}
