// The mt dialect: graph-level tensor ops that training programs are built from.
#ifndef MT_DIALECT_TD
#define MT_DIALECT_TD

include "mlir/IR/OpBase.td"

def MT_Dialect : Dialect {
  let name = "mt";
  let summary = "Training compiler for models larger than GPU memory";
  let description = [{
    The graph level of mt: ranked-tensor ops for the transformer vocabulary. Fused ops
    (rms_norm, layer_norm, gelu, silu, rope, attention, linear, embedding, cross_entropy)
    carry the math that kernels and gradient rules know; primitive elementwise, reduction
    and view ops cover everything else. Trained parameters are module-level `mt.parameter`
    symbols that refer to weight bytes where they lie; functions read them with `mt.param`.
  }];
  let cppNamespace = "::mt";
  let hasConstantMaterializer = 1;
  let useDefaultTypePrinterParser = 1;
}

class MT_Op<string mnemonic, list<Trait> traits = []>
    : Op<MT_Dialect, mnemonic, traits>;

#endif // MT_DIALECT_TD
