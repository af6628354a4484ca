// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.linear_cross_entropy_grad: the loss fused with its head, its logits made a chunk of
// rows at a time, over chunks that do not divide the rows (3 of 10, the head [96, 64] read
// transposed as a tied language-model head is; 2 of 7, the head [32, 40] as it lies), with a
// padding target (-100) in each: the input and head gradients of every chunk, summed.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @x : tensor<2x5x64xf32>
mt.parameter @head : tensor<96x64xf32>
mt.parameter @y : tensor<1x7x32xf32>
mt.parameter @proj : tensor<32x40xf32>
func.func @forward() -> tensor<f32> {
  %x = mt.param @x : tensor<2x5x64xf32>
  %head = mt.param @head : tensor<96x64xf32>
  %y = mt.param @y : tensor<1x7x32xf32>
  %proj = mt.param @proj : tensor<32x40xf32>
  %t1 = mt.constant dense<[[49, 53, 5, 33, 65], [62, 51, -100, 61, 45]]> : tensor<2x5xi64>
  %t2 = mt.constant dense<[[-100, 13, 32, 8, 18, 8, 6]]> : tensor<1x7xi64>
  %a = mt.linear_cross_entropy %x, %head, %t1 transpose_weight chunk = 3 : (tensor<2x5x64xf32>, tensor<96x64xf32>, tensor<2x5xi64>) -> tensor<f32>
  %b = mt.linear_cross_entropy %y, %proj, %t2 chunk = 2 : (tensor<1x7x32xf32>, tensor<32x40xf32>, tensor<1x7xi64>) -> tensor<f32>
  %loss = mt.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
