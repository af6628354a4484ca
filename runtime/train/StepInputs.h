// What a plan's step reads besides its parameters, and each run's values for it from a token
// stream: a language model's input_ids, targets and attention_mask, or a test graph's inputs.
#ifndef MT_RUNTIME_TRAIN_STEPINPUTS_H
#define MT_RUNTIME_TRAIN_STEPINPUTS_H

#include "plan/plan.pb.h"
#include "runtime/train/TokenData.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mt {

/// A step's inputs by name, as the executors take them.
using StepInputValues = std::map<std::string, std::vector<int64_t>>;

class StepInputs {
public:
  /// The inputs of `plan`'s step. `padTokenId` (or -1: none) makes a model's attention_mask
  /// 0 at that token, and its targets there -100; it needs a language model with an
  /// attention_mask input and a token id below the vocabulary. Throws on a plan without a
  /// [batch, sequence] token input.
  StepInputs(const plan::Plan &plan, int64_t padTokenId);

  /// Sequences and tokens a sequence of one micro-batch.
  int64_t batch() const { return batchSize; }
  int64_t length() const { return sequenceLength; }
  /// Whether one run of the step takes every micro-batch (a layer-major plan).
  bool layerMajor() const { return everyMicroBatch; }

  /// Refuses `data` before any work: a token id beyond the vocabulary anywhere in it, or, for
  /// a language model, fewer tokens than one run of the step takes (it would wrap within a
  /// batch).
  void checkData(const TokenData &data) const;

  /// The next run of the step from `data`. A language model takes input_ids and targets (and
  /// its attention_mask: all ones, packed sequences, or 0 at padding), every micro-batch of a
  /// layer-major plan at once (suffixed ".m"); a test graph's integer inputs each take the
  /// stream's next tokens. Throws naming a token beyond the vocabulary, or padding between a
  /// sequence's tokens.
  StepInputValues next(TokenData &data) const;

private:
  const plan::Plan &plan;
  int64_t padTokenId;
  int64_t batchSize = 0, sequenceLength = 0;
  // A layer-major plan's run takes every micro-batch at once, as inputs suffixed ".m".
  bool languageModel = false, attentionMask = false, everyMicroBatch = false;
  int64_t parts = 1; // batches one run takes: a layer-major plan's micro-batches, else one
};

} // namespace mt

#endif // MT_RUNTIME_TRAIN_STEPINPUTS_H
