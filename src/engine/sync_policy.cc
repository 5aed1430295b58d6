#include "src/engine/sync_policy.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace fleet {

namespace {

// "fleet.yaml:12:3: " (or "fleet.yaml: " where no line is known).
std::string At(const SourceLoc& loc) {
  SourceLoc l = loc;
  if (l.file.empty()) l.file = "fleet.yaml";
  return l.ToString() + ": ";
}

std::string Quoted(const std::string& s) { return s.empty() ? "(none)" : "'" + s + "'"; }

// One line per ssh setting that differs, for `who` ("ssh", "node dgx1's ssh").
void SshChanges(const SshSettings& was, const SshSettings& now, const std::string& who,
                std::vector<std::string>* out) {
  const std::string why = " (whom fleet logs in to, and with which key: a person approves it)";
  auto diff = [&](const std::string& key, const std::string& a, const std::string& b) {
    if (a != b)
      out->push_back(At(now.loc) + who + " " + key + " changes from " + Quoted(a) + " to " +
                     Quoted(b) + why);
  };
  diff("user", was.user, now.user);
  diff("identity", was.identity, now.identity);
  diff("known_hosts", was.known_hosts, now.known_hosts);
  diff("port", std::to_string(was.port), std::to_string(now.port));
}

void PowerChanges(const PowerController& was, const PowerController& now,
                  std::vector<std::string>* out) {
  const std::string why = " (where the switch's token is sent: a person approves it)";
  if (was.present != now.present) {
    out->push_back(At(now.loc) +
                   (now.present ? "the commit adds a power controller"
                                : "the commit removes the power controller") +
                   why);
    return;
  }
  auto diff = [&](const std::string& key, const std::string& a, const std::string& b) {
    if (a != b)
      out->push_back(At(now.loc) + "power " + key + " changes from " + Quoted(a) + " to " +
                     Quoted(b) + why);
  };
  diff("kind", was.kind, now.kind);
  diff("url", was.url, now.url);
  diff("token_env", was.token_env, now.token_env);
  // Whom fleet trusts to be the controller it sends the token to.
  diff("ca_file", was.ca_file, now.ca_file);
  diff("insecure", was.insecure ? "true" : "false", now.insecure ? "true" : "false");
}

// The Hub token's variable says which secret the nodes' downloads get, and
// the CLI which program gets it: a person approves either.
void HubChanges(const HubSettings& was, const HubSettings& now, std::vector<std::string>* out) {
  const std::string why = " (which token the nodes' downloads get: a person approves it)";
  if (was.token_env != now.token_env)
    out->push_back(At(now.loc) + "hub token_env changes from " + Quoted(was.token_env) + " to " +
                   Quoted(now.token_env) + why);
  if (was.cli != now.cli)
    out->push_back(At(now.loc) + "hub cli changes from " + Quoted(was.cli) + " to " +
                   Quoted(now.cli) +
                   " (the program on the nodes that gets the Hub token: a "
                   "person approves it)");
}

void StateChanges(const StateSettings& was, const StateSettings& now,
                  std::vector<std::string>* out) {
  const std::string why = " (where the lab's state lives: a person migrates it)";
  if (was.backend != now.backend)
    out->push_back(At(now.loc) + "state backend changes from " + Quoted(was.backend) + " to " +
                   Quoted(now.backend) + why);
  if (now.backend == "postgres" && (was.conn_env != now.conn_env || was.schema != now.schema))
    out->push_back(At(now.loc) + "state conn_env/schema change from " +
                   Quoted(was.conn_env + "/" + was.schema) + " to " +
                   Quoted(now.conn_env + "/" + now.schema) + why);
}

// A gateway's keys say whom it lets in: a commit that moves them (to
// another file of the controller, to none: an open gateway) waits for a
// person. A gateway the commit adds counts as one that had no keys.
void GatewayKeyChanges(const Manifest& applied, const Manifest& next,
                       std::vector<std::string>* out) {
  const std::string why = " (whom the gateway lets in: a person approves it)";
  for (const auto& [name, g] : next.gateways) {
    auto was = applied.gateways.find(name);
    const GatewaySpec before = was == applied.gateways.end() ? GatewaySpec{} : was->second;
    if (before.keys_path != g.keys_path)
      out->push_back(At(g.loc) + "gateway " + name + "'s keys change from " +
                     Quoted(before.keys_path) + " to " + Quoted(g.keys_path) + why);
    if (before.keys_env != g.keys_env)
      out->push_back(At(g.loc) + "gateway " + name + "'s keys_env changes from " +
                     Quoted(before.keys_env) + " to " + Quoted(g.keys_env) + why);
  }
}

bool SameSync(const SyncSettings& a, const SyncSettings& b) {
  std::vector<std::string> x = a.allow, y = b.allow;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y && a.destroy == b.destroy;
}

// "add", "change", "replace" or "destroy" for a change's action; "" for a
// noop.
std::string SyncVerb(Action action) {
  switch (action) {
    case Action::kCreate:
      return "add";
    case Action::kUpdate:
      return "change";
    case Action::kReplace:
      return "replace";
    case Action::kDelete:
      return "destroy";
    default:
      return "";
  }
}

// What `c` takes out of service, as a verb: "destroy" for a delete, else
// what its provider says ("power off"), else "".
std::string TakenDown(const PlanChange& c,
                      const std::vector<std::unique_ptr<Provider>>& providers) {
  if (c.action == Action::kDelete) return SyncVerb(c.action);
  for (const auto& p : providers)
    if (p->type() == c.type) return p->TakesDown(c);
  return "";
}

// True when `path` lies under `dir` (both absolute, lexically normal).
bool Under(const std::string& path, const std::string& dir) {
  if (dir.empty() || path.size() <= dir.size() || path.compare(0, dir.size(), dir) != 0)
    return false;
  return path[dir.size()] == '/' || dir.back() == '/';
}

// The node has no ssh block of its own: its settings are the top level's.
bool Inherits(const NodeSpec& node, const Manifest& m) {
  return node.ssh.loc.line == m.ssh.loc.line && node.ssh.loc.column == m.ssh.loc.column;
}

}  // namespace

std::vector<std::string> ChangesForAPerson(const Manifest& applied, const Manifest& next) {
  std::vector<std::string> out;
  if (!SameSync(applied.sync, next.sync))
    out.push_back(At(next.sync.loc) +
                  "the commit changes sync: (the policy that gates it is the applied "
                  "commit's; a person applies a new one)");
  PowerChanges(applied.power, next.power, &out);
  HubChanges(applied.hub, next.hub, &out);
  StateChanges(applied.state, next.state, &out);
  SshChanges(applied.ssh, next.ssh, "ssh", &out);
  GatewayKeyChanges(applied, next, &out);
  for (const auto& [name, node] : next.nodes) {
    auto was = applied.nodes.find(name);
    if (was == applied.nodes.end()) {
      out.push_back(At(node.loc) + "the commit adds node " + name + " at " + Quoted(node.address) +
                    " (fleet would log in to it and install fleet-probe: a person approves it)");
      continue;
    }
    if (was->second.address != node.address)
      out.push_back(At(node.loc) + "node " + name + "'s address changes from " +
                    Quoted(was->second.address) + " to " + Quoted(node.address) +
                    " (whom fleet logs in to: a person approves it)");
    // A node that takes the top-level block in both commits changed with
    // it (said once, above); one with a block of its own in either is said
    // here.
    if (!(Inherits(was->second, applied) && Inherits(node, next)))
      SshChanges(was->second.ssh, node.ssh, "node " + name + "'s ssh", &out);
  }
  return out;
}

std::string PlanNeedsAPerson(const Plan& plan, const SyncSettings& policy,
                             const std::vector<std::unique_ptr<Provider>>& providers) {
  for (const PlanChange& c : plan.changes) {
    if (const std::string down = TakenDown(c, providers); !down.empty()) {
      if (!policy.destroy)
        return "the plan would " + down + " " + c.address + " (sync.destroy is false)";
      continue;
    }
    const std::string a = SyncVerb(c.action);
    if (a.empty()) continue;
    if (std::find(policy.allow.begin(), policy.allow.end(), a) == policy.allow.end())
      return "the plan would " + a + " " + c.address + " (sync.allow does not list " + a + ")";
  }
  return "";
}

std::vector<std::string> EnvNamesNotAllowed(const Manifest& next,
                                            const std::vector<std::string>& allowed) {
  std::vector<std::string> out;
  std::vector<std::string> seen;  // one line per recipe file and name
  for (const auto& [name, d] : next.deployments) {
    for (const auto& [key, var] : d.recipe.env_from) {
      if (std::find(allowed.begin(), allowed.end(), var) != allowed.end()) continue;
      std::string line = d.recipe_path + ": " + key + " = {from_env = \"" + var + "\"}";
      if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
      seen.push_back(line);
      out.push_back(line);
    }
  }
  return out;
}

std::vector<std::string> TrustFileChanges(const Manifest& next, const std::string& copy_root,
                                          const std::string& live_root) {
  namespace fs = std::filesystem;
  const std::string base = fs::path(copy_root).lexically_normal().string();
  std::vector<std::string> out, seen;
  // Missing and unreadable read as nullopt: a file the commit adds or
  // removes at a declared path is a change too.
  auto bytes = [](const std::string& path) -> std::optional<std::string> {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  };
  auto check = [&](const std::string& path, const SourceLoc& loc, const std::string& why) {
    if (!Under(path, base)) return;  // outside the repo: no commit writes it
    const fs::path rel = fs::path(path).lexically_relative(base);
    if (std::find(seen.begin(), seen.end(), rel.string()) != seen.end()) return;
    seen.push_back(rel.string());
    if (bytes(path) != bytes((fs::path(live_root) / rel).string()))
      out.push_back(At(loc) + "the commit changes the content of " + rel.string() + " (" + why +
                    ": a person approves it)");
  };
  const std::string ssh_why = "whom fleet logs in to, and with which key";
  if (next.power.present)
    check(next.power.ca_file, next.power.loc, "whom fleet sends the switch's token to");
  check(next.ssh.known_hosts, next.ssh.loc, ssh_why);
  check(next.ssh.identity, next.ssh.loc, ssh_why);
  for (const auto& [name, node] : next.nodes) {
    check(node.ssh.known_hosts, node.ssh.loc, ssh_why);
    check(node.ssh.identity, node.ssh.loc, ssh_why);
  }
  for (const auto& [name, g] : next.gateways) check(g.keys_path, g.loc, "whom the gateway lets in");
  return out;
}

void RebaseControllerPaths(const std::string& from, const std::string& to, Manifest* m) {
  namespace fs = std::filesystem;
  const std::string base = fs::path(from).lexically_normal().string();
  auto rebase = [&](std::string* p) {
    if (!Under(*p, base)) return;
    *p = (fs::path(to) / fs::path(*p).lexically_relative(base)).lexically_normal().string();
  };
  rebase(&m->ssh.identity);
  rebase(&m->ssh.known_hosts);
  rebase(&m->state.path);
  rebase(&m->power.ca_file);
  for (auto& [name, node] : m->nodes) {
    rebase(&node.ssh.identity);
    rebase(&node.ssh.known_hosts);
  }
}

}  // namespace fleet
