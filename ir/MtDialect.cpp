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
