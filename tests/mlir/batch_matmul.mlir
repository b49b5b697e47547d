// Batched SpMM: O(b,i,j) = sum_k A(b,i,k) * X(b,k,j) with linalg.batch_matmul; each batch of A
// is CSR (batch : dense, i : dense, k : compressed).
#BCSR = #sparse_tensor.encoding<{ map = (b, i, k) -> (b : dense, i : dense, k : compressed) }>

func.func @batch_matmul(%A: tensor<3x10x12xf32, #BCSR>, %X: tensor<3x12x5xf32>) -> tensor<3x10x5xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<3x10x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<3x10x5xf32>) -> tensor<3x10x5xf32>
  %O = linalg.batch_matmul ins(%A, %X : tensor<3x10x12xf32, #BCSR>, tensor<3x12x5xf32>)
                           outs(%init : tensor<3x10x5xf32>) -> tensor<3x10x5xf32>
  return %O : tensor<3x10x5xf32>
}
