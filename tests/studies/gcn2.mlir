// A GCN-like two-layer network for the exploration tests: O = A * relu(A * X * W1 + b1) * W2 + b2,
// A a DCSR adjacency (compressed, compressed), everything else dense.
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#bias = affine_map<(d0, d1) -> (d1)>

func.func @gcn2(%A: tensor<40x40xf32, #DCSR>, %X: tensor<40x8xf32>, %W1: tensor<8x6xf32>, %b1: tensor<6xf32>,
                %W2: tensor<6x4xf32>, %b2: tensor<4xf32>) -> tensor<40x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e8 = tensor.empty() : tensor<40x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<40x8xf32>) -> tensor<40x8xf32>
  %e6 = tensor.empty() : tensor<40x6xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<40x6xf32>) -> tensor<40x6xf32>
  %e4 = tensor.empty() : tensor<40x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<40x4xf32>) -> tensor<40x4xf32>
  %AX = linalg.matmul ins(%A, %X : tensor<40x40xf32, #DCSR>, tensor<40x8xf32>)
                      outs(%f8 : tensor<40x8xf32>) -> tensor<40x8xf32>
  %H = linalg.matmul ins(%AX, %W1 : tensor<40x8xf32>, tensor<8x6xf32>)
                     outs(%f6 : tensor<40x6xf32>) -> tensor<40x6xf32>
  %R = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]}
      ins(%H, %b1 : tensor<40x6xf32>, tensor<6xf32>) outs(%e6 : tensor<40x6xf32>) {
  ^bb0(%x: f32, %bj: f32, %out: f32):
    %z = arith.addf %x, %bj : f32
    %pos = arith.cmpf ugt, %z, %zero : f32
    %r = arith.select %pos, %z, %zero : f32
    linalg.yield %r : f32
  } -> tensor<40x6xf32>
  %AR = linalg.matmul ins(%A, %R : tensor<40x40xf32, #DCSR>, tensor<40x6xf32>)
                      outs(%f6 : tensor<40x6xf32>) -> tensor<40x6xf32>
  %Y = linalg.matmul ins(%AR, %W2 : tensor<40x6xf32>, tensor<6x4xf32>)
                     outs(%f4 : tensor<40x4xf32>) -> tensor<40x4xf32>
  %O = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]}
      ins(%Y, %b2 : tensor<40x4xf32>, tensor<4xf32>) outs(%e4 : tensor<40x4xf32>) {
  ^bb0(%y: f32, %bj: f32, %out: f32):
    %z = arith.addf %y, %bj : f32
    linalg.yield %z : f32
  } -> tensor<40x4xf32>
  return %O : tensor<40x4xf32>
}
