// The fleet commands, one function each; cli.cc maps arguments onto them.
// Each returns the process exit code (0 ok, 1 error, 2 changes present with
// --detailed-exitcode) and never throws.
#ifndef FLEET_SRC_ENGINE_COMMANDS_H_
#define FLEET_SRC_ENGINE_COMMANDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/clock.h"
#include "state/state_store.h"

namespace fleet {

struct GlobalOptions {
  std::string dir = ".";
  bool color = false;
  int verbosity = 0;  // -1 quiet, 0 normal, 1 verbose
  // Where the command reads the time and waits (src/clock.h), handed to
  // its executor and rounds. main() leaves the real clock; a test of a
  // command may hand a FakeClock. Never null.
  Clock* clock = RealClock();
};

struct PlanCommandOptions {
  std::string out_file;
  bool json = false;
  bool detailed_exitcode = false;
  bool destroy = false;
  bool purge = false;
  std::vector<std::string> targets;
  std::string verify;         // --verify: "" (the manifests decide), "sizes" or "deep"
  std::string markdown_file;  // --markdown FILE: a pull-request summary
  std::string lock_timeout;   // --lock-timeout 5m: hold the lock, waiting for it
  bool retry_gate = false;    // --retry-gate: a spec a gate refused is gated again
};

struct ApplyCommandOptions {
  std::string plan_file;
  bool auto_approve = false;
  int parallelism = 10;
  bool rollback = true;
  bool destroy = false;
  bool purge = false;
  std::vector<std::string> targets;
  std::string verify;        // --verify: "" (the manifests decide), "sizes" or "deep"
  std::string lock_timeout;  // --lock-timeout 5m: wait for the lock ("": fail at once)
  bool retry_gate = false;   // --retry-gate: a spec a gate refused is gated again
  std::string version;       // fleet's, recorded with a gate's bench runs
};

// Logs at -v go to stderr (debug); otherwise only warnings do.
void SetUpLogging(const GlobalOptions& g);

// Loads the manifests of `g.dir` into *m, printing every diagnostic; on
// errors also says that nothing was `done` ("done", "checked") and returns
// false.
bool LoadManifestSaying(const GlobalOptions& g, Manifest* m, const std::string& done = "done");

// The state store the manifests' `state:` block names (local or postgres).
std::unique_ptr<StateStore> OpenStateStore(const StateSettings& settings);

int CmdValidate(const GlobalOptions& g);
int CmdPlan(const GlobalOptions& g, const PlanCommandOptions& o);
int CmdApply(const GlobalOptions& g, const ApplyCommandOptions& o);
int CmdShow(const GlobalOptions& g, const std::string& plan_file, bool json);
// `fleet show FILE --markdown`: the saved plan's pull-request summary.
int CmdShowMarkdown(const GlobalOptions& g, const std::string& plan_file);
int CmdStatus(const GlobalOptions& g);
int CmdStateList(const GlobalOptions& g);
int CmdStateShow(const GlobalOptions& g, const std::string& address);
int CmdStateRm(const GlobalOptions& g, const std::string& address);
// Takes over what runs on a node without a record in this state when it
// matches the manifests (Terraform's import): probes it, writes the record
// apply would write (under the lock, serial bumped once). Refuses with the
// reason otherwise (exit 1, state untouched). Named addresses are all or
// nothing; `all` adopts every declared resource without a record that
// matches, names the others with the reason, and exits 0.
int CmdStateAdopt(const GlobalOptions& g, const std::vector<std::string>& addresses, bool all);
// `fleet state history`: every kept serial; `fleet state show --serial N
// [ADDR]`: the state (or one record) as it was at serial N.
int CmdStateHistory(const GlobalOptions& g);
int CmdStateShowSerial(const GlobalOptions& g, uint64_t serial, const std::string& address);
// `fleet state migrate --to postgres|local`: copies the state with its
// lineage and serial; refuses when the target holds another lineage.
int CmdStateMigrate(const GlobalOptions& g, const std::string& to);
int CmdForceUnlock(const GlobalOptions& g, const std::string& lock_id);
// `gpu`: fleet-probe creates a CUDA context even while a serve runs.
int CmdProbe(const GlobalOptions& g, const std::string& node, bool json, bool gpu = false);
// `fleet model files NAME --node N`: the model's per-file bind list on N,
// "host_path<TAB>container_path" per line (container_root "" = the
// snapshot's own path).
int CmdModelFiles(const GlobalOptions& g, const std::string& model, const std::string& node,
                  const std::string& container_root);
// `fleet logs deployment.NAME@NODE [--tail N]`: the last N lines the serve's
// container printed, read on the node after its hostname is checked (the
// log's label inversion: never another box's logs under this name).
int CmdLogs(const GlobalOptions& g, const std::string& address, int tail);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_COMMANDS_H_
