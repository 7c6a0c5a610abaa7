// The state of one render: variable scopes, call arguments, and the Context that enforces the
// render limits (steps, loop iterations, string and list sizes, bytes built, call depth).
// Internal to the renderer.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/chat/jinja.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

// Variables of one block level. A for-loop iteration and a macro call each get a fresh scope
// (what they set stays inside); if / with-less blocks write to the enclosing one.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Find(std::string_view name) const;  // here, then in the parents
  void Set(std::string_view name, Value v);        // here
  // Starts `names` undefined here (jinja2's frame-local names, model/chat/jinja_scopes.h).
  void SetMissing(const std::vector<std::string>& names);
};
using ScopePtr = std::shared_ptr<Scope>;

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Binds `args` to a Python signature `params`; the first `required` are mandatory. Missing
// optional parameters are nullopt. Errors name the function: too many arguments, an unknown or
// repeated keyword, a missing argument.
Result<std::vector<std::optional<Value>>> BindArgs(std::string_view fn, const Args& args,
                                                   std::initializer_list<std::string_view> params,
                                                   size_t required = 0);

// Steps charged per dict entry built (hashing and indexing cost more than a list item).
inline constexpr uint64_t kDictEntryWork = 16;

class Context {
 public:
  explicit Context(const RenderOptions& options);
  ~Context();  // empties the objects created (breaks reference cycles and long chains)

  const RenderOptions& options() const { return options_; }
  const CivilTime& now() const { return now_; }

  Status Step() { return Work(1); }        // one expression or statement evaluated
  Status Work(uint64_t units);             // `units` steps' worth (items copied, compared)
  Status Iteration();                      // one loop iteration
  Status CheckStringSize(uint64_t bytes);  // a string about to be built
  Status CheckListSize(uint64_t items);    // a list about to be built
  Status Built(uint64_t bytes);            // a string of `bytes` was built
  Status EnterCall();                      // macro / caller nesting
  void LeaveCall() { --call_depth_; }
  // A namespace() or loop object; its attributes are emptied when the render ends.
  ObjectPtr NewObject(Object::Kind kind);

  bool error_located = false;  // the first failing statement added its line to the error

 private:
  const RenderOptions& options_;
  CivilTime now_;
  std::chrono::steady_clock::time_point deadline_;
  int64_t next_clock_check_ = 0;
  int64_t steps_ = 0, iterations_ = 0, built_bytes_ = 0;
  int call_depth_ = 0;
  std::vector<ObjectPtr> objects_;
};

}  // namespace pagoda::jinja
