// Parses the graph signature torch's exporter writes as graph metadata, one line per input:
//   p_model_lm_head_weight: PARAMETER target='model.lm_head.weight'
//   b_model_rotary_emb_inv_freq: BUFFER target='model.rotary_emb.inv_freq' persistent=False
// and each node's FX origin, where a linear layer's folded weight transpose is found:
//   %linear : [...] = call_function[target=torch.ops.aten.linear.default](args = (%x, %p_w), ...)
// and the module path of each node, where a tied weight's other name is found, and the source
// line of each node, where a parameter folded into `c + weight` (Gemma's RMSNorm) is found.
#include "frontend/ExportSignature.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Regex.h"

#include <cctype>
#include <optional>

#include <google/protobuf/unknown_field_set.h>

namespace mt {

namespace {

constexpr llvm::StringLiteral kSignatureKey = "pkg.torch.export.ExportedProgram.graph_signature";
constexpr llvm::StringLiteral kFxNodeKey = "pkg.torch.onnx.fx_node";
constexpr llvm::StringLiteral kNameScopesKey = "pkg.torch.onnx.name_scopes";
constexpr llvm::StringLiteral kStackTraceKey = "pkg.torch.onnx.stack_trace";
constexpr llvm::StringLiteral kLinear = "call_function[target=torch.ops.aten.linear.default]";
/// GraphProto.metadata_props and NodeProto.metadata_props, from ONNX 1.16 (IR 10): newer
/// than the onnx.proto mt builds with, so they are read from the messages' unknown fields.
constexpr int kGraphMetadataField = 16, kNodeMetadataField = 9;

/// The value of metadata entry `key` in `message`'s field `field`, or "".
std::string metadataValue(const google::protobuf::Message &message, int field,
                          llvm::StringRef key) {
  const google::protobuf::UnknownFieldSet &unknown =
      message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &entry = unknown.field(i);
    if (entry.number() != field ||
        entry.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto pair;
    if (pair.ParseFromString(entry.length_delimited()) && pair.key() == key)
      return pair.value();
  }
  return "";
}

/// The module a node belongs to: name_scopes is ['', 'model', 'model.embed_tokens',
/// 'embedding'], and the module is the entry before the op's own ("" when there is none).
std::string moduleOf(const onnx::NodeProto &node) {
  llvm::SmallVector<llvm::StringRef> scopes;
  std::string text = metadataValue(node, kNodeMetadataField, kNameScopesKey);
  llvm::StringRef(text).trim("[]").split(scopes, ", ");
  if (scopes.size() < 2)
    return "";
  return scopes[scopes.size() - 2].trim("'").str();
}

/// The constant `c` of `c + self.<attribute>` or `self.<attribute>[.f()...] + c` in a line of
/// Python source, if the line has that form.
std::optional<double> addendOf(llvm::StringRef line, llvm::StringRef attribute) {
  const std::string number = "([0-9]+\\.?[0-9]*([eE][-+]?[0-9]+)?)";
  const std::string self = "self\\." + attribute.str() + "([.][A-Za-z_]+[(][^()]*[)])*";
  for (const auto &[pattern, group] :
       {std::pair{"(^|[^A-Za-z0-9_.])" + number + "[ ]*[+][ ]*" + self + "([^A-Za-z0-9_(]|$)", 2},
        std::pair{self + "[ ]*[+][ ]*" + number + "([^A-Za-z0-9_.]|$)", 2}}) {
    llvm::SmallVector<llvm::StringRef> groups;
    if (llvm::Regex(pattern).match(line, &groups)) {
      double addend;
      if (!groups[group].getAsDouble(addend))
        return addend;
    }
  }
  return std::nullopt;
}

} // namespace

ExportSignature readExportSignature(const onnx::GraphProto &graph) {
  ExportSignature signature;
  std::string text = metadataValue(graph, kGraphMetadataField, kSignatureKey);
  {
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(text).split(lines, '\n');
    for (llvm::StringRef line : lines) {
      auto [placeholder, rest] = line.trim().split(": ");
      auto [kind, attributes] = rest.split(' ');
      auto [before, target] = attributes.split("target='");
      target = target.take_until([](char c) { return c == '\''; });
      if (target.empty())
        continue;
      if (kind == "BUFFER")
        signature.buffers.insert(target);
      else if (kind == "PARAMETER") {
        signature.parameters[placeholder] = target.str();
        signature.parameterNames.insert(target);
      }
    }
  }
  if (signature.parameters.empty())
    return signature;
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers.insert(tensor.name());
  for (const onnx::NodeProto &node : graph.node()) {
    std::string module = moduleOf(node);
    if (module.empty())
      continue;
    std::string origin = metadataValue(node, kNodeMetadataField, kFxNodeKey);
    for (llvm::StringRef rest = origin; !rest.empty();) {
      size_t at = rest.find("%p_");
      if (at == llvm::StringRef::npos)
        break;
      rest = rest.drop_front(at + 1);
      llvm::StringRef placeholder =
          rest.take_while([](char c) { return std::isalnum(c) || c == '_'; });
      auto parameter = signature.parameters.find(placeholder);
      if (parameter == signature.parameters.end() || !initializers.contains(parameter->second))
        continue;
      // The module's own parameter of that kind, when only the tied one is in the graph.
      std::string own = module + "." + llvm::StringRef(parameter->second).rsplit('.').second.str();
      if (own != parameter->second && signature.parameterNames.contains(own) &&
          !initializers.contains(own))
        signature.tiedNames[own] = parameter->second;
    }
  }
  // MatMul(x, c) exported from linear(x, %p_w): c is w's transpose, folded by the exporter.
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() != "MatMul" || node.input_size() != 2)
      continue;
    std::string originText = metadataValue(node, kNodeMetadataField, kFxNodeKey);
    llvm::StringRef origin = originText;
    size_t call = origin.find(kLinear);
    if (call == llvm::StringRef::npos)
      continue;
    llvm::StringRef args = origin.drop_front(call + kLinear.size()).split("args = (").second;
    llvm::StringRef weight = args.split(", ").second.split(')').first.split(',').first.trim();
    auto parameter = signature.parameters.find(weight.drop_front(weight.starts_with("%")));
    if (parameter != signature.parameters.end() && node.input(1) != parameter->second)
      signature.transposedParameters[node.input(1)] = parameter->second;
  }
  // An initializer that no parameter names, used by a module whose own parameter no
  // initializer holds, on a source line adding a constant to that parameter: the exporter
  // folded `c + weight` into it. The module's parameters are its path plus one name.
  for (const onnx::NodeProto &node : graph.node()) {
    for (const std::string &input : node.input()) {
      if (!initializers.contains(input) || signature.isParameter(input) ||
          signature.buffers.contains(input))
        continue;
      std::string module = moduleOf(node);
      std::string trace = metadataValue(node, kNodeMetadataField, kStackTraceKey);
      llvm::StringRef line = llvm::StringRef(trace).rtrim().rsplit('\n').second.trim();
      if (module.empty() || line.empty())
        continue;
      for (const auto &name : signature.parameterNames) {
        llvm::StringRef attribute = name.getKey();
        if (!attribute.consume_front(module + ".") || attribute.contains('.') ||
            initializers.contains(name.getKey()))
          continue;
        if (std::optional<double> addend = addendOf(line, attribute)) {
          signature.offsetParameters[input] = {name.getKey().str(), *addend};
          break;
        }
      }
    }
  }
  return signature;
}

} // namespace mt
