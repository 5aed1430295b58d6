// The FLEET_* environment settings that change how fleet works, read once
// when the process starts and handed down (StepContext::settings,
// DiffContext::settings) instead of being read with getenv where they are
// used: a test then states its settings in a struct rather than setenv,
// and no step sees a setting change halfway through an apply.
//
// Not here: names the manifests choose (a token's `token_env`, a
// deployment's secret variables, the state's connection variable), which
// are the user's secrets read where the manifest says; HOME, USER, TZDIR,
// NO_COLOR and SSH_AUTH_SOCK, which are the system's; FLEET_PROBE_PROC,
// read by the probe that runs on the node, not by fleet.
#ifndef FLEET_SRC_SETTINGS_H_
#define FLEET_SRC_SETTINGS_H_

#include <functional>
#include <string>

namespace fleet {

struct Settings {
  // FLEET_FABRIC: "off" sends every copy over SSH, never over the fabric.
  std::string fabric;
  // FLEET_FABRIC_CHAIN: "off" copies a fan-out to each target from the
  // source, not along a chain of targets.
  std::string fabric_chain;
  // FLEET_MODEL_DOWNLOAD: the command that downloads a model on a node
  // (a template; empty: the built-in one).
  std::string model_download;
  // FLEET_MODEL_COPY_STREAMS: parallel streams of a model copy (empty: the
  // default).
  std::string model_copy_streams;
  // FLEET_HEALTH_DARK_AFTER: how long a node may fail every connect during
  // a health wait (a duration; empty: 30 s).
  std::string health_dark_after;
  // FLEET_TEST_FABRIC_WRONG_KEY: integration tests only; non-empty: a
  // fabric copy's source presents a wrong key.
  std::string test_fabric_wrong_key;

  // The settings `lookup` returns (a getenv; null: unset, as "").
  static Settings From(const std::function<const char*(const char*)>& lookup);
  // The process's environment now.
  static Settings FromEnvironment();

  bool fabric_off() const { return fabric == "off"; }
  bool fabric_chain_off() const { return fabric_chain == "off"; }
};

// The process's settings, read from its environment on the first call and
// never again (thread-safe). The default of the contexts that were not
// handed settings (one built by hand in a test, a provider made without
// options), so that they still obey the environment fleet was started with.
const Settings& ProcessSettings();

}  // namespace fleet

#endif  // FLEET_SRC_SETTINGS_H_
