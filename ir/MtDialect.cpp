// Registers the mt dialect's ops.
#include "ir/MtDialect.h"

#include "ir/MtOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mt;

#include "ir/MtDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/MtTypes.cpp.inc"

void MTDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/MtTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/MtOps.cpp.inc"
      >();
}

mlir::LogicalResult MTDialect::verifyOperationAttribute(mlir::Operation *op,
                                                        mlir::NamedAttribute attribute) {
  llvm::StringRef name = attribute.getName().getValue();
  mlir::Attribute value = attribute.getValue();
  if (name == getStreamAttrHelper().getName()) {
    auto stream = llvm::dyn_cast<mlir::StringAttr>(value);
    if (!stream || !llvm::is_contained({"h2d", "compute", "d2h"}, stream.getValue()))
      return op->emitOpError("'") << name << "' must be \"h2d\", \"compute\" or \"d2h\", got "
                                  << value;
    return mlir::success();
  }
  bool arrays = name == getOffsetsAttrHelper().getName() ||
                name == getSizesAttrHelper().getName() ||
                name == getWorkspaceAttrHelper().getName() || name == getWaitAttrHelper().getName();
  bool integers =
      name == getRecordAttrHelper().getName() || name == getEventsAttrHelper().getName();
  bool typed = arrays     ? llvm::isa<mlir::DenseI64ArrayAttr>(value)
               : integers ? llvm::isa<mlir::IntegerAttr>(value)
                          : true;
  if (!typed)
    return op->emitOpError("'") << name << "' has the wrong kind of value: " << value;
  return mlir::success();
}
