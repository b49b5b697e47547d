// Matrix chain O = (A * B) * C with two linalg.matmul: A is DCSR (compressed, compressed),
// B dense, C CSR (dense, compressed); T = A * B is a dense intermediate.
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

func.func @matmul_chain(%A: tensor<20x30xf32, #DCSR>, %B: tensor<30x10xf32>, %C: tensor<10x25xf32, #CSR>)
    -> tensor<20x25xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<20x10xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<20x10xf32>) -> tensor<20x10xf32>
  %T = linalg.matmul ins(%A, %B : tensor<20x30xf32, #DCSR>, tensor<30x10xf32>)
                     outs(%f1 : tensor<20x10xf32>) -> tensor<20x10xf32>
  %e2 = tensor.empty() : tensor<20x25xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<20x25xf32>) -> tensor<20x25xf32>
  %O = linalg.matmul ins(%T, %C : tensor<20x10xf32>, tensor<10x25xf32, #CSR>)
                     outs(%f2 : tensor<20x25xf32>) -> tensor<20x25xf32>
  return %O : tensor<20x25xf32>
}
