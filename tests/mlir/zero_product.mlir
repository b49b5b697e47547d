// A value the program proves zero, as in the reference compiler's sparse autoencoder: the decoder
// reads an unfilled sparse tensor.empty (zeros by MLIR's semantics), so D = W·H is zero everywhere
// and the output is the bias; the encoder no output needs is dropped.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#SV = #sparse_tensor.encoding<{ map = (i) -> (i : compressed) }>
func.func @zero_product(%x: tensor<12xf32, #SV>, %We: tensor<6x12xf32, #CSR>, %b: tensor<12xf32>) -> tensor<12xf32> {
  %z = arith.constant 0.0 : f32
  %e6 = tensor.empty() : tensor<6xf32>
  %f6 = linalg.fill ins(%z : f32) outs(%e6 : tensor<6xf32>) -> tensor<6xf32>
  %H = linalg.matvec ins(%We, %x : tensor<6x12xf32, #CSR>, tensor<12xf32, #SV>) outs(%f6 : tensor<6xf32>) -> tensor<6xf32>
  %Wd = tensor.empty() : tensor<12x6xf32, #CSR>
  %e12 = tensor.empty() : tensor<12xf32>
  %f12 = linalg.fill ins(%z : f32) outs(%e12 : tensor<12xf32>) -> tensor<12xf32>
  %D = linalg.matvec ins(%Wd, %H : tensor<12x6xf32, #CSR>, tensor<6xf32>) outs(%f12 : tensor<12xf32>) -> tensor<12xf32>
  %Y = linalg.add ins(%D, %b : tensor<12xf32>, tensor<12xf32>) outs(%e12 : tensor<12xf32>) -> tensor<12xf32>
  return %Y : tensor<12xf32>
}
