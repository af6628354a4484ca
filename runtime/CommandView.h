// A plan command as its kernel reads it, on any backend: attributes by name and counts,
// with errors that name the op and its location (thrown as the backend's Error type).
#ifndef MT_RUNTIME_COMMANDVIEW_H
#define MT_RUNTIME_COMMANDVIEW_H

#include "plan/plan.pb.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mt {

template <typename Error>
struct CommandView {
  const plan::Command &command;

  [[noreturn]] void fail(const std::string &message) const {
    std::string where = command.location().empty() ? "" : " at " + command.location();
    throw Error(command.op() + where + ": " + message);
  }

  /// Fails unless there are minOperands..maxOperands operands and minResults..maxResults
  /// results.
  void expectCounts(size_t operandCount, size_t minOperands, size_t maxOperands, size_t resultCount,
                    size_t minResults, size_t maxResults) const {
    auto range = [](size_t least, size_t most) {
      return std::to_string(least) + (most != least ? " to " + std::to_string(most) : "");
    };
    if (operandCount < minOperands || operandCount > maxOperands)
      fail("takes " + range(minOperands, maxOperands) + " operands, got " +
           std::to_string(operandCount));
    if (resultCount < minResults || resultCount > maxResults)
      fail("has " + range(minResults, maxResults) + " results, got " + std::to_string(resultCount));
  }

  const plan::Attribute *find(const char *name) const {
    auto it = command.attributes().find(name);
    return it == command.attributes().end() ? nullptr : &it->second;
  }
  const plan::Attribute &require(const char *name, plan::Attribute::ValueCase kind,
                                 const char *what) const {
    const plan::Attribute *attribute = find(name);
    if (!attribute)
      fail(std::string("missing attribute '") + name + "'");
    if (attribute->value_case() != kind)
      fail(std::string("attribute '") + name + "' must be " + what);
    return *attribute;
  }
  int64_t attrInt(const char *name) const {
    return require(name, plan::Attribute::kI, "an integer").i();
  }
  /// An integer attribute is read as a number too.
  double attrFloat(const char *name) const {
    const plan::Attribute *attribute = find(name);
    if (attribute && attribute->value_case() == plan::Attribute::kI)
      return static_cast<double>(attribute->i());
    return require(name, plan::Attribute::kF, "a number").f();
  }
  std::string attrString(const char *name, const std::string &fallback) const {
    return find(name) ? require(name, plan::Attribute::kS, "a string").s() : fallback;
  }
  std::vector<int64_t> attrInts(const char *name) const {
    const auto &values = require(name, plan::Attribute::kInts, "an integer list").ints().values();
    return {values.begin(), values.end()};
  }
  bool flag(const char *name) const {
    const plan::Attribute *attribute = find(name);
    return attribute && attribute->value_case() == plan::Attribute::kFlag && attribute->flag();
  }
  /// An axis attribute normalized against `rank` (negative counts from the back).
  int64_t axis(const char *name, size_t rank) const {
    int64_t axis = attrInt(name);
    int64_t r = static_cast<int64_t>(rank);
    if (axis < -r || axis >= std::max<int64_t>(r, 1))
      fail(std::string("attribute '") + name + "' = " + std::to_string(axis) +
           " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + r : axis;
  }
};

} // namespace mt

#endif // MT_RUNTIME_COMMANDVIEW_H
