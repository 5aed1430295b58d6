// SharedWork: work that several steps of one apply need done once. A
// fan-out's chain copy is the case: every target's step needs the bytes,
// one pipelined stream carries them to all, so the first step to ask runs
// it and the others wait for it and read what it found for them.
#ifndef FLEET_SRC_SHARED_WORK_H_
#define FLEET_SRC_SHARED_WORK_H_

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace fleet {

class SharedWork {
 public:
  // Runs `work` unless a call with the same `key` ran it or runs it now
  // (then waits for that one); returns its result, the same object for
  // every caller. Thread-safe.
  template <class T>
  std::shared_ptr<const T> Once(const std::string& key, const std::function<T()>& work) {
    std::promise<std::shared_ptr<const void>> promise;
    std::shared_future<std::shared_ptr<const void>> result;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = runs_.find(key);
      if (it == runs_.end()) {
        it = runs_.emplace(key, promise.get_future().share()).first;
        mine = true;
      }
      result = it->second;
    }
    if (mine) promise.set_value(std::make_shared<const T>(work()));
    return std::static_pointer_cast<const T>(result.get());
  }

  // The result of `key`'s work when it has ended, else null (not started,
  // or running).
  template <class T>
  std::shared_ptr<const T> Peek(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(key);
    if (it == runs_.end() ||
        it->second.wait_for(std::chrono::seconds::zero()) != std::future_status::ready)
      return nullptr;
    return std::static_pointer_cast<const T>(it->second.get());
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_future<std::shared_ptr<const void>>> runs_;
};

}  // namespace fleet

#endif  // FLEET_SRC_SHARED_WORK_H_
