// The mt dialect class (generated from MtDialect.td).
#ifndef MT_IR_MTDIALECT_H
#define MT_IR_MTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "ir/MtDialect.h.inc"

namespace mt {

/// The dialect of `op`'s context, whose helpers read and write the schedule's attributes
/// (MtDialect.td's discardableAttrs): scheduleAttrs(op).getStreamAttrHelper().getAttr(op).
inline MTDialect &scheduleAttrs(mlir::Operation *op) {
  return *op->getContext()->getLoadedDialect<MTDialect>();
}

} // namespace mt

#endif // MT_IR_MTDIALECT_H
