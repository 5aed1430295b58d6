// `fleet watch --wake-listen ADDR:PORT` (issue #46): where a gateway with
// `wake` sends a request for a model whose serves all sleep (the `backup`
// server of its HAProxy backend, providers/gateway/gateway_config.h).
//
// A request wakes its model's deployment (wake_policy.h): under the state
// lock, as apply, the plan of that deployment with its nodes declared on
// (power on through the switch, read back; SSH; display RAM, image, model,
// serve, health, smoke), applied by the executor. One wake per node at a
// time: a request for a model whose wake runs waits on that wake. The
// request is answered by the serve once the wake ended well, within the
// gateway's wake.hold (a client's `Prefer: wait=N` waits less); else it gets
// an OpenAI-shaped 503 with Retry-After naming the cause ("waking dgx3 for
// qwen3.8: ~4 min"). A wake that failed is not tried again before its
// backoff (the deployment's restart.backoff, doubled per failure up to
// restart.max_backoff): one switch call per backoff, each request meanwhile
// a 503 naming the failure. fleet's own requests (its smoke checks carry
// the x-fleet-own header) never wake a node.
#ifndef FLEET_SRC_ENGINE_WAKE_LISTENER_H_
#define FLEET_SRC_ENGINE_WAKE_LISTENER_H_

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "src/clock.h"
#include "src/engine/wake_policy.h"
#include "src/status.h"

namespace fleet {

struct WakeListenerOptions {
  std::string dir;  // the manifests repo (read at each request: a new commit counts)
  // Each wake's event: {"event": "wake", "time", "address", "model",
  // "deployment", "nodes", "outcome": "woken"|"failed", "reason":
  // "request"|"schedule", "duration_s", "detail",
  // "parts": {"power_on_to_ssh_s", "ssh_to_ready_s"}} (a node's own wake:
  // "address": "node.N" and "node" instead of "model" and "deployment",
  // its ready the node's display RAM as declared); and each answered or
  // refused request: {"event": "wake_request", "time", "model",
  // "outcome": "answered"|"refused", "wait_s", "detail"}. Called from the
  // listener's threads, one call at a time.
  std::function<void(const nlohmann::json&)> on_event;
  std::function<void(const std::string&)> progress;  // the wake's apply lines; may be empty
  // Where the wakes, their backoff and the held requests read the time and
  // wait (GlobalOptions::clock); handed to each wake's apply. Never null.
  Clock* clock = RealClock();
};

// What WakeListener::Wake did: started a wake or joined the one running
// on a node of the target, or neither while the deployment's backoff holds.
struct WakeStart {
  bool running = false;       // a wake of the target runs now
  bool joined = false;        // it was running already
  std::string backoff_cause;  // !running: why the last wake failed
  int retry_s = 0;            // !running: when it may be tried again
};

class WakeListener {
 public:
  // Requests held at once (each waits up to wake.hold on a thread).
  static constexpr int kMaxHeld = 64;

  WakeListener();
  ~WakeListener();  // stops listening; a wake in flight finishes on its own thread
  WakeListener(const WakeListener&) = delete;
  WakeListener& operator=(const WakeListener&) = delete;

  // Binds `listen` ("ADDR:PORT"; "PORT" or ":PORT": loopback) and serves;
  // an empty `listen` serves nothing, and Wake still works.
  // REQUIRES: called once, before Wake.
  Status Start(const std::string& listen, WakeListenerOptions options);

  // Wakes `target` without a request (a schedule's window says up; a
  // target of WakeTargetForNode powers the node alone on), on the
  // same terms as a request would: one wake per node (a running one is
  // joined, and requests that come meanwhile join it), the backoff after a
  // failure. Returns at once; the wake's event says how it ended, with
  // `reason` ("schedule").
  WakeStart Wake(const WakeTarget& target, const std::string& reason);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_WAKE_LISTENER_H_
