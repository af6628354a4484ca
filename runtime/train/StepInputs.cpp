// A step's token inputs, cut from the stream.
#include "runtime/train/StepInputs.h"

#include "runtime/PlanLoader.h"

#include <algorithm>
#include <stdexcept>

namespace mt {

namespace {

bool hasInput(const plan::Plan &plan, bool (*matches)(const std::string &)) {
  return std::any_of(plan.step().inputs().begin(), plan.step().inputs().end(),
                     [&](const plan::Input &input) { return matches(input.name()); });
}

} // namespace

StepInputs::StepInputs(const plan::Plan &plan, int64_t padTokenId)
    : plan(plan), padTokenId(padTokenId) {
  for (const plan::Input &input : plan.step().inputs()) {
    const plan::TensorType &type = plan.step().values(input.value()).type();
    if (input.name() != "targets" && type.shape_size() == 2) {
      batchSize = type.shape(0);
      sequenceLength = type.shape(1);
      break;
    }
  }
  if (sequenceLength == 0)
    throw std::runtime_error("the plan has no [batch, sequence] token input");
  languageModel = hasInput(
      plan, [](const std::string &name) { return name == "input_ids" || name == "input_ids.0"; });
  attentionMask =
      hasInput(plan, [](const std::string &name) { return name.rfind("attention_mask", 0) == 0; });
  everyMicroBatch = hasInput(plan, [](const std::string &name) { return name == "input_ids.0"; });
  parts = everyMicroBatch ? std::max<int64_t>(1, plan.micro_batches()) : 1;
  if (padTokenId >= 0 && (!attentionMask || !languageModel))
    throw std::runtime_error("--pad-token-id needs a model exported with an attention_mask "
                             "input, so that padding is masked in attention too");
  if (padTokenId >= plan.vocabulary() && plan.vocabulary() > 0)
    throw std::runtime_error("--pad-token-id " + std::to_string(padTokenId) +
                             " is not below the vocabulary size " +
                             std::to_string(plan.vocabulary()));
}

void StepInputs::checkData(const TokenData &data) const {
  data.checkVocabulary(plan.vocabulary());
  if (!languageModel)
    return;
  int64_t needed = parts * batchSize * (sequenceLength + 1);
  if (data.size() < needed)
    throw std::runtime_error(
        "the data holds " + std::to_string(data.size()) +
        " tokens, fewer than one run of the step takes: " + std::to_string(parts * batchSize) +
        " sequences of " + std::to_string(sequenceLength) + " tokens and the next one, " +
        std::to_string(needed));
}

StepInputValues StepInputs::next(TokenData &data) const {
  StepInputValues inputs;
  if (!languageModel) {
    for (const plan::Input &input : plan.step().inputs())
      inputs[input.name()] =
          data.next(1, numElements(plan.step().values(input.value()).type()), plan.vocabulary())
              .inputs;
    return inputs;
  }
  for (int64_t part = 0; part < parts; ++part) {
    Batch tokens = data.next(batchSize, sequenceLength, plan.vocabulary());
    std::string suffix = everyMicroBatch ? "." + std::to_string(part) : "";
    if (padTokenId >= 0)
      inputs["attention_mask" + suffix] = maskPadding(tokens, padTokenId, sequenceLength);
    else if (attentionMask)
      inputs["attention_mask" + suffix].assign(tokens.inputs.size(), 1);
    inputs["input_ids" + suffix] = std::move(tokens.inputs);
    inputs["targets" + suffix] = std::move(tokens.targets);
  }
  return inputs;
}

} // namespace mt
