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
  // The schedule's contract on the ops of a scheduled step (mt-assign-buffers,
  // mt-assign-streams), which the plan emitter turns into each command's fields: where each
  // result lies in the arena (`offsets`, -1 for host memory) and its bytes (`sizes`), a call's
  // workspace (`workspace`: offset and bytes), the stream an op runs on (`stream`: h2d,
  // compute or d2h), the event it records when done (`record`) and those it waits for first
  // (`wait`); on the step, how many events there are (`events`).
  let discardableAttrs = (ins
    "::mlir::DenseI64ArrayAttr":$offsets,
    "::mlir::DenseI64ArrayAttr":$sizes,
    "::mlir::DenseI64ArrayAttr":$workspace,
    "::mlir::StringAttr":$stream,
    "::mlir::IntegerAttr":$record,
    "::mlir::DenseI64ArrayAttr":$wait,
    "::mlir::IntegerAttr":$events
  );
  let hasOperationAttrVerify = 1;
  let hasConstantMaterializer = 1;
  let useDefaultTypePrinterParser = 1;
}

class MT_Op<string mnemonic, list<Trait> traits = []>
    : Op<MT_Dialect, mnemonic, traits>;

#endif // MT_DIALECT_TD
