// $ref (local JSON pointers, compiled once into named rules; left recursion refused) and the
// flattening of allOf / $ref into a conjunction.
#include <algorithm>
#include <cctype>
#include <string>

#include "scheduler/grammar/json_schema_internal.h"

namespace pagoda::grammar::schema {
namespace {

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// One JSON pointer step: a member of an object or an element of an array.
const Json* PointerStep(const Json& node, const std::string& token) {
  if (node.is_object()) {
    auto it = node.find(token);
    return it == node.end() ? nullptr : &*it;
  }
  if (!node.is_array() || token.empty() || token.size() > 9 ||
      token.find_first_not_of("0123456789") != std::string::npos) {
    return nullptr;
  }
  const size_t index = std::stoul(token);
  return index < node.size() ? &node[index] : nullptr;
}

}  // namespace

Result<std::string> Compiler::VisitRef(const std::string& ref, const std::string& pointer,
                                       int depth) {
  if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) {
    if (std::find(leading_refs_.begin(), leading_refs_.end(), ref) != leading_refs_.end()) {
      return InvalidArgument("$ref '" + ref + "' at " + (pointer.empty() ? "/" : pointer) +
                             " comes back to itself before any input (left recursion)");
    }
    return it->second;
  }
  PAGODA_ASSIGN_OR_RETURN(const auto target, ResolveRef(ref, pointer));
  const size_t slash = target.second.rfind('/');
  const std::string name =
      rules_.Reserve(slash == std::string::npos ? "ref" : target.second.substr(slash + 1));
  ref_rules_[ref] = name;
  leading_refs_.push_back(ref);
  Result<std::string> body = Visit(*target.first, target.second, name, depth + 1);
  leading_refs_.pop_back();
  if (!body.ok()) {
    ref_rules_.erase(ref);  // the reserved rule goes with the caller's Rollback
    return body.status();
  }
  rules_.Define(name, *body);
  return name;
}

Result<std::pair<const Json*, std::string>> Compiler::ResolveRef(const std::string& ref,
                                                                 const std::string& pointer) const {
  const std::string where = "$ref '" + ref + "' at " + (pointer.empty() ? "/" : pointer);
  if (ref.empty() || ref[0] != '#') {
    return InvalidArgument(where + ": only local references ('#/$defs/...') are supported");
  }
  const std::string fragment = PercentDecode(std::string_view(ref).substr(1));
  if (!fragment.empty() && fragment[0] != '/') {
    return InvalidArgument(where + ": anchors are not supported, only JSON pointers");
  }
  const Json* node = &root_;
  for (size_t start = 1; start <= fragment.size() && node != nullptr;) {
    size_t end = fragment.find('/', start);
    if (end == std::string::npos) end = fragment.size();
    std::string token = fragment.substr(start, end - start);
    for (size_t p = 0; (p = token.find('~', p)) != std::string::npos; ++p) {
      if (p + 1 < token.size() && (token[p + 1] == '0' || token[p + 1] == '1')) {
        token.replace(p, 2, token[p + 1] == '0' ? "~" : "/");
      }
    }
    node = PointerStep(*node, token);
    start = end + 1;
  }
  if (node == nullptr) return InvalidArgument(where + ": nothing at that pointer");
  return std::make_pair(node, fragment);
}

Status Compiler::Flatten(const Json& schema, const std::string& pointer, int depth, Conj& out) {
  PAGODA_RETURN_IF_ERROR(Step(pointer, depth));
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return Status::Ok();
    return Unsatisfiable("the schema at " + (pointer.empty() ? "/" : pointer) + " is false");
  }
  if (!schema.is_object()) {
    return InvalidArgument("the schema at " + (pointer.empty() ? "/" : pointer) +
                           " must be an object or a boolean");
  }
  for (const Part& p : out) {
    if (p.schema == &schema) return Status::Ok();  // already in, with what it brings
  }
  PAGODA_RETURN_IF_ERROR(CheckKeywords(Part{&schema, pointer}));
  out.push_back(Part{&schema, pointer});
  if (out.size() > limits_.max_alternatives) {
    return InvalidArgument("allOf / $ref at " + (pointer.empty() ? "/" : pointer) +
                           " combine more than " + std::to_string(limits_.max_alternatives) +
                           " schemas (max_alternatives)");
  }
  if (auto it = schema.find("$ref"); it != schema.end()) {
    if (!it->is_string()) return InvalidArgument(At("$ref", pointer) + " must be a string");
    PAGODA_ASSIGN_OR_RETURN(const auto target, ResolveRef(it->get<std::string>(), pointer));
    PAGODA_RETURN_IF_ERROR(Flatten(*target.first, target.second, depth + 1, out));
  }
  if (auto it = schema.find("allOf"); it != schema.end()) {
    if (!it->is_array() || it->empty()) {
      return InvalidArgument(At("allOf", pointer) + " must be a non-empty array");
    }
    const std::string base = Child(pointer, "allOf");
    for (size_t i = 0; i < it->size(); ++i) {
      PAGODA_RETURN_IF_ERROR(Flatten((*it)[i], Child(base, std::to_string(i)), depth + 1, out));
    }
  }
  return Status::Ok();
}

}  // namespace pagoda::grammar::schema
