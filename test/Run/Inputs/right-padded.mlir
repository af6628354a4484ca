// A graph whose attention reads a mask input as key lengths: the input is marked
// right-padded, as mt-raise-attention marks an attention_mask it raised so.
mt.parameter @q : tensor<2x1x8x4xf32>
func.func @forward(%mask: tensor<2x8xi64> {mt.name = "mask", mt.right_padded}) -> tensor<f32> {
  %q = mt.param @q : tensor<2x1x8x4xf32>
  %n = mt.key_lengths %mask : tensor<2x8xi64> -> tensor<2xi64>
  %a = mt.attention %q, %q, %q key_lengths %n scale = 0.5 causal : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2xi64>) -> tensor<2x1x8x4xf32>
  %loss = mt.reduce_sum %a axes = [0, 1, 2, 3] : tensor<2x1x8x4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
