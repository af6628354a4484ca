// Unit test of the step's token inputs (runtime/train/StepInputs): a language model's
// input_ids, targets and attention_mask cut from the stream, per micro-batch of a layer-major
// plan; padding masked and its targets ignored; a test graph's inputs; and the errors.
#include "runtime/train/StepInputs.h"
#include "runtime/KernelShapes.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(bool condition, const std::string &what) {
  if (!condition) {
    std::printf("FAIL: %s\n", what.c_str());
    std::exit(1);
  }
}

/// A plan whose step reads the named integer inputs, each of `shape`.
mt::plan::Plan planOf(const std::vector<std::string> &names, std::vector<int64_t> shape,
                      int64_t vocabulary, int64_t microBatches) {
  mt::plan::Plan plan;
  plan.set_vocabulary(vocabulary);
  plan.set_micro_batches(microBatches);
  for (const std::string &name : names) {
    mt::plan::Input *input = plan.mutable_step()->add_inputs();
    input->set_name(name);
    input->set_value(plan.step().values_size());
    mt::plan::TensorType *type = plan.mutable_step()->add_values()->mutable_type();
    type->set_dtype(mt::plan::I64);
    for (int64_t d : shape)
      type->add_shape(d);
  }
  return plan;
}

/// A raw uint16 token file of `tokens`, read back as a stream.
mt::TokenData streamOf(const std::vector<uint16_t> &tokens, const std::string &path) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(tokens.data()), tokens.size() * 2);
  return mt::TokenData(path, "u16");
}

/// The message `body` throws, or "" if it does not.
std::string errorOf(const std::function<void()> &body) {
  try {
    body();
  } catch (const std::exception &error) {
    return error.what();
  }
  return "";
}

} // namespace

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : ".";

  // Two sequences of 3: each window is 4 tokens, inputs its first 3 and targets its last 3.
  mt::plan::Plan lm = planOf({"input_ids", "attention_mask", "targets"}, {2, 3}, 50, 1);
  mt::TokenData data = streamOf({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, dir + "/lm.tokens");
  mt::StepInputs packed(lm, -1);
  check(packed.batch() == 2 && packed.length() == 3 && !packed.layerMajor(), "the batch shape");
  mt::StepInputValues step = packed.next(data);
  check(step["input_ids"] == std::vector<int64_t>{1, 2, 3, 5, 6, 7}, "input_ids");
  check(step["targets"] == std::vector<int64_t>{2, 3, 4, 6, 7, 8}, "targets");
  check(step["attention_mask"] == std::vector<int64_t>(6, 1), "a mask of ones");
  // The stream wraps: the next batch starts at token 9.
  check(packed.next(data)["input_ids"] == std::vector<int64_t>{9, 10, 1, 3, 4, 5}, "wrapping");
  std::printf("a language model's batch: input_ids, targets shifted, a mask of ones\n");

  // Token 0 is padding: the mask is 0 there and the targets that are padding become -100.
  mt::TokenData padded = streamOf({1, 2, 0, 0, 4, 5, 6, 0}, dir + "/padded.tokens");
  step = mt::StepInputs(lm, 0).next(padded);
  check(step["attention_mask"] == std::vector<int64_t>{1, 1, 0, 1, 1, 1}, "the padding mask");
  check(step["targets"] == std::vector<int64_t>{2, mt::kIgnoredTarget, mt::kIgnoredTarget, 5, 6,
                                                mt::kIgnoredTarget},
        "padding targets ignored");
  // Left padding, then padding on both sides: the mask 0 there, and the prediction made at
  // padding (the first token's, predicted from a row that attends to nothing) is ignored too.
  mt::TokenData left = streamOf({0, 1, 2, 3, 0, 4, 0, 5}, dir + "/left.tokens");
  step = mt::StepInputs(lm, 0).next(left);
  check(step["attention_mask"] == std::vector<int64_t>{0, 1, 1, 0, 1, 0}, "the left padding mask");
  check(step["targets"] == std::vector<int64_t>{mt::kIgnoredTarget, 2, 3, mt::kIgnoredTarget,
                                                mt::kIgnoredTarget, mt::kIgnoredTarget},
        "targets predicted at padding ignored");
  mt::TokenData middle = streamOf({1, 0, 2, 3}, dir + "/middle.tokens");
  mt::plan::Plan one = planOf({"input_ids", "attention_mask", "targets"}, {1, 3}, 50, 1);
  check(errorOf([&] { mt::StepInputs(one, 0).next(middle); })
                .find("sequence 0 of the batch has a token after padding after tokens "
                      "(position 2)") != std::string::npos,
        "padding between tokens refused");
  std::printf("padding: the mask 0 there, its targets and those predicted at it -100, left "
              "padding taken, padding between tokens refused\n");

  // A layer-major plan of two micro-batches takes both at once, suffixed by micro-batch.
  mt::plan::Plan split =
      planOf({"input_ids.0", "targets.0", "input_ids.1", "targets.1"}, {1, 3}, 50, 2);
  mt::TokenData stream = streamOf({1, 2, 3, 4, 5, 6, 7, 8}, dir + "/split.tokens");
  mt::StepInputs micro(split, -1);
  step = micro.next(stream);
  check(micro.layerMajor() && step.size() == 4, "layer-major inputs");
  check(step["input_ids.0"] == std::vector<int64_t>{1, 2, 3} &&
            step["input_ids.1"] == std::vector<int64_t>{5, 6, 7} &&
            step["targets.1"] == std::vector<int64_t>{6, 7, 8},
        "micro-batches in stream order");
  std::printf("layer-major: every micro-batch in one run, in stream order\n");

  // A test graph's inputs of other names each take the stream's next tokens.
  mt::plan::Plan graph = planOf({"a", "b"}, {2, 2}, 0, 1);
  mt::TokenData tokens = streamOf({1, 2, 3, 4, 5, 6, 7, 8, 9}, dir + "/graph.tokens");
  step = mt::StepInputs(graph, -1).next(tokens);
  check(step["a"] == std::vector<int64_t>{1, 2, 3, 4} &&
            step["b"] == std::vector<int64_t>{6, 7, 8, 9},
        "a test graph's inputs");
  std::printf("a test graph: each input the stream's next tokens\n");

  // Beyond the vocabulary, a pad token on a model without a mask, and no token input.
  mt::TokenData big = streamOf({1, 2, 3, 99, 5, 6, 7, 8}, dir + "/big.tokens");
  std::string error = errorOf([&] { packed.next(big); });
  check(error.find("token 99 at position 3 is not below the vocabulary size 50") !=
            std::string::npos,
        "a token beyond the vocabulary: " + error);
  mt::plan::Plan noMask = planOf({"input_ids", "targets"}, {2, 3}, 50, 1);
  check(errorOf([&] {
          mt::StepInputs(noMask, 0);
        }).find("needs a model exported with an attention_mask") != std::string::npos,
        "--pad-token-id without a mask");
  check(errorOf([&] { mt::StepInputs(lm, 50); }).find("is not below the vocabulary size 50") !=
            std::string::npos,
        "a pad token beyond the vocabulary");
  mt::plan::Plan none = planOf({"x"}, {6}, 0, 1);
  check(errorOf([&] { mt::StepInputs(none, -1); }) ==
            "the plan has no [batch, sequence] token input",
        "no token input");
  // The whole file is checked before any work: a bad token however late, and a file shorter
  // than one run.
  std::vector<uint16_t> late(300000, 7);
  late[250001] = 60;
  late[260000] = 70;
  mt::TokenData lateBad = streamOf(late, dir + "/late.tokens");
  check(errorOf([&] {
          packed.checkData(lateBad);
        }).find("token 60 at position 250001 is not below the vocabulary size 50") !=
            std::string::npos,
        "the first bad token of a long file");
  mt::TokenData shortData = streamOf({1, 2, 3, 4, 5, 6, 7}, dir + "/short.tokens");
  check(errorOf([&] { packed.checkData(shortData); }) ==
            "the data holds 7 tokens, fewer than one run of the step takes: 2 sequences of 3 "
            "tokens and the next one, 8",
        "a file shorter than one batch");
  packed.checkData(data);
  std::printf("data: a bad token anywhere and a file shorter than a batch are refused up "
              "front\n");

  std::printf("errors: a token beyond the vocabulary, a pad token without a mask or beyond the "
              "vocabulary, no token input\n");
  return 0;
}
