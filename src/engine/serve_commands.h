// The commands that look at serves from the client's side: `fleet check`
// (the smoke checks now), `fleet watch` (plan + checks on a schedule, one
// JSON line per round) and `fleet report` (a watch log as one HTML page).
#ifndef FLEET_SRC_ENGINE_SERVE_COMMANDS_H_
#define FLEET_SRC_ENGINE_SERVE_COMMANDS_H_

#include <string>
#include <vector>

#include "src/engine/commands.h"

namespace fleet {

// Exit 0 when every check passed, 1 otherwise (or on an error).
int CmdCheck(const GlobalOptions& g, const std::vector<std::string>& addresses, bool json);

struct WatchOptions {
  int every_s = 120;
  std::string log_file;   // appends one JSON line per round
  std::string on_change;  // sh command; the change event (JSON) on its stdin
  // --on-change-env NAME (repeatable): the variables the command gets besides
  // PATH, HOME and LANG (on_change.h); never the watch's whole environment.
  std::vector<std::string> on_change_env;
  std::string report_file;  // rewritten after each round
  int rounds = 0;           // 0: until SIGINT/SIGTERM
  std::vector<std::string> addresses;
  // --heal: bring back what died, hung or garbles (heal_round.h), as each
  // deployment's restart policy allows, under the state lock.
  bool heal = false;
  std::string lock_timeout;  // --lock-timeout: how long a heal or sync waits for the lock
  // --heal-wait: how long a round waits for the heals it started before it
  // reports (a longer one goes on beside the next rounds);
  // --heal-parallelism: how many serves heal at once.
  std::string heal_wait = "30s";
  int heal_parallelism = 4;
  // --sync [REMOTE/BRANCH]: apply new commits of the manifests repo
  // (sync_round.h); "" follows the checkout's upstream.
  bool sync = false;
  std::string sync_ref;
  // Set by the person who starts the watch, never by a commit
  // (sync_round.h's SyncOptions): the from_env names recipes may read, and
  // the keys whose signatures sync accepts (none given: unsigned is fine).
  std::vector<std::string> sync_allow_env;
  std::string sync_allowed_signers;
  std::vector<std::string> sync_gpg_keys;
  // --metrics-listen [ADDR]:PORT: serve the last round as Prometheus metrics
  // (watch_metrics.h, metrics_server.h; no ADDR: loopback); "" serves nothing.
  std::string metrics_listen;
  // --wake-listen [ADDR]:PORT: answer the requests a gateway with `wake`
  // hands over for sleeping models (wake_listener.h); "" wakes nothing.
  std::string wake_listen;
  std::string version;  // fleet's, for fleet_build_info
};

// Exit 0 when stopped by SIGINT/SIGTERM or after `rounds`.
int CmdWatch(const GlobalOptions& g, const WatchOptions& o);

// `fleet events [--since 1h] [--json]`: the state's history of heal events.
int CmdEvents(const GlobalOptions& g, const std::string& since, bool json);

// `fleet endpoints [--json | --format openai|litellm]`: the client-facing
// base URL and model of every recorded serve that answers the API; format
// "" prints a table, "json", "openai" or "litellm" a client's config.
int CmdEndpoints(const GlobalOptions& g, const std::string& format);

// `fleet heal reset ADDR`: forgets a serve's heal tries and quarantine.
int CmdHealReset(const GlobalOptions& g, const std::string& address);

// `fleet sync approve COMMIT`: lets `fleet watch --sync` apply COMMIT
// although it changes what only a person may (sync_policy.h), recorded in
// the state; a signature requirement and --sync-allow-env still hold.
int CmdSyncApprove(const GlobalOptions& g, const std::string& commit);

// Writes the HTML report of the watch log `log_file` to `out_file`.
int CmdReport(const std::string& log_file, const std::string& out_file);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SERVE_COMMANDS_H_
