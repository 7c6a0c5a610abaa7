#include "model/chat/jinja_context.h"

#include <algorithm>
#include <ctime>

namespace pagoda::jinja {
namespace {

CivilTime LocalNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
}

Status LimitError(const std::string& what, int64_t limit) {
  return ResourceExhausted("chat template exceeded the limit of " + std::to_string(limit) + " " +
                           what);
}

}  // namespace

const Value* Scope::Find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (const auto& [k, v] : s->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::Set(std::string_view name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(v));
}

void Scope::SetMissing(const std::vector<std::string>& names) {
  for (const std::string& n : names) Set(n, Value::MakeUndefined("'" + n + "' is undefined"));
}

Result<std::vector<std::optional<Value>>> BindArgs(std::string_view fn, const Args& args,
                                                   std::initializer_list<std::string_view> params,
                                                   size_t required) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.positional.size() > params.size()) {
    return InvalidArgument(std::string(fn) + "() takes at most " + std::to_string(params.size()) +
                           " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++i;
    }
    if (i == params.size()) {
      return InvalidArgument(std::string(fn) + "() got an unexpected keyword argument '" + key +
                             "'");
    }
    if (out[i].has_value()) {
      return InvalidArgument(std::string(fn) + "() got multiple values for argument '" + key + "'");
    }
    out[i] = value;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!out[i].has_value()) {
      return InvalidArgument(std::string(fn) + "() missing required argument '" +
                             std::string(params.begin()[i]) + "'");
    }
  }
  return out;
}

Context::Context(const RenderOptions& options)
    : options_(options),
      now_(options.now ? *options.now : LocalNow()),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::milliseconds(options.limits.max_milliseconds)) {}

Context::~Context() {
  for (const ObjectPtr& o : objects_) o->attrs = Dict();
}

Status Context::Work(uint64_t units) {
  steps_ += static_cast<int64_t>(std::min<uint64_t>(units, INT64_MAX / 4));
  if (steps_ > options_.limits.max_steps) {
    return LimitError("evaluation steps", options_.limits.max_steps);
  }
  if (steps_ >= next_clock_check_) {  // the clock is read every 4096 steps
    next_clock_check_ = steps_ + 4096;
    if (std::chrono::steady_clock::now() > deadline_) {
      return LimitError("milliseconds of rendering time", options_.limits.max_milliseconds);
    }
  }
  return Status::Ok();
}

Status Context::Iteration() {
  if (++iterations_ > options_.limits.max_loop_iterations) {
    return LimitError("loop iterations", options_.limits.max_loop_iterations);
  }
  return Status::Ok();
}

Status Context::CheckStringSize(uint64_t bytes) {
  if (bytes > static_cast<uint64_t>(options_.limits.max_output_bytes)) {
    return LimitError("bytes of output (or of one string)", options_.limits.max_output_bytes);
  }
  return Status::Ok();
}

Status Context::CheckListSize(uint64_t items) {
  if (items > static_cast<uint64_t>(options_.limits.max_loop_iterations)) {
    return LimitError("items in one list", options_.limits.max_loop_iterations);
  }
  return Status::Ok();
}

Status Context::Built(uint64_t bytes) {
  PAGODA_RETURN_IF_ERROR(CheckStringSize(bytes));
  built_bytes_ += static_cast<int64_t>(bytes);
  if (built_bytes_ > options_.limits.max_total_bytes) {
    return LimitError("bytes of strings built", options_.limits.max_total_bytes);
  }
  return Status::Ok();
}

Status Context::EnterCall() {
  if (call_depth_ >= options_.limits.max_call_depth) {
    return LimitError("nested macro calls (recursion depth)", options_.limits.max_call_depth);
  }
  ++call_depth_;
  return Status::Ok();
}

ObjectPtr Context::NewObject(Object::Kind kind) {
  auto o = std::make_shared<Object>();
  o->kind = kind;
  objects_.push_back(o);
  return o;
}

}  // namespace pagoda::jinja
