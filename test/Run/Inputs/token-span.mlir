// A graph whose attention reads a mask input as each row's span of tokens: the input is
// marked so, as mt-raise-attention marks an attention_mask it raised.
mt.parameter @q : tensor<2x1x8x4xf32>
func.func @forward(%mask: tensor<2x8xi64> {mt.name = "mask", mt.token_span}) -> tensor<f32> {
  %q = mt.param @q : tensor<2x1x8x4xf32>
  %n = mt.key_span %mask : tensor<2x8xi64> -> tensor<2x2xi64>
  %a = mt.attention %q, %q, %q key_span %n scale = 0.5 causal : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x2xi64>) -> tensor<2x1x8x4xf32>
  %loss = mt.reduce_sum %a axes = [0, 1, 2, 3] : tensor<2x1x8x4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
