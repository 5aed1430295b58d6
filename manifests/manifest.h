// The desired fleet as the manifests repo declares it (contract v1 of
// DESIGN.md), after loading and validation.
//
// Plain values only: the planner expands these into resources. Paths are
// resolved: `~` expanded, relative paths made absolute against the repo root.
// That applies to paths on the controller (ssh identity and known_hosts, the
// state path, recipe files). Paths on a node (NodeSpec hf_cache/sysfs/dev,
// StoreSpec::path, recipe mounts) are kept as written: absolute, or `~/...`
// for the node user's home, which only the node knows; whoever runs the
// command on the node expands it there.
#ifndef FLEET_MANIFESTS_MANIFEST_H_
#define FLEET_MANIFESTS_MANIFEST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "manifests/diagnostic.h"

namespace fleet {

struct SshSettings {
  std::string user;         // empty: the controller's user
  std::string identity;     // resolved path; empty: ssh-agent only
  std::string known_hosts;  // resolved path; default ~/.ssh/known_hosts
  int port = 22;
  int connect_timeout_s = 10;
  // Where the settings in force were written (the node's own ssh block, else
  // the top-level one); empty (line 0) for the defaults.
  SourceLoc loc;
};

struct PowerController {
  bool present = false;
  std::string kind;       // "home-assistant"
  std::string url;        // e.g. https://ha.lan:8123
  std::string token_env;  // name of the environment variable holding the token
  // An https url's trust: ca_file (resolved path on the controller) names the
  // CA bundle that signed the controller's certificate; insecure skips the
  // check (explicit only). Neither: the system's CAs.
  std::string ca_file;
  bool insecure = false;
  SourceLoc loc;
};

// The Hugging Face Hub fleet asks for a model's files and sizes at plan
// time, and that the nodes' downloads use (the controller's HF_ENDPOINT
// names it; huggingface.co by default).
struct HubSettings {
  bool present = false;
  std::string token_env;  // name of the environment variable holding the token; "" none
  std::string cli;        // absolute path of the hub CLI on the nodes; "" search for it
  SourceLoc loc;
};

struct NodePower {
  bool present = false;
  std::string switch_entity;  // e.g. switch.dgx1
  // "on" | "off" | "on_demand". on_demand: apply leaves the node's power as
  // it finds it; a request through a gateway with `wake` powers it on
  // (`fleet watch --heal --wake-listen`), idle_off and schedules power it off.
  std::string state = "on";
  // idle_off (on_demand only): power the node off after its models had no
  // request through a gateway for this long; 0: never by idleness.
  int idle_off_s = 0;
  // watts: what the node draws while on, for the energy figures; 0: unknown.
  double watts = 0;
  int boot_timeout_s = 600;      // power on: how long to wait for SSH
  int shutdown_timeout_s = 300;  // power off: how long to wait for SSH to stop
  // Power off: how long the OS may still be halting (unmounting disks) after
  // its SSH stopped answering, before the switch cuts its power.
  int halt_wait_s = 30;
  SourceLoc loc;
};

// One window of `schedule.up`: on the days of `days` (bit 0 Monday ... bit
// 6 Sunday) from start_min to end_min, minutes after midnight in the
// schedule's time zone. end_min <= start_min: the window runs past
// midnight into the next day (a night shift), from a day of `days`.
struct ScheduleWindow {
  unsigned days = 0;
  int start_min = 0;
  int end_min = 0;
  auto operator<=>(const ScheduleWindow&) const = default;
};

// `schedule: {up: "Mon-Fri 08:00-20:00", tz: Europe/Berlin}`: when a
// deployment or a node is up ahead of demand (manifests/power_policy.h
// reads it). Outside its windows it is down unless a request wakes it.
struct UpSchedule {
  bool present = false;
  std::string up;  // as written
  std::string tz;  // an IANA zone name; "UTC" by default
  std::vector<ScheduleWindow> windows;
  SourceLoc loc;
};

struct NodeSpec {
  std::string name;
  std::string address;   // host, IP or "local"
  SshSettings ssh;       // fleet ssh block merged with the node's overrides
  std::string hostname;  // what the node must report; empty: not checked
  NodePower power;
  std::string container_cli = "docker";  // "docker" | "podman"
  std::string display_ram = "default";   // "default" | "unlocked"
  // display_manager: stop. The display manager's unit that holds the DRM
  // device is stopped for a display RAM reload and started again after the
  // restore; false (absent): such a reload is refused, naming the unit.
  bool display_manager_stop = false;
  std::string hf_cache;        // paths.hf_cache; default ~/.cache/huggingface/hub
  std::string sysfs = "/sys";  // paths.sysfs
  std::string dev = "/dev";    // paths.dev
  std::string poweroff_command = "sudo -n systemctl poweroff";
  // fabric: {address, interface}: the node's address on the fabric between
  // nodes (RoCE); empty: probed from sysfs infiniband.
  std::string fabric_address;
  std::string fabric_interface;
  // schedule (power: on_demand only): the windows the node, and every serve
  // on it, is up in ahead of demand; at a window's end it goes down as idle
  // off takes it down. Absent: none.
  UpSchedule schedule;
  SourceLoc loc;
};

struct StoreSpec {
  std::string name;
  std::string path;
  std::vector<std::string> nodes;
  SourceLoc loc;
};

struct ImageSpec {
  std::string name;
  std::string ref;     // repo@sha256:<64 hex> (or a tag when allow_floating)
  std::string source;  // "registry" | "node:<name>" | "peers"
  bool allow_floating = false;
  std::vector<std::string> nodes;  // extra nodes to stage on
  SourceLoc loc;
};

struct ModelSpec {
  std::string name;
  std::string repo;      // org/name on the hub
  std::string revision;  // 40 hex (or a branch when allow_floating)
  std::string store;     // "local" | a StoreSpec name
  std::string source;    // "hub" | "node:<name>" | "store:<name>"
  bool allow_floating = false;
  std::vector<std::string> nodes;
  // "sizes": sizes and safetensors headers; "deep": also the sha256 of every
  // blob against its name, once per staging.
  std::string verify = "sizes";
  // Not a manifest key: set by `--verify=deep` to hash every blob now, even
  // when a deep verify is already recorded.
  bool verify_now = false;
  SourceLoc loc;
};

struct RecipeMount {
  std::string host;
  std::string container;
  bool read_only = true;
};

// A serving recipe (one TOML file). Unknown keys are errors.
struct Recipe {
  std::string file;  // resolved path
  std::string model;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  // NAME -> the controller's environment variable its value is read from at
  // apply (NAME = {from_env = "VAR"}): how a secret reaches a serve without
  // being written in the manifests repo, a plan or the state.
  std::map<std::string, std::string> env_from;
  std::vector<std::string> devices;
  std::string memory_limit;
  std::string cpus;
  std::string shm_size;
  std::vector<RecipeMount> extra_mounts;
  // The GPUs the serve gets: gpus = "all" or a count ("2"), or gpu_ids
  // (gpus = ["0", "1"]); both empty: none (beyond `devices`).
  std::string gpus;
  std::vector<std::string> gpu_ids;
  std::string ipc;                             // "" (the engine's default) or "host", ...
  std::map<std::string, std::string> ulimits;  // memlock -> "-1", stack -> "67108864"
};

struct HealthCheck {
  std::string path = "/health";
  int timeout_s = 1800;
  // health.grace: how many watch rounds in a row the health URL may fail
  // before the serve counts as unhealthy (RestartPolicy::on "unhealthy").
  // A positive count, 1..1000.
  int grace_rounds = 2;
  // health.busy_grace: how long a health probe that times out (no answer
  // within its 5 s) while the container runs counts as busy, not unhealthy:
  // an engine tokenizing a 500K-token prompt answers nothing meanwhile. 0
  // (the default): a timeout is unhealthy like any failure.
  int busy_grace_s = 0;
  // health.prefill_tps: the serve's slowest prefill in prompt tokens/s, for
  // its smoke checks' wait for the first token (SmokeCheck::prefill_tps);
  // 0: not declared.
  double prefill_tps = 0;
  // health.request_timeout: how long one health request may take before it
  // counts as failed. The gateway's check of the serve waits this long
  // (HAProxy's `timeout check`), so an engine busy with a long prefill,
  // whose /health answers late, is not dropped for being slow; a serve
  // that is gone refuses the connection and is still dropped at once.
  // `fall` of that check is health.grace (grace_rounds) failed checks.
  int request_timeout_s = 5;
};

// What `fleet watch --heal` may do about a serve that went bad: the
// `restart` key of a deployment, over the `restart` key of the top-level
// `defaults` map, over the built-in values below (manifests/restart_policy.h
// reads it). `restart: never` at either level heals nothing, and wins over
// any map of the other level.
struct RestartPolicy {
  // restart: never: the serve is never healed (watch only reports it).
  bool never = false;
  // The causes a watch round may heal (each listed once, in this order):
  //   exit      the container exited or is gone;
  //   unhealthy the health URL failed for longer than health.grace rounds;
  //   smoke     a smoke check failed this round.
  std::vector<std::string> on = {"exit", "unhealthy", "smoke"};
  // The wait before healing a serve again after its previous heal; it
  // doubles with each heal in a row, up to max_backoff_s.
  // 0 < backoff_s <= max_backoff_s.
  int backoff_s = 30;
  int max_backoff_s = 600;
  // limit: "<limit> in <window>": at most `limit` heals (1..1000) of the serve
  // in any `window_s` seconds; past that, the serve is quarantined (left as
  // it is and reported) instead of healed.
  int limit = 5;
  int window_s = 3600;
  // Where the policy was declared: the deployment's `restart`, else that of
  // `defaults`; empty (line 0) for the built-in policy.
  SourceLoc loc;
};

// One smoke check of a deployment (`smoke:` list): a question to its
// OpenAI-compatible API and what the answer must be. Exactly one kind:
// `chat` with `expect` (a regex on the reply's content, "(?i)" for case
// insensitive), `tools: true` (a tool call must come back as valid JSON),
// `needle_tokens` (a long prompt with one fact hidden in it), or
// `fresh_context` (a prompt of random text never sent before, then the same
// again: the time to the first token without and with the prefix cache).
// Any kind may declare speed floors: a right answer under them fails.
struct SmokeCheck {
  std::string name;
  std::string chat;
  std::string expect;
  bool tools = false;
  int needle_tokens = 0;
  int fresh_context_tokens = 0;  // fresh_context: {tokens: N}
  int timeout_s = 120;
  int max_tokens = 0;         // 0: the check's default
  double min_decode_tps = 0;  // min_decode_tps: 40; 0: no floor
  int max_ttft_s = 0;         // max_ttft: 3s; 0: no floor
  // The slowest prefill to allow for before the first token, prompt
  // tokens/s: the check's own prefill_tps, else the deployment's
  // health.prefill_tps, else 0 (kDefaultPrefillTps at run time).
  double prefill_tps = 0;
  // stall: once the first token came, the longest silence before the reply
  // counts as stalled.
  int stall_s = 30;
  SourceLoc loc;
};

// promote: the gate before a new image, model revision or recipe takes the
// route (issue #47): the new serve is benched with `profile` and promoted
// only within `max_regression_pct` of the deployment's last good run and
// with at least the quality `min_quality` asks ("last": no lower share than
// the last good run; else a share in percent).
struct PromotePolicy {
  std::string profile = "quick";
  double max_regression_pct = 10;
  bool min_quality_last = true;  // min_quality: last
  double min_quality_pct = 0;    // min_quality: 90% (when not `last`)
  SourceLoc loc;
};

struct DeploymentSpec {
  std::string name;
  std::string recipe_path;  // as written, relative to the repo
  Recipe recipe;
  std::vector<std::string> nodes;
  std::string image;  // ImageSpec name
  std::string model;  // ModelSpec name
  std::string display_ram = "default";
  int port = 0;
  HealthCheck health;
  // What the serve needs of GPU memory (gpu_memory: 24GiB), checked against
  // the node's free memory at plan time; 0: not declared, not checked.
  uint64_t gpu_memory_bytes = 0;
  // A node runs one deployment at a time (a GB10 holds one large model);
  // shared: true on every deployment of a node lets them run together.
  bool shared = false;
  // fabric_env: true sets NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_GID_INDEX,
  // GLOO_SOCKET_IFNAME, UCX_NET_DEVICES, MASTER_ADDR and MASTER_PORT in every container of
  // the deployment from its nodes' fabric facts (the recipe's own env wins);
  // see providers/deployment/deployment_fabric.h.
  bool fabric_env = false;
  // Run after health in apply, and by `fleet check` / `fleet watch`.
  std::vector<SmokeCheck> smoke;
  // The resolved restart policy (built-in, then defaults.restart, then the
  // deployment's own restart keys) for `fleet watch --heal`.
  RestartPolicy restart;
  // The model name clients ask a gateway for (served_model:); empty: what
  // the recipe serves (--served-model-name, --model, else its model).
  std::string served_model;
  // gateway: false keeps the deployment out of every gateway's routes.
  bool routed = true;
  // max_request: the largest request body a gateway takes for this
  // deployment (a 1M-token chat is ~4 MB of JSON). A gateway routes on the
  // body's `model`, which OpenAI clients write after `messages`, so it
  // holds the whole body first: its buffer is the largest max_request of
  // the deployments it routes (providers/gateway/gateway_config.h).
  // 64 KiB to 128 MiB (HAProxy 2.6 refuses a buffer of 256 MB).
  uint64_t max_request_bytes = uint64_t{4} << 20;
  // schedule: the windows it is up in ahead of demand; absent: none.
  UpSchedule schedule;
  // promote: {...}; none: a new spec takes the route when it is healthy.
  std::optional<PromotePolicy> promote;
  SourceLoc loc;
};

// A gateway's `wake: {hold: 10m, listener: 10.0.0.1:9101}`: a request for
// a model whose serves all sleep goes to fleet's wake listener (`fleet
// watch --heal --wake-listen`), reached by the gateway at `listener`, which
// powers a node on and answers the request once the serve is up, within
// `hold`.
struct GatewayWake {
  bool present = false;
  int hold_s = 600;
  std::string listener_host;
  int listener_port = 0;
  SourceLoc loc;
};

// A gateway (`gateways:`): an HAProxy that fleet runs as a container on each
// of its nodes and configures from the deployments, so that clients reach
// every routed serve at one OpenAI endpoint, routed by the request's model
// (providers/gateway/gateway_provider.h).
struct GatewaySpec {
  std::string name;
  std::vector<std::string> nodes;
  std::string image;  // ImageSpec name: an HAProxy image (haproxy on PATH)
  int port = 0;
  // How long a reload lets the requests in flight on the old routes finish
  // (HAProxy's hard-stop-after) before a serve they went to is stopped.
  int drain_s = 60;
  // keys / keys_env: where the gateway's client API keys are, never in the
  // repo: a file on the controller (keys: ~/lab-keys.txt, absolute or ~,
  // outside the repo) or an environment variable (keys_env: LAB_KEYS).
  // Each line "NAME KEY MODEL[,MODEL...]" ("*": every model). Empty both:
  // the gateway is open. Read at plan time by the gateway provider
  // (providers/gateway/gateway_keys.h); only their SHA-256 digests reach
  // the plan, the state and the node.
  std::string keys_path;
  std::string keys_env;
  GatewayWake wake;
  SourceLoc loc;
};

// `sync:`: what `fleet watch --sync` applies from a new commit by itself.
// A plan with other actions waits for a person (`fleet apply`).
struct SyncSettings {
  // Of add (create), change (update), replace.
  std::vector<std::string> allow = {"add", "change", "replace"};
  // Also destroy resources and power nodes off.
  bool destroy = false;
  SourceLoc loc;  // the `sync` key; empty (line 0) when absent
};

struct StateSettings {
  std::string backend = "local";  // "local" | "postgres"
  std::string path;               // local: resolved; default <repo>/.fleet/state.json
  // postgres: the environment variable holding the libpq connection string
  // (never the string itself: it may hold a password) and the schema.
  std::string conn_env = "FLEET_STATE_PG";
  std::string schema = "fleet";
  SourceLoc loc;  // the `state` key; empty (line 0) when absent
};

struct Manifest {
  std::string root_dir;  // absolute path of the manifests repo
  int version = 1;
  std::string fleet;
  StateSettings state;
  SyncSettings sync;
  SshSettings ssh;
  PowerController power;
  HubSettings hub;
  // Ordered by name so output and plans are deterministic.
  std::map<std::string, NodeSpec> nodes;
  std::map<std::string, StoreSpec> stores;
  std::map<std::string, ImageSpec> images;
  std::map<std::string, ModelSpec> models;
  std::map<std::string, DeploymentSpec> deployments;
  std::map<std::string, GatewaySpec> gateways;
};

// Loads `<dir>/fleet.yaml` and every recipe it names, and validates them
// (schema, types, required fields, references, the TOML ordering trap).
// Never touches the network. Returns false when any error was found; all
// problems found are appended to `diags` (warnings too), each with
// file:line:column. `manifest` is filled as far as loading got.
bool LoadManifest(const std::string& dir, Manifest* manifest, Diagnostics* diags);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_MANIFEST_H_
