// Dynamic rows: Y = A * W for A : ?x8 (rows resolved from the data supplied), W : 8x4 CSR.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

func.func @dynamic(%A: tensor<?x8xf32>, %W: tensor<8x4xf32, #CSR>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %A, %c0 : tensor<?x8xf32>
  %empty = tensor.empty(%n) : tensor<?x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x4xf32>) -> tensor<?x4xf32>
  %Y = linalg.matmul ins(%A, %W : tensor<?x8xf32>, tensor<8x4xf32, #CSR>)
                     outs(%init : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %Y : tensor<?x4xf32>
}
