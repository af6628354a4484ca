// mtc's flags (the LLVM command-line options it registers) and their checks, which every
// stage reads.
#ifndef MT_TOOLS_MTC_OPTIONS_H
#define MT_TOOLS_MTC_OPTIONS_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <string>

namespace mt::mtc {

/// The category of mtc's own flags (the others are hidden from --help).
extern llvm::cl::OptionCategory category;
enum class Stage { Import, Graph, Segments, Train, Schedule, Timeline, Plan };
enum class Summary { None, Text, Json };

extern llvm::cl::opt<std::string> inputPath;
extern llvm::cl::opt<std::string> outputPath;
extern llvm::cl::opt<Stage> emit;
extern llvm::cl::opt<Summary> summary;
extern llvm::cl::opt<bool> foldAttentionLayout;
extern llvm::cl::opt<bool> segmentLayers;
extern llvm::cl::opt<std::string> target;
extern llvm::cl::opt<int64_t> microBatches;
extern llvm::cl::opt<std::string> accumulation;
extern llvm::cl::opt<std::string> checkpoints;
extern llvm::cl::opt<std::string> gradientRing;
extern llvm::cl::opt<std::string> devicePrecision;
extern llvm::cl::opt<std::string> streamWeights;
extern llvm::cl::opt<std::string> deviceMemory;
extern llvm::cl::opt<int64_t> recomputeInterval;
extern llvm::cl::opt<int64_t> residentLayers;
extern llvm::cl::opt<int64_t> persistentLayers;
extern llvm::cl::opt<std::string> deviceUpdates;
extern llvm::cl::opt<std::string> savedLayers;
extern llvm::cl::opt<bool> schedule;
extern llvm::cl::list<std::string> inputShapes;

/// The schedule options' values, checked before any work (errors printed).
mlir::LogicalResult checkScheduleOptions();

/// The device memory a plan may use, in bytes: --device-memory, or 0 for the target's.
mlir::FailureOr<int64_t> deviceBudget();

} // namespace mt::mtc

#endif // MT_TOOLS_MTC_OPTIONS_H
