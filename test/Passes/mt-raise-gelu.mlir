// RUN: mt-opt %s --split-input-file --mt-raise-gelu | FileCheck %s

// Tests that (x * (1 + erf(x / sqrt 2))) * 0.5 becomes an exact mt.gelu.
// CHECK-LABEL: func.func @erf_div_sqrt2
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x128xf32>)
// CHECK: %[[Y:.*]] = mt.gelu %[[X]] : tensor<2x16x128xf32>
// CHECK-NOT: mt.erf
// CHECK: return %[[Y]]
func.func @erf_div_sqrt2(%x: tensor<2x16x128xf32>) -> tensor<2x16x128xf32> {
  %sqrt2 = mt.constant dense<1.41421354> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %a = mt.div %x, %sqrt2 : (tensor<2x16x128xf32>, tensor<f32>) -> tensor<2x16x128xf32>
  %e = mt.erf %a : tensor<2x16x128xf32>
  %p = mt.add %e, %one : (tensor<2x16x128xf32>, tensor<f32>) -> tensor<2x16x128xf32>
  %m = mt.mul %x, %p : (tensor<2x16x128xf32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %y = mt.mul %m, %half : (tensor<2x16x128xf32>, tensor<f32>) -> tensor<2x16x128xf32>
  return %y : tensor<2x16x128xf32>
}

// -----

// Tests that (x * 0.5) * (1 + erf(x * (1 / sqrt 2))), with 1 on the left of the sum, is raised.
// CHECK-LABEL: func.func @erf_mul_rsqrt2_half_first
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>)
// CHECK: mt.gelu %[[X]] : tensor<4x64xf32>
// CHECK-NOT: mt.erf
// CHECK-NOT: approximate
func.func @erf_mul_rsqrt2_half_first(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %c = mt.constant dense<0.707106769> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %a = mt.mul %c, %x : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %e = mt.erf %a : tensor<4x64xf32>
  %p = mt.add %one, %e : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %h = mt.mul %x, %half : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %y = mt.mul %h, %p : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that x * (0.5 * (1 + erf(x / sqrt 2))) is raised.
// CHECK-LABEL: func.func @erf_x_times_half_term
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>)
// CHECK: mt.gelu %[[X]] : tensor<4x64xf32>
// CHECK-NOT: mt.erf
func.func @erf_x_times_half_term(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %sqrt2 = mt.constant dense<1.41421354> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %a = mt.div %x, %sqrt2 : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %e = mt.erf %a : tensor<4x64xf32>
  %p = mt.add %e, %one : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %h = mt.mul %half, %p : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %x, %h : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) with pow becomes the
// tanh-approximated mt.gelu.
// CHECK-LABEL: func.func @tanh_pow
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x128xf32>)
// CHECK: %[[Y:.*]] = mt.gelu %[[X]] approximate = "tanh" : tensor<2x16x128xf32>
// CHECK-NOT: mt.tanh
// CHECK: return %[[Y]]
func.func @tanh_pow(%x: tensor<2x16x128xf32>) -> tensor<2x16x128xf32> {
  %three = mt.constant dense<3.0> : tensor<f32>
  %kappa = mt.constant dense<0.044715> : tensor<f32>
  %beta = mt.constant dense<0.797884583> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %c = mt.pow %x, %three : (tensor<2x16x128xf32>, tensor<f32>) -> tensor<2x16x128xf32>
  %k = mt.mul %kappa, %c : (tensor<f32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %s = mt.add %x, %k : (tensor<2x16x128xf32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %b = mt.mul %beta, %s : (tensor<f32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %t = mt.tanh %b : tensor<2x16x128xf32>
  %p = mt.add %one, %t : (tensor<f32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %h = mt.mul %half, %x : (tensor<f32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %y = mt.mul %h, %p : (tensor<2x16x128xf32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  return %y : tensor<2x16x128xf32>
}

// -----

// Tests the tanh form with the cube as x * (x * x), operands swapped throughout and the
// product associated as (x * term) * 0.5.
// CHECK-LABEL: func.func @tanh_products_swapped
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>)
// CHECK: mt.gelu %[[X]] approximate = "tanh"
// CHECK-NOT: mt.tanh
func.func @tanh_products_swapped(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %kappa = mt.constant dense<0.044715> : tensor<f32>
  %beta = mt.constant dense<0.797884583> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %sq = mt.mul %x, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %c = mt.mul %sq, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %k = mt.mul %c, %kappa : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %s = mt.add %k, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %b = mt.mul %s, %beta : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %t = mt.tanh %b : tensor<4x64xf32>
  %p = mt.add %t, %one : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %m = mt.mul %p, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %m, %half : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that a factor of 0.6 instead of 0.5 is not raised.
// CHECK-LABEL: func.func @wrong_half
// CHECK-NOT: mt.gelu
// CHECK: mt.erf
func.func @wrong_half(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %sqrt2 = mt.constant dense<1.41421354> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.6> : tensor<f32>
  %a = mt.div %x, %sqrt2 : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %e = mt.erf %a : tensor<4x64xf32>
  %p = mt.add %e, %one : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %m = mt.mul %x, %p : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %m, %half : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that erf(x / 2) (not x / sqrt 2) is not raised.
// CHECK-LABEL: func.func @wrong_erf_scale
// CHECK-NOT: mt.gelu
// CHECK: mt.erf
func.func @wrong_erf_scale(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %a = mt.div %x, %two : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %e = mt.erf %a : tensor<4x64xf32>
  %p = mt.add %e, %one : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %m = mt.mul %x, %p : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %m, %half : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that an erf of another value than the one multiplied is not raised.
// CHECK-LABEL: func.func @erf_of_other_value
// CHECK-NOT: mt.gelu
// CHECK: mt.erf
func.func @erf_of_other_value(%x: tensor<4x64xf32>, %z: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %sqrt2 = mt.constant dense<1.41421354> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %a = mt.div %z, %sqrt2 : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %e = mt.erf %a : tensor<4x64xf32>
  %p = mt.add %e, %one : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %m = mt.mul %x, %p : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %m, %half : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that a tanh form with a wrong cubic coefficient (0.05) is not raised.
// CHECK-LABEL: func.func @tanh_wrong_kappa
// CHECK-NOT: mt.gelu
// CHECK: mt.tanh
func.func @tanh_wrong_kappa(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %three = mt.constant dense<3.0> : tensor<f32>
  %kappa = mt.constant dense<0.05> : tensor<f32>
  %beta = mt.constant dense<0.797884583> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %c = mt.pow %x, %three : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %k = mt.mul %kappa, %c : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %s = mt.add %x, %k : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %b = mt.mul %beta, %s : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %t = mt.tanh %b : tensor<4x64xf32>
  %p = mt.add %one, %t : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %h = mt.mul %half, %x : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %h, %p : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that a tanh form with x^2 instead of x^3 is not raised.
// CHECK-LABEL: func.func @tanh_square_not_cube
// CHECK-NOT: mt.gelu
// CHECK: mt.tanh
func.func @tanh_square_not_cube(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %kappa = mt.constant dense<0.044715> : tensor<f32>
  %beta = mt.constant dense<0.797884583> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %c = mt.mul %x, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %k = mt.mul %kappa, %c : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %s = mt.add %x, %k : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %b = mt.mul %beta, %s : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %t = mt.tanh %b : tensor<4x64xf32>
  %p = mt.add %one, %t : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %h = mt.mul %half, %x : (tensor<f32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %h, %p : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that an inner product with another use is not absorbed into a gelu: the outer
// product then has only two factors and stays.
// CHECK-LABEL: func.func @shared_inner_product
// CHECK-NOT: mt.gelu
// CHECK: mt.erf
func.func @shared_inner_product(%x: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %sqrt2 = mt.constant dense<1.41421354> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %a = mt.div %x, %sqrt2 : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %e = mt.erf %a : tensor<4x64xf32>
  %p = mt.add %e, %one : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %m = mt.mul %x, %p : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %m, %half : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  return %y, %m : tensor<4x64xf32>, tensor<4x64xf32>
}
