// Status and Result<T>: how errors cross module boundaries in fleet.
//
// Modelled on leveldb::Status: no exceptions leave a module; a failed
// operation returns a Status whose message is meant for the operator (it names
// the node, the file or the command), never a stack trace.
#ifndef FLEET_SRC_STATUS_H_
#define FLEET_SRC_STATUS_H_

#include <optional>
#include <string>
#include <utility>

namespace fleet {

// The failures a caller branches on; every other failure is kFailed, told
// apart by nobody and read by the operator. A caller tests the code, never
// the message's text.
enum class StatusCode {
  kOk,
  kFailed,
  // The peer could not be reached at all (connection refused, timed out, no
  // route): for a node with a power switch that is a normal "off" state, not
  // a failure. Host-key and authentication failures are NOT this.
  kUnreachable,
  // Another process holds the state lock: worth waiting for, unlike a
  // store that cannot be read.
  kLockHeld,
  // What was to be created exists already (a container name the engine
  // still holds).
  kAlreadyExists,
  // What was asked for does not exist where it was looked up (a repo or
  // revision the Hub does not have, an entity the power switch's controller
  // does not know): asking again will not help, unlike kUnreachable.
  kNotFound,
};

class Status {
 public:
  Status() = default;  // OK
  static Status OK() { return Status(); }
  static Status Error(std::string message) {
    return WithCode(StatusCode::kFailed, std::move(message));
  }
  static Status Unreachable(std::string message) {
    return WithCode(StatusCode::kUnreachable, std::move(message));
  }
  static Status LockHeld(std::string message) {
    return WithCode(StatusCode::kLockHeld, std::move(message));
  }
  static Status AlreadyExists(std::string message) {
    return WithCode(StatusCode::kAlreadyExists, std::move(message));
  }
  static Status NotFound(std::string message) {
    return WithCode(StatusCode::kNotFound, std::move(message));
  }

  // The controller's own failure (no file descriptor left, its own network
  // down: manifests/own_fault.h): says nothing about the node, file or serve
  // it was about, so nothing may be healed, quarantined or counted as drift
  // on it.
  static Status OwnFault(std::string message) {
    Status s = Error(std::move(message));
    s.own_fault_ = true;
    return s;
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  bool unreachable() const { return code_ == StatusCode::kUnreachable; }
  bool lock_held() const { return code_ == StatusCode::kLockHeld; }
  bool already_exists() const { return code_ == StatusCode::kAlreadyExists; }
  bool not_found() const { return code_ == StatusCode::kNotFound; }
  bool own_fault() const { return own_fault_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status Prefixed(const std::string& context) const {
    return ok() ? *this : Reworded(context + ": " + message_);
  }
  // Returns a failure with `message` that keeps this one's code and
  // own-fault mark (a wrapper that says more must not turn a dark node into an
  // ordinary failure: later steps on it would each wait out a connect
  // timeout). Call it on the latest word on the node: a failure after
  // which the node answered again is not the one to keep.
  Status Reworded(std::string message) const {
    Status s = *this;
    if (s.code_ == StatusCode::kOk) s.code_ = StatusCode::kFailed;
    s.message_ = std::move(message);
    return s;
  }

 private:
  static Status WithCode(StatusCode code, std::string message) {
    Status s;
    s.code_ = code;
    s.message_ = std::move(message);
    return s;
  }

  StatusCode code_ = StatusCode::kOk;
  bool own_fault_ = false;
  std::string message_;
};

// A value or an error. REQUIRES: value() only when ok().
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  static Result Error(std::string message) { return Result(Status::Error(std::move(message))); }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }
  const T& operator*() const { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace fleet

#endif  // FLEET_SRC_STATUS_H_
