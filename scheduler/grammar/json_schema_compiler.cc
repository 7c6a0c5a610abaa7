// JsonSchemaToGbnf: parsing, the visit of a schema, anyOf / oneOf, enum / const and the
// dispatch on types ($ref and allOf: json_schema_refs.cc; objects, arrays and scalars:
// json_schema_{objects,arrays,scalars}.cc).
#include <algorithm>
#include <string>
#include <unordered_set>

#include "common/json_depth.h"
#include "scheduler/grammar/gbnf_text.h"
#include "scheduler/grammar/json_schema_internal.h"

namespace pagoda::grammar {
namespace schema {
namespace {

// Finds where the JSON text stops being JSON (nlohmann's message), without exceptions.
class ErrorLocator : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    message = ex.what();
    return false;
  }
  std::string message = "invalid";
};

// Counts the members of each object while nlohmann's parser reads the text: an ordered_json
// object finds each new key by a linear search, so one with very many members would take
// quadratic time to parse. Stops at the first object beyond the limit.
class MemberCounter : public ErrorLocator {
 public:
  explicit MemberCounter(size_t limit) : limit_(limit) {}
  bool start_object(std::size_t) override {
    counts_.push_back(0);
    return true;
  }
  bool key(string_t&) override { return counts_.empty() || ++counts_.back() <= limit_; }
  bool end_object() override {
    if (!counts_.empty()) counts_.pop_back();
    return true;
  }
  bool too_many() const { return !counts_.empty() && counts_.back() > limit_; }

 private:
  const size_t limit_;
  std::vector<size_t> counts_;
};

// Rejects JSON nested far deeper than any schema within max_depth, before parsing it.
Status CheckNesting(std::string_view text, int32_t max_depth) {
  const int limit = 4 * max_depth + 16;
  const Status st = CheckJsonDepth(text, "the schema", limit);
  if (st.ok()) return st;
  return InvalidArgument(st.message() + " (max_depth " + std::to_string(max_depth) + ")");
}

unsigned TypeBitsOf(const Json& v) {
  if (v.is_object()) return kObjectBit;
  if (v.is_array()) return kArrayBit;
  if (v.is_string()) return kStringBit;
  if (v.is_boolean()) return kBooleanBit;
  if (v.is_null()) return kNullBit;
  if (v.is_number_integer()) return kNumberBit | kIntegerBit;
  const double d = v.get<double>();
  return d == static_cast<double>(static_cast<int64_t>(d)) ? kNumberBit | kIntegerBit : kNumberBit;
}

// Exactly the JSON value `v` followed by `sp`, with the same bounded whitespace between the
// tokens of arrays and objects as everywhere else.
std::string ConstGbnf(const Json& v, const std::string& sp) {
  const auto literal = [](const std::string& text) {
    Result<std::u32string> cps = gbnf::Utf8ToCodepoints(text);  // dump() writes valid UTF-8
    return gbnf::GbnfLiteral(cps.ok() ? *cps : std::u32string());
  };
  if (!v.is_object() && !v.is_array()) {
    return literal(v.dump(-1, ' ', false, Json::error_handler_t::replace)) + " " + sp;
  }
  std::string out = v.is_object() ? "\"{\" " + sp : "\"[\" " + sp;
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first) out += " \",\" " + sp;
    first = false;
    if (v.is_object()) {
      out += " " + literal(Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace)) +
             " " + sp + " \":\" " + sp;
    }
    out += " " + ConstGbnf(*it, sp);
  }
  return out + (v.is_object() ? " \"}\" " : " \"]\" ") + sp;
}

Result<unsigned> TypeNameBits(const Json& name, const std::string& pointer) {
  static constexpr std::pair<std::string_view, unsigned> kNames[] = {
      {"object", kObjectBit},   {"array", kArrayBit},
      {"string", kStringBit},   {"number", kNumberBit | kIntegerBit},
      {"integer", kIntegerBit}, {"boolean", kBooleanBit},
      {"null", kNullBit}};
  if (name.is_string()) {
    for (const auto& [n, bits] : kNames) {
      if (name.get_ref<const std::string&>() == n) return bits;
    }
  }
  return InvalidArgument(At("type", pointer) + ": unknown type " + name.dump());
}

}  // namespace

Compiler::Compiler(const Json& root, size_t text_bytes, const JsonSchemaOptions& opts,
                   const CompileLimits& limits)
    : root_(root),
      opts_(opts),
      limits_(limits),
      rules_(limits),
      step_budget_(4 * static_cast<int64_t>(text_bytes) + 100'000) {}

Result<std::string> Compiler::Compile() {
  Result<std::string> body = Visit(root_, "", "main", 0);
  if (!body.ok()) {
    if (body.status().code() == StatusCode::kFailedPrecondition) {
      return InvalidArgument("the schema allows no value: " + body.status().message());
    }
    return body.status();
  }
  return rules_.Render(*body);
}

Status Compiler::Step(const std::string& pointer, int depth) {
  if (depth > limits_.max_depth) {
    return InvalidArgument("the schema nests deeper than the limit of " +
                           std::to_string(limits_.max_depth) + " (max_depth) at " +
                           (pointer.empty() ? "/" : pointer));
  }
  if (++steps_ > step_budget_) {
    return InvalidArgument("the schema expands to more than " + std::to_string(step_budget_) +
                           " schema visits (4 per byte of schema): too many combinations of "
                           "allOf / anyOf / oneOf / $ref");
  }
  return rules_.status();
}

std::string Compiler::Alternatives(const std::string& hint, const std::vector<std::string>& alts) {
  std::vector<std::string> unique;
  std::unordered_set<std::string_view> seen;
  for (const std::string& a : alts) {
    if (seen.insert(a).second) unique.push_back(a);
  }
  if (unique.size() == 1) return unique[0];
  std::string body;
  for (const std::string& a : unique) body += (body.empty() ? "" : " | ") + a;
  return rules_.Add(hint, std::move(body));
}

Result<std::string> Compiler::Visit(const Json& schema, const std::string& pointer,
                                    const std::string& hint, int depth) {
  PAGODA_RETURN_IF_ERROR(Step(pointer, depth));
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return rules_.Use(gbnf::Primitive::kValue);
    return Unsatisfiable("the schema at " + (pointer.empty() ? "/" : pointer) + " is false");
  }
  if (!schema.is_object()) {
    return InvalidArgument("the schema at " + (pointer.empty() ? "/" : pointer) +
                           " must be an object or a boolean");
  }
  if (schema.contains("$ref") && OnlyAnnotations(schema, {"$ref"})) {
    PAGODA_RETURN_IF_ERROR(CheckKeywords(Part{&schema, pointer}));
    const Json& ref = schema.at("$ref");
    if (!ref.is_string()) return InvalidArgument(At("$ref", pointer) + " must be a string");
    return VisitRef(ref.get<std::string>(), pointer, depth);
  }
  Conj conj;
  PAGODA_RETURN_IF_ERROR(Flatten(schema, pointer, depth, conj));
  return VisitConj(std::move(conj), hint, depth);
}

Result<std::string> Compiler::VisitAll(
    const std::vector<std::pair<const Json*, std::string>>& schemas, const std::string& hint,
    int depth) {
  if (schemas.empty()) return rules_.Use(gbnf::Primitive::kValue);
  if (schemas.size() == 1) return Visit(*schemas[0].first, schemas[0].second, hint, depth);
  Conj conj;
  for (const auto& [s, pointer] : schemas)
    PAGODA_RETURN_IF_ERROR(Flatten(*s, pointer, depth, conj));
  return VisitConj(std::move(conj), hint, depth);
}

Result<std::string> Compiler::VisitConj(Conj conj, const std::string& hint, int depth) {
  steps_ += static_cast<int64_t>(conj.size());
  PAGODA_RETURN_IF_ERROR(Step(conj.empty() ? "" : conj[0].pointer, depth));
  if (conj.empty()) return rules_.Use(gbnf::Primitive::kValue);
  for (size_t i = 0; i < conj.size(); ++i) {
    const Json& s = *conj[i].schema;
    if ((s.contains("anyOf") && !conj[i].skip_any_of) ||
        (s.contains("oneOf") && !conj[i].skip_one_of)) {
      return Distribute(conj, i, hint, depth);
    }
  }
  PAGODA_ASSIGN_OR_RETURN(const unsigned types, AllowedTypes(conj));
  for (const Part& p : conj) {
    if (p.schema->contains("enum") || p.schema->contains("const")) {
      return VisitEnum(conj, types, hint);
    }
  }
  if ((types | kIntegerBit) == kAllTypes && ImpliedTypes(conj) == 0)
    return rules_.Use(gbnf::Primitive::kValue);
  std::vector<std::string> alts;
  Status last;
  for (unsigned bit = 1; bit < kAllTypes; bit <<= 1) {
    if ((types & bit) == 0) continue;
    const size_t mark = rules_.Mark();
    Result<std::string> r = VisitTyped(conj, bit, hint, depth);
    if (r.ok()) {
      alts.push_back(*r);
    } else if (r.status().code() == StatusCode::kFailedPrecondition) {
      last = r.status();  // this type is impossible; the others may do
      Rollback(mark);
    } else {
      return r.status();
    }
  }
  if (alts.empty()) return last;
  return Alternatives(hint, alts);
}

Result<std::string> Compiler::Distribute(const Conj& conj, size_t index, const std::string& hint,
                                         int depth) {
  const Part& part = conj[index];
  const bool any_of = part.schema->contains("anyOf") && !part.skip_any_of;
  const std::string key = any_of ? "anyOf" : "oneOf";
  const Json& list = part.schema->at(key);
  const std::string base = Child(part.pointer, key);
  if (!list.is_array() || list.empty()) {
    return InvalidArgument(At(key, part.pointer) + " must be a non-empty array");
  }
  if (list.size() > limits_.max_alternatives) {
    return InvalidArgument(At(key, part.pointer) + " has " + std::to_string(list.size()) +
                           " branches, more than the limit of " +
                           std::to_string(limits_.max_alternatives) + " (max_alternatives)");
  }
  const bool other_pending = any_of && part.schema->contains("oneOf") && !part.skip_one_of;
  const bool alone =
      conj.size() == 1 && !other_pending && OnlyAnnotations(*part.schema, {"anyOf", "oneOf"});
  std::vector<std::string> alts;
  Status last;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string pointer = Child(base, std::to_string(i));
    const std::string sub_hint = hint + "-" + std::to_string(i);
    const size_t mark = rules_.Mark();
    Result<std::string> r = std::string();
    if (alone) {
      r = Visit(list[i], pointer, sub_hint, depth + 1);
    } else {
      Conj c = conj;
      (any_of ? c[index].skip_any_of : c[index].skip_one_of) = true;
      const Status s = Flatten(list[i], pointer, depth + 1, c);
      r = s.ok() ? VisitConj(std::move(c), sub_hint, depth + 1) : Result<std::string>(s);
    }
    if (r.ok()) {
      alts.push_back(*r);
    } else if (r.status().code() == StatusCode::kFailedPrecondition) {
      last = r.status();  // an impossible branch is no branch
      Rollback(mark);
    } else {
      return r.status();
    }
  }
  if (alts.empty()) return last;
  return Alternatives(hint, alts);
}

void Compiler::Rollback(size_t mark) {
  rules_.Rollback(mark);
  std::erase_if(ref_rules_, [&](const auto& entry) { return !rules_.Has(entry.second); });
}

Result<unsigned> Compiler::AllowedTypes(const Conj& conj) const {
  unsigned types = kAllTypes;
  bool typed = false;
  for (const Part& p : conj) {
    auto it = p.schema->find("type");
    if (it == p.schema->end()) continue;
    typed = true;
    unsigned bits = 0;
    if (it->is_array()) {
      for (const Json& name : *it) {
        PAGODA_ASSIGN_OR_RETURN(const unsigned b, TypeNameBits(name, p.pointer));
        bits |= b;
      }
    } else {
      PAGODA_ASSIGN_OR_RETURN(bits, TypeNameBits(*it, p.pointer));
    }
    types &= bits;
  }
  if (!typed && ImpliedTypes(conj) != 0) types = ImpliedTypes(conj);
  if (types & kNumberBit) types &= ~unsigned{kIntegerBit};  // numbers include the integers
  if (types == 0) {
    return Unsatisfiable(At("type", conj[0].pointer) + ": the types have nothing in common");
  }
  return types;
}

Result<std::string> Compiler::VisitEnum(const Conj& conj, unsigned types, const std::string& hint) {
  std::vector<const Json*> values;
  bool first = true;
  for (const Part& p : conj) {
    for (const char* key : {"const", "enum"}) {
      auto it = p.schema->find(key);
      if (it == p.schema->end()) continue;
      if (std::string_view(key) == "enum" && (!it->is_array() || it->empty())) {
        return InvalidArgument(At(key, p.pointer) + " must be a non-empty array");
      }
      if (it->is_array() && std::string_view(key) == "enum" &&
          it->size() > limits_.max_alternatives) {
        return InvalidArgument(At(key, p.pointer) + " has " + std::to_string(it->size()) +
                               " values, more than the limit of " +
                               std::to_string(limits_.max_alternatives) + " (max_alternatives)");
      }
      std::vector<const Json*> list;
      if (std::string_view(key) == "const") {
        list.push_back(&*it);
      } else {
        for (const Json& v : *it) list.push_back(&v);
      }
      if (first) {
        values = std::move(list);
        first = false;
        continue;
      }
      std::erase_if(values, [&](const Json* v) {
        return std::none_of(list.begin(), list.end(), [&](const Json* w) { return *v == *w; });
      });
    }
  }
  std::vector<std::string> alts;
  const std::string sp = Space();
  for (const Json* v : values) {
    if ((TypeBitsOf(*v) & types) == 0) continue;
    alts.push_back(ConstGbnf(*v, sp));
  }
  if (alts.empty()) {
    return Unsatisfiable(At("enum", conj[0].pointer) + ": no value of the allowed types");
  }
  return Alternatives(hint, alts);
}

Result<std::string> Compiler::VisitTyped(const Conj& conj, unsigned type, const std::string& hint,
                                         int depth) {
  switch (type) {
    case kObjectBit:
      return VisitObject(conj, hint, depth);
    case kArrayBit:
      return VisitArray(conj, hint, depth);
    case kStringBit:
      return VisitString(conj);
    case kNumberBit:
      return VisitNumber(conj, /*integer_only=*/false);
    case kIntegerBit:
      return VisitNumber(conj, /*integer_only=*/true);
    case kBooleanBit:
      return rules_.Use(gbnf::Primitive::kBoolean);
    default:
      return rules_.Use(gbnf::Primitive::kNull);
  }
}

}  // namespace schema

Result<std::string> JsonSchemaToGbnf(std::string_view schema_json, const JsonSchemaOptions& opts,
                                     const CompileLimits& limits) {
  if (schema_json.size() > limits.max_output_bytes) {
    return InvalidArgument("the schema's " + std::to_string(schema_json.size()) +
                           " bytes exceed the limit of " + std::to_string(limits.max_output_bytes) +
                           " (max_output_bytes)");
  }
  PAGODA_RETURN_IF_ERROR(schema::CheckNesting(schema_json, limits.max_depth));
  schema::MemberCounter counter(limits.max_alternatives);
  schema::Json::sax_parse(schema_json, &counter);
  if (counter.too_many()) {
    return InvalidArgument("an object of the schema has more than " +
                           std::to_string(limits.max_alternatives) + " members (max_alternatives)");
  }
  const schema::Json root = schema::Json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    schema::ErrorLocator locator;
    schema::Json::sax_parse(schema_json, &locator);
    return InvalidArgument("the schema is not valid JSON: " + locator.message);
  }
  schema::Compiler compiler(root, schema_json.size(), opts, limits);
  return compiler.Compile();
}

}  // namespace pagoda::grammar
