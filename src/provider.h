// Provider: everything fleet knows about one resource type, behind one
// small surface. The planner, not the provider, decides order, parallelism
// and batching; a provider never talks to the CLI, the state store or
// another provider. The transport is handed to it.
#ifndef FLEET_SRC_PROVIDER_H_
#define FLEET_SRC_PROVIDER_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/clock.h"
#include "src/plan.h"
#include "src/resource.h"
#include "src/settings.h"
#include "src/shared_work.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

struct ResourceRecord;  // state/state.h
class PowerSwitch;      // src/power_switch.h
class HubApi;           // src/hub_api.h

// What a step may use while it runs on a node.
struct StepContext {
  Transport* transport = nullptr;  // the node's; connected
  const NodeSpec* node = nullptr;
  const Manifest* manifest = nullptr;
  const ResourceRecord* record = nullptr;  // state before the step, may be null
  PowerSwitch* power = nullptr;            // the fleet's power controller, may be null
  HubApi* hub = nullptr;                   // the Hugging Face Hub, may be null
  // Another node's transport (not necessarily connected: call Connect()),
  // for steps that move data between nodes (image and model copies).
  std::function<Transport*(const std::string& node)> node_transport;
  std::function<void(const std::string&)> progress;  // one line, may be empty
  // Work the steps of this apply share, done once for all (a fan-out's
  // chain copy feeds every target's step). Null: each step on its own.
  SharedWork* shared = nullptr;
  // Writes `attributes` as this resource's state record now, before the
  // step ends (e.g. the original module values before an unlock, so that a
  // crash mid-step still knows what to restore).
  std::function<Status(const nlohmann::json& attributes)> checkpoint;
  // Where the step reads time and sleeps (health waits, power polls). The
  // engine hands down its own; a context built by hand (a test, a one-off
  // tool) gets the real clock. Never null.
  Clock* clock = RealClock();
  // The FLEET_* settings (src/settings.h); the process's by default. Never
  // null.
  const Settings* settings = &ProcessSettings();
};

// What a diff may read besides its own resource: the facts of its node, and
// what the probe found everywhere else (e.g. which peer node already holds
// an image to copy from). Read-only.
struct DiffContext {
  const NodeFacts& facts;                                             // of the resource's node
  const std::map<std::string, NodeFacts>* all_facts = nullptr;        // by node
  const std::map<std::string, ActualResource>* all_actual = nullptr;  // by address
  const Manifest* manifest = nullptr;
  // --purge: remove what fleet staged (images, models) when destroying, or
  // when the manifests no longer declare it. Off by default: staging took
  // hours.
  bool purge = false;
  // The changes already planned for resources of the types before this
  // one (the registry's dependency order), e.g. a display RAM reload a
  // deployment on the same node must restart after. May be null.
  const std::vector<PlanChange>* planned = nullptr;
  // The addresses this state has a record of, so that a diff can name what
  // runs on a node unknown to the state (`fleet state adopt`). Null when
  // not known (a diff tested alone): nothing is said about it then.
  const std::set<std::string>* recorded = nullptr;
  // The state's records themselves (DiffUnrecorded: what the state knows by
  // content, e.g. an image under another name). Null when not known.
  const std::vector<ResourceRecord>* records = nullptr;
  // What this provider's InventoryScript printed on the node (DiffUnrecorded
  // only). Null when it did not run.
  const std::string* inventory = nullptr;
  // The Hugging Face Hub, asked for a model's files and sizes (from the
  // controller). Null: not asked.
  HubApi* hub = nullptr;
  // The FLEET_* settings (src/settings.h); the process's by default. Never
  // null.
  const Settings* settings = &ProcessSettings();
};

// The power a node's manifest entry declares (`power: on`, `off`, or
// `{state: on_demand}`), as the node-itself type reads it.
enum class DeclaredPower { kOn, kOff, kOnDemand };

// The part a type's resources play in the commands built around one kind
// of them: a serve (status's serve rows, endpoints, heal, wake), a gateway
// in front of serves (status's gateway rows, endpoints, the promote gate's
// routes), an image on a node (kept while a gate may need it). The engine
// asks the provider (RoleOf) instead of naming a type.
enum class Role { kOther, kServe, kGateway, kImage };

class Provider {
 public:
  virtual ~Provider() = default;

  virtual std::string type() const = 0;

  // Whether this type's resource on a node is the node itself (its identity
  // and power). The engine treats it apart: it is probed and diffed on a
  // node declared off or asleep, where nothing else is; a diff error of it
  // (a wrong identity) leaves everything else on its node unplanned; only
  // the nodes that have one get their inventories listed; and its steps
  // reach the node on their own (a power on), so they run while the node
  // does not answer. The default: false.
  virtual bool IsNodeItself() const;

  // The power `r` declares for its node. Asked only of the node-itself
  // type; the default: on.
  virtual DeclaredPower PowerOf(const DesiredResource& r) const;

  // Why it matters that `r` goes unplanned when its node does not answer,
  // said on the node's unreachable line after "<address> is not planned,
  // and " (a gateway: "its clients get no answer"). The default, "":
  // nothing worth naming.
  virtual std::string UnplannedCost(const DesiredResource& r) const;

  // What `c`, a change of this type that is not a delete, takes out of
  // service as a delete would, as the verb a refusal names it by ("power
  // off": a node's power off, which fleet watch --sync makes only with
  // sync.destroy). The default, "": nothing.
  virtual std::string TakesDown(const PlanChange& c) const;

  // The part this type's resources play (Role). The default: kOther.
  virtual Role role() const;

  // The desired resources of this type declared (or implied) by `m`.
  virtual std::vector<DesiredResource> Expand(const Manifest& m) const = 0;

  // A read-only POSIX sh fragment that prints what the probe needs to know
  // about `r` on stdout. The planner concatenates the fragments of every
  // resource on a node into one script. Empty: nothing to read remotely.
  // Every interpolated value goes through ShellQuote.
  // REQUIRES: the fragment runs in that script's own shell, after the
  // fragments before it (no fork each: BuildProbeScript), so it leaves the
  // shell running and as it found it: no `exit`, `cd`, `trap` or `exec`,
  // shell options and IFS put back. One that needs any of them runs itself
  // in a subshell (ProbeInSubshell).
  virtual std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const = 0;

  // Turns what the fragment printed into facts.
  virtual ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                                    const NodeFacts& facts) const = 0;

  // The change that brings `actual` to `desired`. `record` is the state's
  // record of this address, or null.
  virtual PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                          const ResourceRecord* record, const DiffContext& ctx) const = 0;

  // The change for `fleet destroy` (or a state record no longer desired).
  // The default deletes nothing and says so (a noop).
  virtual PlanChange DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                 const ResourceRecord* record, const DiffContext& ctx) const;

  // The change for a state record the manifests no longer declare. The
  // default forgets the record and touches nothing on the node.
  virtual PlanChange DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const;

  // What the probe found on `node` that carries fleet's labels but that
  // neither the manifests (there) nor the state know, e.g. a serve left by a
  // lost state file: a noop that names it and what to do, or (ctx.purge) its
  // removal. `ctx.facts` are `node`'s. The default finds nothing.
  virtual std::vector<PlanChange> DiffUnrecorded(const std::string& node,
                                                 const DiffContext& ctx) const;

  // A read-only fragment that lists what carries this type's marks on
  // `node` whatever the manifests declare there (every image with fleet's
  // tag, every model copy fleet staged), run in the plan's round trip on
  // every node a whole plan probes; DiffUnrecorded reads what it printed
  // (ctx.inventory). "" (the default): nothing to list.
  // REQUIRES: as ProbeScript's.
  virtual std::string InventoryScript(const std::string& node, const Manifest& m) const;

  // `fleet state adopt`: the record apply would write for `desired`, which
  // the probe found on its node as `actual`, when that matches the
  // manifests (nothing to change, nothing to fetch); else an error that
  // says why not. `node` (null when the decision is tested alone) lets a
  // provider read more than the probe before it records, e.g. a model's
  // safetensors headers; it changes nothing on the node. The default
  // refuses: this type cannot be adopted.
  virtual Result<nlohmann::json> Adopt(const DesiredResource& desired, const ActualResource& actual,
                                       const DiffContext& ctx, const StepContext* node) const;

  // Performs `change` idempotently: re-check, act, verify. Returns the
  // attributes to record in state (null: remove the record).
  virtual Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const = 0;

  // Undoes a change this run applied (rollback after a later step failed).
  // `applied` is what Apply returned. Sets *undone to true when the resource
  // is back where it was before the step (the executor then restores its
  // previous state record). The default keeps what was done (right for
  // things that took hours to stage): *undone = false.
  virtual Status Undo(const PlanChange& change, const nlohmann::json& applied,
                      const StepContext& ctx, bool* undone) const;
};

// Helpers every provider uses.

// A noop change for `d` with its address, type and node filled in: the start
// of every diff.
PlanChange ChangeFor(const DesiredResource& d);

// The SSH endpoint a node's manifest entry describes.
SshEndpoint EndpointFor(const NodeSpec& spec);

// A connection of its own to `node` of `m`, connected (a step that moves
// data between nodes, beside the steps that use the nodes' shared ones).
Result<std::unique_ptr<Transport>> ConnectNode(const Manifest& m, const std::string& node);

// Where clients and other nodes reach the node: its manifest address, or
// 127.0.0.1 for `address: local`.
std::string ClientAddress(const NodeSpec& spec);

// A change that drops `record` from the state and touches nothing remote.
PlanChange ForgetRecord(const ResourceRecord& record);

// `script` in a subshell of its own, for a probe fragment that may end its
// shell (an `exit`) or change it (Provider::ProbeScript).
std::string ProbeInSubshell(const std::string& script);

// Parses the "key=value" lines probe fragments print (later keys win; lines
// without '=' are ignored).
std::map<std::string, std::string> ParseKeyValues(const std::string& text);

// Runs `command` on the step's node. A non-zero exit is an error naming the
// node, the command and its stderr.
Result<CommandResult> RunOnNode(const StepContext& ctx, const std::string& command);

// All providers, in dependency order of their types (node first).
std::vector<std::unique_ptr<Provider>> MakeProviders();

// The role of the provider of `type` (MakeProviders'); kOther for a type
// no provider has.
Role RoleOf(const std::string& type);

}  // namespace fleet

#endif  // FLEET_SRC_PROVIDER_H_
