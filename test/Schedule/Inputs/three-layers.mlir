// Three pre-norm layers (two with a silu MLP, one with gelu) over a tied byte embedding:
// the model the schedule passes' tests compile.
mt.parameter @wte : tensor<10x8xf32>
mt.parameter @gf : tensor<8xf32>
mt.parameter @g0a : tensor<8xf32>
mt.parameter @wq0 : tensor<8x8xf32>
mt.parameter @wo0 : tensor<8x8xf32>
mt.parameter @g0b : tensor<8xf32>
mt.parameter @w10 : tensor<8x16xf32>
mt.parameter @w20 : tensor<16x8xf32>
mt.parameter @g1a : tensor<8xf32>
mt.parameter @wq1 : tensor<8x8xf32>
mt.parameter @wo1 : tensor<8x8xf32>
mt.parameter @g1b : tensor<8xf32>
mt.parameter @w11 : tensor<8x16xf32>
mt.parameter @w21 : tensor<16x8xf32>
mt.parameter @g2a : tensor<8xf32>
mt.parameter @wq2 : tensor<8x8xf32>
mt.parameter @wo2 : tensor<8x8xf32>
mt.parameter @g2b : tensor<8xf32>
mt.parameter @w12 : tensor<8x16xf32>
mt.parameter @w22 : tensor<16x8xf32>
func.func @forward(%ids: tensor<1x4xi64> {mt.name = "input_ids"}) -> tensor<1x4x10xf32> {
  %wte = mt.param @wte : tensor<10x8xf32>
  %gf = mt.param @gf : tensor<8xf32>
  %g0a = mt.param @g0a : tensor<8xf32>
  %wq0 = mt.param @wq0 : tensor<8x8xf32>
  %wo0 = mt.param @wo0 : tensor<8x8xf32>
  %g0b = mt.param @g0b : tensor<8xf32>
  %w10 = mt.param @w10 : tensor<8x16xf32>
  %w20 = mt.param @w20 : tensor<16x8xf32>
  %g1a = mt.param @g1a : tensor<8xf32>
  %wq1 = mt.param @wq1 : tensor<8x8xf32>
  %wo1 = mt.param @wo1 : tensor<8x8xf32>
  %g1b = mt.param @g1b : tensor<8xf32>
  %w11 = mt.param @w11 : tensor<8x16xf32>
  %w21 = mt.param @w21 : tensor<16x8xf32>
  %g2a = mt.param @g2a : tensor<8xf32>
  %wq2 = mt.param @wq2 : tensor<8x8xf32>
  %wo2 = mt.param @wo2 : tensor<8x8xf32>
  %g2b = mt.param @g2b : tensor<8xf32>
  %w12 = mt.param @w12 : tensor<8x16xf32>
  %w22 = mt.param @w22 : tensor<16x8xf32>
  %x0 = mt.embedding %wte, %ids : (tensor<10x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %n0a = mt.rms_norm %x0, %g0a epsilon = 1.0e-05 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q0 = mt.linear %n0a, %wq0 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r0 = mt.reshape %q0 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %h0 = mt.transpose %r0 permutation = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %at0 = mt.attention %h0, %h0, %h0 scale = 5.000000e-01 causal : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %tb0 = mt.transpose %at0 permutation = [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %m0 = mt.reshape %tb0 : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %o0 = mt.linear %m0, %wo0 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %y0 = mt.add %x0, %o0 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n0b = mt.rms_norm %y0, %g0b epsilon = 1.0e-05 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %u0 = mt.linear %n0b, %w10 : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %a0 = mt.silu %u0 : tensor<1x4x16xf32>
  %d0 = mt.linear %a0, %w20 : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %x1 = mt.add %d0, %y0 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n1a = mt.rms_norm %x1, %g1a epsilon = 1.0e-05 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q1 = mt.linear %n1a, %wq1 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r1 = mt.reshape %q1 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %h1 = mt.transpose %r1 permutation = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %at1 = mt.attention %h1, %h1, %h1 scale = 5.000000e-01 causal : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %tb1 = mt.transpose %at1 permutation = [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %m1 = mt.reshape %tb1 : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %o1 = mt.linear %m1, %wo1 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %y1 = mt.add %x1, %o1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n1b = mt.rms_norm %y1, %g1b epsilon = 1.0e-05 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %u1 = mt.linear %n1b, %w11 : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %a1 = mt.silu %u1 : tensor<1x4x16xf32>
  %d1 = mt.linear %a1, %w21 : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %x2 = mt.add %d1, %y1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n2a = mt.rms_norm %x2, %g2a epsilon = 1.0e-05 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q2 = mt.linear %n2a, %wq2 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r2 = mt.reshape %q2 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %h2 = mt.transpose %r2 permutation = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %at2 = mt.attention %h2, %h2, %h2 scale = 5.000000e-01 causal : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %tb2 = mt.transpose %at2 permutation = [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %m2 = mt.reshape %tb2 : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %o2 = mt.linear %m2, %wo2 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %y2 = mt.add %x2, %o2 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n2b = mt.rms_norm %y2, %g2b epsilon = 1.0e-05 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %u2 = mt.linear %n2b, %w12 : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %a2 = mt.gelu %u2 : tensor<1x4x16xf32>
  %d2 = mt.linear %a2, %w22 : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %x3 = mt.add %d2, %y2 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %nf = mt.rms_norm %x3, %gf epsilon = 1.0e-05 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %logits = mt.linear %nf, %wte transpose_weight : (tensor<1x4x8xf32>, tensor<10x8xf32>) -> tensor<1x4x10xf32>
  return %logits : tensor<1x4x10xf32>
}
