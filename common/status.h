// Status and Result<T>: the error values that cross module seams.
//
// A Status is OK or carries a code and a human-readable message naming what was wrong
// (which field, what was expected). Result<T> holds either a value or a non-OK Status.
// Exceptions are reserved for programming errors; anything caused by input is a Status.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace pagoda {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kOutOfRange,
  kResourceExhausted,
  kFailedPrecondition,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  kAborted,
  kUnauthenticated,
};

const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;
  // Returns a copy whose message is "prefix: message" (OK stays OK).
  Status WithPrefix(const std::string& prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}

// Holds a T or a non-OK Status. Accessing value() of an error is a programming error.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace pagoda

#define PAGODA_CONCAT_INNER(a, b) a##b
#define PAGODA_CONCAT(a, b) PAGODA_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define PAGODA_RETURN_IF_ERROR(expr)         \
  do {                                       \
    ::pagoda::Status _pagoda_st = (expr);    \
    if (!_pagoda_st.ok()) return _pagoda_st; \
  } while (0)

// `PAGODA_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a Result or returns its Status.
#define PAGODA_ASSIGN_OR_RETURN(lhs, expr)                 \
  auto PAGODA_CONCAT(_pagoda_res_, __LINE__) = (expr);     \
  if (!PAGODA_CONCAT(_pagoda_res_, __LINE__).ok())         \
    return PAGODA_CONCAT(_pagoda_res_, __LINE__).status(); \
  lhs = std::move(PAGODA_CONCAT(_pagoda_res_, __LINE__)).value()
