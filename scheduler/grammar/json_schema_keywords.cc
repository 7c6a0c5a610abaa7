// Which JSON schema keywords the compiler honours, ignores (annotations and unknown keywords,
// as JSON schema itself does) or refuses (they constrain values in ways a grammar cannot).
#include <algorithm>
#include <cmath>
#include <string_view>

#include "scheduler/grammar/json_schema_internal.h"

namespace pagoda::grammar::schema {
namespace {

constexpr std::string_view kHandled[] = {"type",
                                         "enum",
                                         "const",
                                         "properties",
                                         "required",
                                         "items",
                                         "prefixItems",
                                         "additionalItems",
                                         "additionalProperties",
                                         "minItems",
                                         "maxItems",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "format",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "$ref"};

constexpr std::string_view kRefused[] = {"not",
                                         "if",
                                         "patternProperties",
                                         "dependentRequired",
                                         "dependentSchemas",
                                         "dependencies",
                                         "uniqueItems",
                                         "multipleOf",
                                         "propertyNames",
                                         "minProperties",
                                         "maxProperties",
                                         "contains",
                                         "unevaluatedProperties",
                                         "unevaluatedItems",
                                         "$dynamicRef",
                                         "$recursiveRef"};

template <size_t N>
bool In(const std::string_view (&list)[N], std::string_view key) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

// A refused keyword whose value constrains nothing is accepted.
bool Trivial(std::string_view key, const Json& value, const Json& schema) {
  if (key == "uniqueItems") return value == false;
  if (key == "minProperties") return value == 0;
  if (key == "unevaluatedProperties" || key == "unevaluatedItems") return value == true;
  if (key == "if") return !schema.contains("then") && !schema.contains("else");
  if (key == "patternProperties" || key == "dependentRequired" || key == "dependentSchemas" ||
      key == "dependencies") {
    return value.is_object() && value.empty();
  }
  return false;
}

}  // namespace

Status Unsatisfiable(const std::string& what) { return FailedPrecondition(what); }

std::string At(const std::string& keyword, const std::string& pointer) {
  return "'" + keyword + "' at " + (pointer.empty() ? "/" : pointer);
}

std::string Child(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

Status CheckKeywords(const Part& part) {
  for (const auto& [key, value] : part.schema->items()) {
    if (In(kRefused, key) && !Trivial(key, value, *part.schema)) {
      return InvalidArgument("unsupported keyword " + At(key, part.pointer));
    }
  }
  return Status::Ok();
}

bool OnlyAnnotations(const Json& schema, std::initializer_list<std::string_view> except) {
  for (const auto& [key, value] : schema.items()) {
    if (std::find(except.begin(), except.end(), key) != except.end()) continue;
    if (In(kHandled, key) || (In(kRefused, key) && !Trivial(key, value, schema))) return false;
  }
  return true;
}

unsigned ImpliedTypes(const Conj& conj) {
  unsigned types = 0;
  for (const Part& part : conj) {
    for (const auto& [key, value] : part.schema->items()) {
      if (key == "properties" || key == "required" || key == "additionalProperties") {
        types |= kObjectBit;
      } else if (key == "items" || key == "prefixItems" || key == "additionalItems" ||
                 key == "minItems" || key == "maxItems") {
        types |= kArrayBit;
      } else if (key == "minLength" || key == "maxLength" || key == "pattern" || key == "format") {
        types |= kStringBit;
      } else if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" ||
                 key == "exclusiveMaximum") {
        types |= kNumberBit | kIntegerBit;
      }
    }
  }
  return types;
}

Result<int64_t> CountKeyword(const Json& value, const std::string& keyword,
                             const std::string& pointer) {
  constexpr int64_t kHuge = int64_t{1} << 62;
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    return v > static_cast<uint64_t>(kHuge) ? kHuge : static_cast<int64_t>(v);
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (v >= 0 && std::floor(v) == v) return v >= 4e18 ? kHuge : static_cast<int64_t>(v);
  }
  return InvalidArgument(At(keyword, pointer) + " must be a non-negative integer");
}

}  // namespace pagoda::grammar::schema
