// One GCN-style layer: H = relu(A * X + b) with A CSR; ReLU written as arith.cmpf + arith.select,
// the bias b broadcast along rows with the map (d0, d1) -> (d1).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#bias = affine_map<(d0, d1) -> (d1)>

func.func @relu(%A: tensor<24x24xf32, #CSR>, %X: tensor<24x6xf32>, %b: tensor<6xf32>) -> tensor<24x6xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<24x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<24x6xf32>) -> tensor<24x6xf32>
  %AX = linalg.matmul ins(%A, %X : tensor<24x24xf32, #CSR>, tensor<24x6xf32>)
                      outs(%init : tensor<24x6xf32>) -> tensor<24x6xf32>
  %H = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]}
      ins(%AX, %b : tensor<24x6xf32>, tensor<6xf32>) outs(%empty : tensor<24x6xf32>) {
  ^bb0(%x: f32, %bj: f32, %out: f32):
    %z = arith.addf %x, %bj : f32
    %pos = arith.cmpf ugt, %z, %zero : f32
    %r = arith.select %pos, %z, %zero : f32
    linalg.yield %r : f32
  } -> tensor<24x6xf32>
  return %H : tensor<24x6xf32>
}
