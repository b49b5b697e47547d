// SpMV: y(i) = sum_j A(i,j) * x(j), with A stored CSR (dense rows, compressed columns).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

func.func @spmv(%A: tensor<64x48xf32, #CSR>, %x: tensor<48xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<64xf32>) -> tensor<64xf32>
  %y = linalg.matvec ins(%A, %x : tensor<64x48xf32, #CSR>, tensor<48xf32>)
                     outs(%init : tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}
