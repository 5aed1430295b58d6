// LoadManifest: reads fleet.yaml section by section with the yaml_schema
// reader, then checks what spans sections (references between entries,
// shared power switches, ports, addresses) once everything is read, so the
// order of sections in the file does not matter.
#include <arpa/inet.h>
#include <pwd.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "manifests/bench_schema.h"
#include "manifests/byte_size.h"
#include "manifests/duration.h"
#include "manifests/file_text.h"
#include "manifests/health_schema.h"
#include "manifests/manifest.h"
#include "manifests/manifest_checks.h"
#include "manifests/pinning.h"
#include "manifests/power_policy.h"
#include "manifests/recipe.h"
#include "manifests/restart_policy.h"
#include "manifests/secrets.h"
#include "manifests/served_name.h"
#include "manifests/smoke_schema.h"
#include "manifests/utf8.h"
#include "manifests/yaml_schema.h"

namespace fleet {

namespace {

namespace fs = std::filesystem;
using manifest_checks::CheckAcrossSections;
using manifest_checks::DeploymentLocs;
using manifest_checks::ReadNotes;
using yaml_schema::Entry;
using yaml_schema::JoinOr;
using yaml_schema::Located;
using yaml_schema::MapReader;
using yaml_schema::Reporter;

constexpr char kManifestFile[] = "fleet.yaml";

const std::vector<std::string> kTopKeys = {
    "version", "fleet",  "state",       "ssh",      "power", "hub",      "nodes", "stores",
    "images",  "models", "deployments", "defaults", "sync",  "gateways", "bench"};
const std::vector<std::string> kSshKeys = {"user", "identity", "known_hosts", "port",
                                           "connect_timeout"};
const std::vector<std::string> kNodeKeys = {
    "address",         "ssh",   "hostname",         "power",  "container_cli", "display_ram",
    "display_manager", "paths", "poweroff_command", "fabric", "schedule"};
const std::vector<std::string> kDisplayRam = {"default", "unlocked"};

bool IsValidName(const std::string& name) {
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

bool HasSpace(const std::string& s) { return s.find_first_of(" \t\r\n") != std::string::npos; }

std::string HomeDir() {
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  const passwd* pw = getpwuid(getuid());
  return pw != nullptr && pw->pw_dir != nullptr ? pw->pw_dir : "";
}

class ManifestLoader {
 public:
  ManifestLoader(std::string root, Manifest* manifest, Diagnostics* diags)
      : reporter_(kManifestFile, diags), manifest_(manifest), diags_(diags) {
    manifest_->root_dir = std::move(root);
  }

  void Load();

 private:
  // Reports the first byte of fleet.yaml that is not UTF-8, or starts a
  // character YAML does not allow (manifests/utf8.h).
  bool IsPrintableText(std::string_view text);
  // Reports each scalar (key or value) whose escapes decode to such a
  // character; the text was printable, so only an escape gets one here.
  bool ScalarsArePrintable(const YAML::Node& node, std::unordered_set<const void*>* seen);
  void ReadTop(const YAML::Node& root);
  void ReadState(const MapReader& top);
  void ReadSsh(const MapReader& ssh, SshSettings* out);
  void ReadPower(const MapReader& top);
  void ReadHub(const MapReader& top);
  // token_env of `block`: a variable name, never the token itself.
  std::optional<std::string> ReadTokenEnv(const MapReader& map, const std::string& block,
                                          const std::string& example);
  void ReadSync(const MapReader& top);
  // The top-level `defaults` map; before any deployment is read.
  void ReadDefaults(const MapReader& top);
  void ReadNode(const Entry& entry);
  void ReadNodePower(const MapReader& node, NodeSpec* spec);
  void ReadNodePaths(const MapReader& node, NodeSpec* spec);
  void ReadNodeFabric(const MapReader& node, NodeSpec* spec);
  void ReadStore(const Entry& entry);
  void ReadImage(const Entry& entry);
  void ReadModel(const Entry& entry);
  void ReadDeployment(const Entry& entry);
  void ReadDeploymentRouting(const MapReader& deployment, DeploymentSpec* spec);
  void ReadPromote(const MapReader& deployment, DeploymentSpec* spec);
  void ReadGateway(const Entry& entry);
  void ReadRecipe(const Located<std::string>& path, DeploymentSpec* spec);

  // Calls `read` for each entry of section `key`, after checking its name.
  template <typename Fn>
  void ForEachEntry(const MapReader& top, const std::string& key, const std::string& kind, Fn read);
  void AddRefs(const std::string& kind, const std::string& context,
               const std::vector<Located<std::string>>& refs);
  // "node:<n>" / "store:<s>" sources: the named entry must exist.
  bool ReadSource(const MapReader& map, const std::vector<std::string>& plain,
                  const std::vector<std::string>& prefixed, std::string* out);

  // Controller-side path: `~` expanded, relative made absolute against the
  // repo root.
  std::string ResolveLocalPath(const Located<std::string>& path);
  void ReadPowerTls(const MapReader& power);
  // `key` of `map`, a duration from min_s to max_s, into *out when given.
  void ReadDuration(const MapReader& map, const std::string& key, int min_s, int max_s, int* out);
  void ReadGatewayKeys(const MapReader& gateway, GatewaySpec* spec);
  // True when `path`, its links followed, is a path inside the repo.
  bool InsideRepo(const fs::path& path) const;
  // Node-side path: absolute or ~/... (the node's home), kept as written.
  bool CheckNodePath(const Located<std::string>& path, const std::string& field);

  Reporter reporter_;
  Manifest* manifest_;
  Diagnostics* diags_;
  ReadNotes notes_;  // for the checks across sections
  // Each recipe file is loaded (and reported) once, however many
  // deployments use it.
  std::map<std::string, Recipe> recipes_;  // by resolved path
  // Built-in, then defaults.restart: what each deployment's restart is over.
  RestartPolicy default_restart_;
  // The bench profiles fleet.yaml names (and the built-in ones), for promote.profile.
  std::vector<std::string> bench_profiles_;
};

bool ManifestLoader::IsPrintableText(std::string_view text) {
  const size_t at = FirstNonPrintable(text);
  if (at == std::string_view::npos) return true;
  const size_t line_start = text.rfind('\n', at) + 1;  // npos + 1: the first line
  const auto line = std::count(text.begin(), text.begin() + at, '\n');
  const bool utf8 = Utf8SequenceLength(text, at) != 0;
  reporter_.Error(reporter_.At(static_cast<int>(line), static_cast<int>(at - line_start)),
                  DescribeNonPrintable(text, at) +
                      (utf8 ? ": fleet.yaml must not hold one (a stray byte from a paste?)"
                            : ": fleet.yaml must be UTF-8 text (save it as UTF-8)"));
  return false;
}

bool ManifestLoader::ScalarsArePrintable(const YAML::Node& node,
                                         std::unordered_set<const void*>* seen) {
  // An alias is its anchor's node again: visit each node once, or aliases
  // of aliases would make the walk exponential (or, once per depth,
  // quadratic). yaml-cpp has no node id; the address of the tag, which
  // the node owns and its aliases share, serves as one.
  if (!seen->insert(&node.Tag()).second) return true;
  bool ok = true;
  if (node.IsMap()) {
    for (const auto& pair : node) {
      ok = ScalarsArePrintable(pair.first, seen) && ok;
      ok = ScalarsArePrintable(pair.second, seen) && ok;
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) ok = ScalarsArePrintable(item, seen) && ok;
  } else if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    const size_t at = FirstNonPrintable(text);
    if (at == std::string::npos) return true;
    // yaml-cpp decodes \N and \_ to lone bytes, not to UTF-8.
    const auto byte = static_cast<unsigned char>(text[at]);
    const bool lone = (byte == 0x85 || byte == 0xA0) && Utf8SequenceLength(text, at) == 0;
    reporter_.Error(reporter_.Loc(node),
                    "an escape in this string decodes to text fleet cannot use: " +
                        DescribeNonPrintable(text, at) +
                        (lone ? " (yaml-cpp decodes \\N and \\_ to lone bytes; \\u0085 and "
                                "\\u00A0 are their UTF-8)"
                              : "") +
                        "; write the string without it");
    ok = false;
  }
  return ok;
}

void ManifestLoader::Load() {
  const fs::path file = fs::path(manifest_->root_dir) / kManifestFile;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    reporter_.Error(SourceLoc{kManifestFile, 0, 0},
                    "no fleet.yaml in " + manifest_->root_dir +
                        " (fleet -C DIR must point at a manifests repo)");
    return;
  }
  const FileText read = ReadFileText(file.string(), kManifestFile);
  if (!read.ok) {
    diags_->push_back(
        {Diagnostic::Severity::kError, SourceLoc{kManifestFile, 0, 0}, read.error, read.own_fault});
    return;
  }
  const std::string& text = read.text;
  if (!IsPrintableText(text)) return;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    std::string message = "YAML syntax error: " + e.msg;
    if (e.msg.find("sequence flow") != std::string::npos) message += " (a '[' without its ']'?)";
    if (e.msg.find("map flow") != std::string::npos) message += " (a '{' without its '}'?)";
    // yaml-cpp says "illegal map value" for tab indentation; name the cause.
    std::istringstream lines(text);
    std::string line;
    for (int n = 1; std::getline(lines, line) && n <= e.mark.line + 1; ++n) {
      const size_t indent_end = line.find_first_not_of(" \t");
      if (line.substr(0, indent_end).find('\t') != std::string::npos) {
        message += "; line " + std::to_string(n) +
                   " is indented with a tab: YAML indentation must be spaces";
        break;
      }
    }
    reporter_.Error(reporter_.At(e.mark.line, e.mark.column), message);
    return;
  } catch (const YAML::Exception& e) {
    reporter_.Error(reporter_.At(e.mark.line, e.mark.column), "YAML error: " + e.msg);
    return;
  }
  if (!root.IsDefined() || root.IsNull()) {
    reporter_.Error(SourceLoc{kManifestFile, 0, 0},
                    "fleet.yaml is empty; expected at least version: 1, fleet: "
                    "<name> and nodes:");
    return;
  }
  std::unordered_set<const void*> seen;
  if (!ScalarsArePrintable(root, &seen)) return;
  ReadTop(root);
  CheckAcrossSections(*manifest_, notes_, &reporter_);
}

void ManifestLoader::ReadTop(const YAML::Node& root) {
  MapReader top(&reporter_, root, "the top level", reporter_.Loc(root));
  if (!top.ok()) return;
  top.CheckKeys(kTopKeys);
  // Validated here so that `fleet validate` and every plan catch a bad
  // profile; only `fleet bench` keeps it (LoadBenchSettings).
  if (const Entry* bench = top.Find("bench")) {
    BenchSettings unused;
    ReadBenchSettings(&reporter_, *bench, &unused);
    for (const auto& [name, _] : unused.profiles) bench_profiles_.push_back(name);
  } else {
    for (const auto& [name, _] : BuiltinBenchProfiles()) bench_profiles_.push_back(name);
  }

  if (auto version = top.Int("version", 0, 1000000)) {
    if (version->value != 1) {
      reporter_.Error(version->loc, "version " + std::to_string(version->value) +
                                        " is not supported; this fleet reads version: 1");
    }
    manifest_->version = version->value;
  } else if (top.Find("version") == nullptr) {
    reporter_.Error(top.where(), "fleet.yaml has no 'version' (required: version: 1)");
  }
  if (auto name = top.RequiredString("fleet", "the fleet's name")) {
    manifest_->fleet = name->value;
  }

  ReadState(top);
  manifest_->ssh.known_hosts = ResolveLocalPath({"~/.ssh/known_hosts", SourceLoc{}});
  ReadSsh(top.Map("ssh", "ssh"), &manifest_->ssh);
  if (const Entry* e = top.Find("ssh")) manifest_->ssh.loc = e->key_loc;
  ReadPower(top);
  ReadHub(top);
  ReadSync(top);
  ReadDefaults(top);
  // Nodes first: the other sections' checks look them up.
  ForEachEntry(top, "nodes", "node", [this](const Entry& e) { ReadNode(e); });
  ForEachEntry(top, "stores", "store", [this](const Entry& e) { ReadStore(e); });
  ForEachEntry(top, "images", "image", [this](const Entry& e) { ReadImage(e); });
  ForEachEntry(top, "models", "model", [this](const Entry& e) { ReadModel(e); });
  ForEachEntry(top, "deployments", "deployment", [this](const Entry& e) { ReadDeployment(e); });
  ForEachEntry(top, "gateways", "gateway", [this](const Entry& e) { ReadGateway(e); });
  if (manifest_->nodes.empty() && top.Find("nodes") == nullptr) {
    reporter_.Error(top.where(), "fleet.yaml has no 'nodes' (required: at least one node)");
  }
}

template <typename Fn>
void ManifestLoader::ForEachEntry(const MapReader& top, const std::string& key,
                                  const std::string& kind, Fn read) {
  const MapReader section = top.Map(key, key);
  for (const Entry& e : section.entries()) {
    if (!IsValidName(e.key)) {
      reporter_.Error(e.key_loc, kind + " name '" + e.key +
                                     "' must be letters, digits, '-' or '_' (it becomes part of "
                                     "addresses such as " +
                                     kind + ".<name>)");
      continue;
    }
    read(e);
  }
}

void ManifestLoader::ReadState(const MapReader& top) {
  const MapReader state = top.Map("state", "state");
  if (const Entry* e = top.Find("state")) manifest_->state.loc = e->key_loc;
  state.CheckKeys({"backend", "path", "conn_env", "schema"},
                  "name the environment variable holding the libpq connection string "
                  "(conn_env: FLEET_STATE_PG)");
  if (auto backend = state.Enum("backend", {"local", "postgres"}))
    manifest_->state.backend = backend->value;
  // Both backends' keys may stand side by side: `fleet state migrate` moves
  // the state between the two places they name.
  if (auto env = state.String("conn_env")) {
    if (!std::regex_match(env->value, std::regex("[A-Za-z_][A-Za-z0-9_]*")))
      reporter_.Error(env->loc,
                      "'conn_env' in state must name an environment variable (such "
                      "as FLEET_STATE_PG), not hold a connection string: the string "
                      "may carry a password and the manifests repo is committed");
    else
      manifest_->state.conn_env = env->value;
  }
  if (auto schema = state.String("schema")) {
    if (!std::regex_match(schema->value, std::regex("[a-z_][a-z0-9_]{0,62}")))
      reporter_.Error(schema->loc,
                      "'schema' in state must be lower-case letters, digits or '_' "
                      "(at most 63), got '" +
                          schema->value + "'");
    else
      manifest_->state.schema = schema->value;
  }
  if (auto path = state.String("path")) {
    manifest_->state.path = ResolveLocalPath(*path);
  } else {
    manifest_->state.path = (fs::path(manifest_->root_dir) / ".fleet" / "state.json").string();
  }
}

void ManifestLoader::ReadDefaults(const MapReader& top) {
  const MapReader defaults = top.Map("defaults", "defaults");
  defaults.CheckKeys({"restart"});
  if (const Entry* restart = defaults.Find("restart"))
    ReadRestartPolicy(&reporter_, *restart, "defaults", &default_restart_);
}

void ManifestLoader::ReadSsh(const MapReader& ssh, SshSettings* out) {
  ssh.CheckKeys(kSshKeys, "use an identity key (identity: ~/.ssh/id_ed25519) or ssh-agent");
  if (auto user = ssh.String("user")) {
    if (user->value.empty() || HasSpace(user->value) ||
        user->value.find('@') != std::string::npos) {
      reporter_.Error(user->loc, "'user' in " + ssh.what() + " must be a plain user name, got '" +
                                     user->value + "'");
    } else {
      out->user = user->value;
    }
  }
  if (auto identity = ssh.String("identity")) out->identity = ResolveLocalPath(*identity);
  if (auto known = ssh.String("known_hosts")) out->known_hosts = ResolveLocalPath(*known);
  if (auto port = ssh.Int("port", 1, 65535)) out->port = port->value;
  if (auto timeout = ssh.String("connect_timeout")) {
    const auto seconds = ParseDurationSeconds(timeout->value);
    if (!seconds) {
      reporter_.Error(timeout->loc, "'connect_timeout' in " + ssh.what() +
                                        " must be a duration such as 10s or 1m (a plain number "
                                        "is seconds), got '" +
                                        timeout->value + "'");
    } else {
      out->connect_timeout_s = *seconds;
    }
  }
}

void ManifestLoader::ReadSync(const MapReader& top) {
  const MapReader sync = top.Map("sync", "sync");
  if (const Entry* e = top.Find("sync")) manifest_->sync.loc = e->key_loc;
  sync.CheckKeys({"allow", "destroy"});
  if (auto allow = sync.StringList("allow")) {
    const std::vector<std::string> actions = {"add", "change", "replace"};
    manifest_->sync.allow.clear();
    for (const auto& a : *allow) {
      if (std::find(actions.begin(), actions.end(), a.value) != actions.end()) {
        manifest_->sync.allow.push_back(a.value);
        continue;
      }
      std::string message = "'allow' in sync lists '" + a.value + "'; expected " + JoinOr(actions) +
                            (a.value == "destroy" ? " (destroying is `destroy: true`)" : "");
      const std::string near = NearestName(a.value, actions);
      if (!near.empty() && a.value != "destroy") message += "; did you mean '" + near + "'?";
      reporter_.Error(a.loc, message);
    }
  }
  if (auto destroy = sync.Bool("destroy")) manifest_->sync.destroy = destroy->value;
}

void ManifestLoader::ReadPower(const MapReader& top) {
  const Entry* entry = top.Find("power");
  if (entry == nullptr) return;
  const MapReader power = top.Map("power", "power");
  PowerController& out = manifest_->power;
  // Present even when malformed: the nodes' power blocks then get no second,
  // misleading "no controller" error.
  out.present = true;
  out.loc = entry->key_loc;
  if (!power.ok()) return;
  power.CheckKeys({"kind", "url", "token_env", "ca_file", "insecure"},
                  "export the token in an environment variable and set "
                  "token_env to its name (e.g. token_env: HA_TOKEN)");
  if (power.Find("kind") == nullptr) {
    reporter_.Error(entry->key_loc, "power has no 'kind' (required: home-assistant)");
  } else if (auto kind = power.Enum("kind", {"home-assistant"})) {
    out.kind = kind->value;
  }
  if (auto url = power.RequiredString("url", "the controller's URL, e.g. https://ha.lan:8123")) {
    const std::string& u = url->value;
    const bool http = u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0;
    const size_t authority = u.find("://");
    const std::string host_part =
        authority == std::string::npos ? u : u.substr(authority + 3, u.find('/', authority + 3));
    if (!http || HasSpace(u)) {
      reporter_.Error(url->loc,
                      "'url' in power must start with http:// or https://, got '" + u + "'");
    } else if (host_part.find('@') != std::string::npos || u.find("token=") != std::string::npos) {
      reporter_.Error(url->loc,
                      "'url' in power carries credentials; the manifest must never hold "
                      "secrets: put the token in an environment variable named by "
                      "token_env");
    } else {
      out.url = u;
    }
  }
  ReadPowerTls(power);
  if (auto env = ReadTokenEnv(power, "power", "HA_TOKEN")) out.token_env = *env;
}

std::optional<std::string> ManifestLoader::ReadTokenEnv(const MapReader& map,
                                                        const std::string& block,
                                                        const std::string& example) {
  auto env = block == "power" ? map.RequiredString("token_env",
                                                   "the name of the environment variable holding "
                                                   "the token")
                              : map.String("token_env");
  if (!env) return std::nullopt;
  // A long mixed-case value such as ghp_x1Y2... is also a valid variable
  // name, but nobody names a variable like that: it is the token pasted in.
  const bool upper = std::none_of(env->value.begin(), env->value.end(),
                                  [](char c) { return c >= 'a' && c <= 'z'; });
  if (IsEnvVarName(env->value) && (upper || !LooksLikeToken(env->value))) return env->value;
  if (LooksLikeToken(env->value)) {
    reporter_.Error(env->loc, "'token_env' in " + block +
                                  " holds what looks like the token itself; the "
                                  "manifest must never hold secrets: export the token in an "
                                  "environment variable (e.g. " +
                                  example +
                                  ") and write its name here; "
                                  "revoke the token if it was ever committed");
  } else {
    reporter_.Error(env->loc, "'token_env' in " + block +
                                  " must be an environment variable name "
                                  "such as " +
                                  example + ", got '" + env->value + "'");
  }
  return std::nullopt;
}

void ManifestLoader::ReadHub(const MapReader& top) {
  const Entry* entry = top.Find("hub");
  if (entry == nullptr) return;
  const MapReader hub = top.Map("hub", "hub");
  HubSettings& out = manifest_->hub;
  out.present = true;
  out.loc = entry->key_loc;
  if (!hub.ok()) return;
  hub.CheckKeys({"token_env", "cli"},
                "export the Hub token in an environment variable and set token_env to its "
                "name (e.g. token_env: HF_TOKEN)");
  if (auto env = ReadTokenEnv(hub, "hub", "HF_TOKEN")) out.token_env = *env;
  if (auto cli = hub.String("cli")) {
    const std::string& c = cli->value;
    const bool absolute = c.rfind("/", 0) == 0 || c.rfind("~/", 0) == 0;
    if (!absolute || HasSpace(c) || c.find('\0') != std::string::npos || c.back() == '/') {
      reporter_.Error(cli->loc,
                      "'cli' in hub must be the absolute path of the hub CLI on the nodes "
                      "(e.g. /usr/local/bin/hf or ~/.local/bin/hf), got '" +
                          c + "'");
    } else {
      out.cli = c;
    }
  }
}

// An https controller's trust: ca_file (a CA bundle on the controller,
// resolved against the repo) or an explicit insecure: true; neither: the
// system's CAs. Both, or either on an http:// url, is an error.
void ManifestLoader::ReadPowerTls(const MapReader& power) {
  PowerController& out = manifest_->power;
  const bool https = out.url.rfind("https://", 0) == 0;
  auto ca = power.String("ca_file");
  auto insecure = power.Bool("insecure");
  if (ca && !out.url.empty() && !https)
    reporter_.Error(ca->loc, "'ca_file' in power needs an https:// url (the url is " + out.url +
                                 ": nothing is verified over http)");
  if (insecure && insecure->value && !out.url.empty() && !https)
    reporter_.Error(insecure->loc,
                    "'insecure' in power needs an https:// url (the url is " + out.url + ")");
  if (ca && insecure && insecure->value) {
    reporter_.Error(insecure->loc,
                    "power has both 'ca_file' and 'insecure: true'; keep one: ca_file verifies "
                    "the controller's certificate, insecure skips the check");
    return;
  }
  if (insecure) out.insecure = insecure->value;
  if (!ca) return;
  if (ca->value.empty()) {
    reporter_.Error(ca->loc, "'ca_file' in power is empty");
    return;
  }
  out.ca_file = ResolveLocalPath(*ca);
  std::ifstream f(out.ca_file);
  if (!f)
    reporter_.Error(ca->loc, "'ca_file' in power: cannot read " + out.ca_file +
                                 " (a PEM file of the CA that signed the controller's "
                                 "certificate, relative to the repo)");
}

void ManifestLoader::ReadNode(const Entry& entry) {
  const std::string what = "node '" + entry.key + "'";
  const MapReader node(&reporter_, entry.value, what, entry.key_loc);
  NodeSpec spec;
  spec.name = entry.key;
  spec.loc = entry.key_loc;
  spec.ssh = manifest_->ssh;
  spec.hf_cache = "~/.cache/huggingface/hub";
  notes_.node_order.push_back(entry.key);
  if (!node.ok()) {
    manifest_->nodes[spec.name] = std::move(spec);
    return;
  }
  node.CheckKeys(kNodeKeys);
  if (auto address = node.RequiredString("address", "a host name, an IP or local")) {
    if (address->value.find('@') != std::string::npos) {
      reporter_.Error(address->loc, "'address' in " + what + " must be a host name or IP, got '" +
                                        address->value + "'; put the user in ssh: {user: ...}");
    } else if (HasSpace(address->value) || address->value.empty()) {
      reporter_.Error(address->loc, "'address' in " + what +
                                        " must be a host name, an IP or local, got '" +
                                        address->value + "'");
    } else {
      spec.address = address->value;
    }
  }
  ReadSsh(node.Map("ssh", what + " ssh"), &spec.ssh);
  if (const Entry* e = node.Find("ssh")) spec.ssh.loc = e->key_loc;
  if (auto hostname = node.String("hostname")) spec.hostname = hostname->value;
  ReadNodePower(node, &spec);
  if (const Entry* schedule = node.Find("schedule"))
    ReadUpSchedule(&reporter_, *schedule, what, &spec.schedule);
  if (auto cli = node.Enum("container_cli", {"docker", "podman"})) spec.container_cli = cli->value;
  if (auto ram = node.Enum("display_ram", kDisplayRam)) spec.display_ram = ram->value;
  if (auto dm = node.Enum("display_manager", {"stop"})) spec.display_manager_stop = true;
  ReadNodePaths(node, &spec);
  ReadNodeFabric(node, &spec);
  if (auto command = node.String("poweroff_command")) {
    if (command->value.empty()) {
      reporter_.Error(command->loc, "'poweroff_command' in " + what + " is empty");
    } else {
      spec.poweroff_command = command->value;
    }
  }
  manifest_->nodes[spec.name] = std::move(spec);
}

void ManifestLoader::ReadNodePower(const MapReader& node, NodeSpec* spec) {
  const Entry* entry = node.Find("power");
  if (entry == nullptr) return;
  const std::string what = node.what() + " power";
  const MapReader power = node.Map("power", what);
  if (!power.ok()) return;
  spec->power.present = true;
  spec->power.loc = entry->key_loc;
  power.CheckKeys(
      {"switch", "state", "boot_timeout", "shutdown_timeout", "halt_wait", "idle_off", "watts"});
  if (!manifest_->power.present) {
    reporter_.Error(entry->key_loc,
                    node.what() +
                        " has power: but the fleet has no power controller; add one at the "
                        "top "
                        "level: power: {kind: home-assistant, url: ..., token_env: ...}");
  }
  if (auto entity = power.RequiredString("switch", "a switch entity such as switch.dgx1")) {
    const std::string& s = entity->value;
    const size_t dot = s.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == s.size() || HasSpace(s)) {
      reporter_.Error(
          entity->loc,
          "'switch' in " + what + " must be an entity id such as switch.dgx1, got '" + s + "'");
    } else {
      spec->power.switch_entity = s;
      notes_.switches[spec->name] = *entity;
    }
  }
  if (auto state = power.Enum("state", {"on", "off", "on_demand"}))
    spec->power.state = state->value;
  if (auto watts = power.Int("watts", 1, 100000)) spec->power.watts = watts->value;
  if (auto idle = power.String("idle_off")) {
    // At least 10 s (a watch round checks it; tests use seconds); the docs
    // say why a lab wants tens of minutes: every wake costs a boot.
    const auto seconds = ParseDurationSeconds(idle->value, 10);
    if (!seconds)
      reporter_.Error(idle->loc, "'idle_off' in " + what +
                                     " must be a duration of 10s or more such as 30m or 2h, got '" +
                                     idle->value + "'");
    else if (spec->power.state != "on_demand")
      reporter_.Error(idle->loc, "'idle_off' in " + what +
                                     " needs state: on_demand (the state is " + spec->power.state +
                                     "); a node declared on or off keeps that power");
    else
      spec->power.idle_off_s = *seconds;
  }
  // How long power on waits for SSH, power off for SSH to stop, and then for
  // the OS to halt (0 s: a node with nothing to flush may be cut at once).
  struct Duration {
    const char* key;
    int* field;
    int min_s;
  };
  const Duration durations[] = {{"boot_timeout", &spec->power.boot_timeout_s, 1},
                                {"shutdown_timeout", &spec->power.shutdown_timeout_s, 1},
                                {"halt_wait", &spec->power.halt_wait_s, 0}};
  for (const auto& [key, field, min_s] : durations) {
    auto value = power.String(key);
    if (!value) continue;
    const auto seconds = ParseDurationSeconds(value->value, min_s);
    if (!seconds) {
      reporter_.Error(value->loc, std::string("'") + key + "' in " + what + " must be a duration" +
                                      (min_s == 0 ? " (0s or more)" : "") +
                                      " such as 10m or 90s, got '" + value->value + "'");
    } else {
      *field = static_cast<int>(*seconds);
    }
  }
}

void ManifestLoader::ReadNodePaths(const MapReader& node, NodeSpec* spec) {
  const MapReader paths = node.Map("paths", node.what() + " paths");
  paths.CheckKeys({"hf_cache", "sysfs", "dev"});
  const std::pair<const char*, std::string*> fields[] = {
      {"hf_cache", &spec->hf_cache}, {"sysfs", &spec->sysfs}, {"dev", &spec->dev}};
  for (const auto& [key, out] : fields) {
    if (auto path = paths.String(key)) {
      if (CheckNodePath(*path, "'" + std::string(key) + "' in " + paths.what())) *out = path->value;
    }
  }
}

// fabric: {address: IPv4, interface: NAME}; both optional.
void ManifestLoader::ReadNodeFabric(const MapReader& node, NodeSpec* spec) {
  const MapReader fabric = node.Map("fabric", node.what() + " fabric");
  fabric.CheckKeys({"address", "interface"});
  if (auto address = fabric.String("address")) {
    in_addr a{};
    if (inet_pton(AF_INET, address->value.c_str(), &a) != 1)
      reporter_.Error(address->loc, "'address' in " + fabric.what() +
                                        " must be an IPv4 address such as 10.77.0.11, got '" +
                                        address->value + "'");
    else
      spec->fabric_address = address->value;
  }
  if (auto interface = fabric.String("interface")) spec->fabric_interface = interface->value;
}

void ManifestLoader::ReadStore(const Entry& entry) {
  const std::string what = "store '" + entry.key + "'";
  const MapReader store(&reporter_, entry.value, what, entry.key_loc);
  StoreSpec spec;
  spec.name = entry.key;
  spec.loc = entry.key_loc;
  if (entry.key == "local") {
    reporter_.Error(entry.key_loc,
                    "a store may not be named 'local': models use store: local for "
                    "each node's own cache");
  }
  if (store.ok()) {
    store.CheckKeys({"path", "nodes"});
    if (auto path = store.RequiredString("path", "the store's path on its nodes")) {
      if (CheckNodePath(*path, "'path' in " + what)) spec.path = path->value;
    }
    if (auto nodes = store.StringList("nodes")) {
      for (const auto& n : *nodes) spec.nodes.push_back(n.value);
      AddRefs("node", what, *nodes);
      if (nodes->empty()) {
        reporter_.Error(store.Find("nodes")->value_loc,
                        "'nodes' in " + what + " is empty; list the nodes that mount it");
      }
    } else if (store.Find("nodes") == nullptr) {
      reporter_.Error(entry.key_loc, what + " has no 'nodes' (required: the nodes that mount it)");
    }
  }
  manifest_->stores[spec.name] = std::move(spec);
}

bool ManifestLoader::ReadSource(const MapReader& map, const std::vector<std::string>& plain,
                                const std::vector<std::string>& prefixed, std::string* out) {
  auto source = map.String("source");
  if (!source) return false;
  const std::string& s = source->value;
  if (std::find(plain.begin(), plain.end(), s) != plain.end()) {
    *out = s;
    return true;
  }
  for (const std::string& kind : prefixed) {
    const std::string prefix = kind + ":";
    if (s.rfind(prefix, 0) == 0 && s.size() > prefix.size()) {
      Located<std::string> ref{s.substr(prefix.size()), source->loc};
      AddRefs(kind, "'source' in " + map.what(), {ref});
      *out = s;
      return true;
    }
  }
  std::vector<std::string> expected = plain;
  for (const std::string& kind : prefixed) expected.push_back(kind + ":<name>");
  std::string message =
      "'source' in " + map.what() + " must be " + JoinOr(expected) + ", got '" + s + "'";
  const std::string near = NearestName(s, plain);
  if (!near.empty()) message += "; did you mean '" + near + "'?";
  reporter_.Error(source->loc, message);
  return false;
}

void ManifestLoader::ReadImage(const Entry& entry) {
  const std::string what = "image '" + entry.key + "'";
  const MapReader image(&reporter_, entry.value, what, entry.key_loc);
  ImageSpec spec;
  spec.name = entry.key;
  spec.loc = entry.key_loc;
  spec.source = "registry";
  if (image.ok()) {
    image.CheckKeys({"ref", "source", "allow_floating", "nodes"});
    if (auto floating = image.Bool("allow_floating")) spec.allow_floating = floating->value;
    if (auto ref = image.RequiredString("ref", "repo@sha256:<digest>")) {
      spec.ref = ref->value;
      switch (ClassifyImageRef(ref->value)) {
        case ImageRefKind::kPinned:
          break;
        case ImageRefKind::kFloating:
          if (spec.allow_floating) {
            reporter_.Warning(ref->loc, FloatingImageMessage(entry.key, ref->value) +
                                            " (allow_floating is set: every pull may bring a "
                                            "different image)");
          } else {
            reporter_.Error(ref->loc, FloatingImageMessage(entry.key, ref->value));
          }
          break;
        case ImageRefKind::kBadDigest:
          reporter_.Error(ref->loc,
                          what + ": ref '" + ref->value + "' has a malformed digest; expected " +
                              ImageRepository(ref->value) + "@sha256:<64 lowercase hex digits>");
          break;
        case ImageRefKind::kMalformed:
          reporter_.Error(ref->loc, what + ": ref '" + ref->value +
                                        "' is not an image reference; expected "
                                        "repo@sha256:<64 lowercase hex digits>");
          break;
      }
    }
    ReadSource(image, {"registry", "peers"}, {"node"}, &spec.source);
    if (auto nodes = image.StringList("nodes")) {
      for (const auto& n : *nodes) spec.nodes.push_back(n.value);
      AddRefs("node", what, *nodes);
    }
  }
  manifest_->images[spec.name] = std::move(spec);
}

void ManifestLoader::ReadModel(const Entry& entry) {
  const std::string what = "model '" + entry.key + "'";
  const MapReader model(&reporter_, entry.value, what, entry.key_loc);
  ModelSpec spec;
  spec.name = entry.key;
  spec.loc = entry.key_loc;
  spec.store = "local";
  spec.source = "hub";
  if (model.ok()) {
    model.CheckKeys({"repo", "revision", "store", "source", "allow_floating", "nodes", "verify"});
    if (auto floating = model.Bool("allow_floating")) spec.allow_floating = floating->value;
    if (auto verify = model.Enum("verify", {"sizes", "deep"})) spec.verify = verify->value;
    if (auto repo = model.RequiredString("repo", "the hub repo id, org/name")) {
      const std::string& r = repo->value;
      if (r.empty() || HasSpace(r) || std::count(r.begin(), r.end(), '/') > 1 || r.front() == '/' ||
          r.back() == '/') {
        reporter_.Error(repo->loc, "'repo' in " + what +
                                       " must be a hub repo id such as "
                                       "org/name, got '" +
                                       r + "'");
      } else {
        spec.repo = r;
      }
    }
    if (auto revision = model.RequiredString("revision", "the 40-hex commit id to serve")) {
      spec.revision = revision->value;
      const std::string& rev = revision->value;
      switch (ClassifyRevision(rev)) {
        case RevisionKind::kPinned:
          break;
        case RevisionKind::kUppercase: {
          std::string lower = rev;
          for (char& c : lower) {
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          }
          reporter_.Error(revision->loc, "'revision' in " + what +
                                             " must be lowercase hex, as the "
                                             "hub writes it: " +
                                             lower);
          break;
        }
        case RevisionKind::kFloating: {
          const std::string message =
              FloatingRevisionMessage(entry.key, spec.repo.empty() ? "the repo" : spec.repo, rev);
          if (spec.allow_floating) {
            reporter_.Warning(revision->loc, message + " (allow_floating is set)");
          } else {
            reporter_.Error(revision->loc, message);
          }
          break;
        }
        case RevisionKind::kMalformed:
          reporter_.Error(revision->loc, "'revision' in " + what + " must be a commit id (40 " +
                                             "lowercase hex digits), got '" + rev + "'");
          break;
      }
    }
    if (auto store = model.String("store")) {
      spec.store = store->value;
      if (store->value != "local") AddRefs("store", "'store' in " + what, {*store});
    }
    ReadSource(model, {"hub"}, {"node", "store"}, &spec.source);
    if (spec.source == "store:" + spec.store) {
      reporter_.Error(model.Find("source")->value_loc,
                      what + " lives in store '" + spec.store +
                          "' and names it as its source "
                          "too; a source is where the model is copied from "
                          "(hub, node:<name> "
                          "or another store)");
    }
    if (auto nodes = model.StringList("nodes")) {
      for (const auto& n : *nodes) spec.nodes.push_back(n.value);
      AddRefs("node", what, *nodes);
    }
  }
  manifest_->models[spec.name] = std::move(spec);
}

void ManifestLoader::ReadDeployment(const Entry& entry) {
  const std::string what = "deployment '" + entry.key + "'";
  const MapReader deployment(&reporter_, entry.value, what, entry.key_loc);
  DeploymentSpec spec;
  spec.name = entry.key;
  spec.loc = entry.key_loc;
  spec.restart = default_restart_;
  notes_.deployment_order.push_back(entry.key);
  DeploymentLocs& locs = notes_.deployment_locs[entry.key];
  if (deployment.ok()) {
    deployment.CheckKeys({"recipe", "nodes", "image", "model", "display_ram", "port", "health",
                          "gpu_memory", "smoke", "shared", "fabric_env", "restart", "served_model",
                          "gateway", "max_request", "schedule", "promote"});
    ReadDeploymentRouting(deployment, &spec);
    ReadPromote(deployment, &spec);
    if (auto shared = deployment.Bool("shared")) spec.shared = shared->value;
    if (auto fabric_env = deployment.Bool("fabric_env")) spec.fabric_env = fabric_env->value;
    if (auto nodes = deployment.StringList("nodes")) {
      for (const auto& n : *nodes) spec.nodes.push_back(n.value);
      AddRefs("node", what, *nodes);
      locs.nodes = *nodes;
      if (nodes->empty()) {
        reporter_.Error(deployment.Find("nodes")->value_loc,
                        "'nodes' in " + what + " is empty; list the nodes that serve it");
      }
    } else if (deployment.Find("nodes") == nullptr) {
      reporter_.Error(entry.key_loc, what + " has no 'nodes' (required: the nodes that serve it)");
    }
    if (auto image = deployment.RequiredString("image", "the name of an entry under images:")) {
      spec.image = image->value;
      AddRefs("image", what, {*image});
    }
    if (auto model = deployment.String("model")) {
      spec.model = model->value;
      AddRefs("model", what, {*model});
    }
    if (auto ram = deployment.Enum("display_ram", kDisplayRam)) spec.display_ram = ram->value;
    if (auto port = deployment.Int("port", 1, 65535)) {
      spec.port = port->value;
      locs.port = port->loc;
    } else if (deployment.Find("port") == nullptr) {
      reporter_.Error(entry.key_loc, what + " has no 'port' (required: 1-65535)");
    }
    ReadHealthCheck(&reporter_, deployment.Map("health", what + " health"), &spec.health);
    if (const Entry* restart = deployment.Find("restart"))
      ReadRestartPolicy(&reporter_, *restart, what, &spec.restart);
    if (const Entry* schedule = deployment.Find("schedule"))
      ReadUpSchedule(&reporter_, *schedule, what, &spec.schedule);
    if (auto need = deployment.String("gpu_memory")) {
      if (auto bytes = ParseByteSize(need->value)) {
        spec.gpu_memory_bytes = *bytes;
      } else {
        reporter_.Error(need->loc, "'gpu_memory' in " + what +
                                       " must be a size such as 24GiB, 512m or 1.5T (binary "
                                       "units), got '" +
                                       need->value + "'");
      }
    }
    if (const Entry* smoke = deployment.Find("smoke"))
      spec.smoke = ReadSmokeChecks(&reporter_, *smoke, what);
    // The serve's prefill rate, for each check that declares none of its own.
    for (SmokeCheck& check : spec.smoke)
      if (check.prefill_tps <= 0) check.prefill_tps = spec.health.prefill_tps;
    if (auto recipe = deployment.RequiredString("recipe", "the path of a recipe TOML file")) {
      ReadRecipe(*recipe, &spec);
    }
    if (spec.model.empty() && RecipeUsesPlaceholder(spec.recipe, "model_path")) {
      reporter_.Error(entry.key_loc, what + " has no 'model', but its recipe " + spec.recipe_path +
                                         " uses {model_path}; name the model it serves");
    }
  }
  manifest_->deployments[spec.name] = std::move(spec);
}

void ManifestLoader::ReadDeploymentRouting(const MapReader& deployment, DeploymentSpec* spec) {
  if (auto routed = deployment.Bool("gateway")) spec->routed = routed->value;
  if (auto size = deployment.String("max_request")) {
    // At least 64 KiB (a chat and its headers), at most 128 MiB: a gateway
    // holds a whole body of this size per request in memory, in one
    // HAProxy buffer, which HAProxy 2.6 refuses at 256 MB and over.
    const std::optional<uint64_t> bytes = ParseByteSize(size->value);
    if (bytes && *bytes >= (uint64_t{64} << 10) && *bytes <= (uint64_t{128} << 20))
      spec->max_request_bytes = *bytes;
    else
      reporter_.Error(size->loc, "'max_request' in " + deployment.what() +
                                     " must be a size from 64KiB to 128MiB such as 4MiB or 16MiB "
                                     "(the largest request body a gateway takes for it), got '" +
                                     size->value + "'");
  }
  if (auto served = deployment.String("served_model")) {
    // It is written into the gateway's HAProxy config and JSON answers:
    // the one served name check (manifests/served_name.h), as a recipe's.
    if (const std::string problem = ServedNameProblem(served->value); !problem.empty())
      reporter_.Error(served->loc, "'served_model' in " + deployment.what() + " " + problem +
                                       " (got '" + served->value + "')");
    else
      spec->served_model = served->value;
  }
}

namespace {

// "10%", "10", "7.5%": a percentage from 0 to 100; nullopt otherwise.
std::optional<double> ParsePercent(std::string text) {
  if (!text.empty() && text.back() == '%') text.pop_back();
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == nullptr || *end != '\0' || !(v >= 0 && v <= 100)) return std::nullopt;
  return v;
}

}  // namespace

// promote: {profile: quick, max_regression: 10%, min_quality: last}: the
// gate before a new image, model revision or recipe takes the route.
void ManifestLoader::ReadPromote(const MapReader& deployment, DeploymentSpec* spec) {
  const Entry* entry = deployment.Find("promote");
  if (entry == nullptr) return;
  const MapReader promote = deployment.Map("promote", deployment.what() + " promote");
  if (!promote.ok()) return;
  promote.CheckKeys({"profile", "max_regression", "min_quality"});
  PromotePolicy p;
  p.loc = entry->key_loc;
  if (auto profile = promote.String("profile")) {
    if (std::find(bench_profiles_.begin(), bench_profiles_.end(), profile->value) ==
        bench_profiles_.end()) {
      const std::string near = NearestName(profile->value, bench_profiles_);
      reporter_.Error(profile->loc, "'profile' in " + promote.what() + " names no bench profile '" +
                                        profile->value + "'" +
                                        (near.empty() ? "" : "; did you mean '" + near + "'?"));
    } else {
      p.profile = profile->value;
    }
  }
  if (auto max = promote.String("max_regression")) {
    if (auto pct = ParsePercent(max->value))
      p.max_regression_pct = *pct;
    else
      reporter_.Error(max->loc, "'max_regression' in " + promote.what() +
                                    " must be a percentage from 0% to 100% such as 10%, got '" +
                                    max->value + "'");
  }
  if (auto min = promote.String("min_quality")) {
    if (min->value == "last") {
      p.min_quality_last = true;
    } else if (auto pct = ParsePercent(min->value)) {
      p.min_quality_last = false;
      p.min_quality_pct = *pct;
    } else {
      reporter_.Error(min->loc, "'min_quality' in " + promote.what() +
                                    " must be `last` (no lower share of the quality set than the "
                                    "last good run) or a percentage such as 90%, got '" +
                                    min->value + "'");
    }
  }
  spec->promote = p;
}

void ManifestLoader::ReadDuration(const MapReader& map, const std::string& key, int min_s,
                                  int max_s, int* out) {
  auto text = map.String(key);
  if (!text) return;
  const std::optional<int> seconds = ParseDurationSeconds(text->value);
  if (seconds && *seconds >= min_s && *seconds <= max_s)
    *out = *seconds;
  else
    reporter_.Error(text->loc, "'" + key + "' in " + map.what() +
                                   " must be a duration such as 5s, 2m or 1h from " +
                                   std::to_string(min_s) + "s to " + std::to_string(max_s) +
                                   "s, got '" + text->value + "'");
}

// The gateway's client keys live outside the repo: a commit must not hold
// them (anyone who reads the repo could use them), so `keys` is a path on
// the controller that does not resolve into the repo, and `keys_env` an
// environment variable's name. Neither is read here (validate reads no
// secret): the gateway provider reads them when it plans.
void ManifestLoader::ReadGatewayKeys(const MapReader& gateway, GatewaySpec* spec) {
  auto path = gateway.String("keys");
  auto env = gateway.String("keys_env");
  if (path && env) {
    reporter_.Error(env->loc, "'keys' and 'keys_env' in " + gateway.what() +
                                  " are two sources of the same keys; keep one");
    return;
  }
  if (env) {
    if (IsEnvVarName(env->value) && !LooksLikeToken(env->value))
      spec->keys_env = env->value;
    else
      reporter_.Error(env->loc, "'keys_env' in " + gateway.what() +
                                    " must be the name of an environment variable (e.g. "
                                    "LAB_GATEWAY_KEYS), not the keys themselves");
  }
  if (!path) return;
  const std::string& p = path->value;
  if (p.empty() || (p[0] != '/' && p.rfind("~/", 0) != 0)) {
    reporter_.Error(path->loc, "'keys' in " + gateway.what() +
                                   " must be an absolute or ~/ path to a file outside the repo "
                                   "(the keys are secrets: never commit them)");
    return;
  }
  const std::string resolved = ResolveLocalPath(*path);
  if (InsideRepo(resolved)) {
    reporter_.Error(path->loc, "'keys' in " + gateway.what() +
                                   " names a file inside the manifests repo; client keys are "
                                   "secrets: keep them outside the repo (e.g. ~/.config/fleet/" +
                                   spec->name + "-keys) and revoke any that were committed");
    return;
  }
  spec->keys_path = resolved;
}

void ManifestLoader::ReadGateway(const Entry& entry) {
  const std::string what = "gateway '" + entry.key + "'";
  const MapReader gateway(&reporter_, entry.value, what, entry.key_loc);
  GatewaySpec spec;
  spec.name = entry.key;
  spec.loc = entry.key_loc;
  if (gateway.ok()) {
    gateway.CheckKeys({"nodes", "image", "port", "drain", "keys", "keys_env", "wake"});
    ReadGatewayKeys(gateway, &spec);
    if (const Entry* wake = gateway.Find("wake"))
      ReadGatewayWake(&reporter_, *wake, what, &spec.wake);
    if (auto nodes = gateway.StringList("nodes")) {
      for (const auto& n : *nodes) spec.nodes.push_back(n.value);
      AddRefs("node", what, *nodes);
    } else if (gateway.Find("nodes") == nullptr) {
      reporter_.Error(entry.key_loc, what + " has no 'nodes' (required: where it runs)");
    }
    if (auto image = gateway.RequiredString("image", "an entry under images: with haproxy")) {
      spec.image = image->value;
      AddRefs("image", what, {*image});
    }
    if (auto port = gateway.Int("port", 1, 65535)) {
      spec.port = port->value;
      for (const auto& [name, d] : manifest_->deployments)
        for (const std::string& n : spec.nodes)
          if (d.port == spec.port && std::count(d.nodes.begin(), d.nodes.end(), n))
            reporter_.Error(port->loc, what + " and deployment '" + name + "' both use port " +
                                           std::to_string(spec.port) + " on node '" + n +
                                           "'; give each its own port");
    } else if (gateway.Find("port") == nullptr) {
      reporter_.Error(entry.key_loc, what + " has no 'port' (required: 1-65535)");
    }
    if (auto drain = gateway.String("drain")) {
      if (auto seconds = ParseDurationSeconds(drain->value))
        spec.drain_s = *seconds;
      else
        reporter_.Error(drain->loc, "'drain' in " + what +
                                        " must be a duration such as 60s or 5m, got '" +
                                        drain->value + "'");
    }
  }
  manifest_->gateways[spec.name] = std::move(spec);
}

void ManifestLoader::ReadRecipe(const Located<std::string>& path, DeploymentSpec* spec) {
  spec->recipe_path = path.value;
  if (path.value.empty()) {
    reporter_.Error(path.loc, "'recipe' in deployment '" + spec->name + "' is empty");
    return;
  }
  const fs::path resolved = (fs::path(manifest_->root_dir) / path.value).lexically_normal();
  // Only files of the repo: a commit names what fleet reads, and a path out
  // of it (absolute, "..", or a link) would read the controller's own files
  // and quote them in errors. Links are followed first, so a link inside
  // the repo that points out of it is refused too.
  if (!InsideRepo(resolved)) {
    reporter_.Error(path.loc, "deployment '" + spec->name + "': recipe file '" + path.value +
                                  "' is outside the manifests repo (a recipe must be a file of "
                                  "the repo, e.g. recipes/" +
                                  spec->name + ".toml)");
    return;
  }
  std::error_code ec;
  if (!fs::is_regular_file(resolved, ec)) {
    std::string message = "deployment '" + spec->name + "': recipe file '" + path.value +
                          "' not found (looked for " + resolved.string() + ")";
    // Suggest a close file name in the same directory: a typo in a file name
    // is the usual cause. Only names of the repo's own files.
    std::vector<std::string> siblings;
    for (const auto& f : fs::directory_iterator(resolved.parent_path(), ec))
      if (InsideRepo(f.path())) siblings.push_back(f.path().filename().string());
    const std::string near = NearestName(resolved.filename().string(), siblings);
    if (!near.empty()) {
      message += "; did you mean '" + (fs::path(path.value).parent_path() / near).string() + "'?";
    }
    reporter_.Error(path.loc, message);
    return;
  }
  auto cached = recipes_.find(resolved.string());
  if (cached == recipes_.end()) {
    Recipe recipe;
    LoadRecipe(resolved.string(), path.value, &recipe, diags_);
    cached = recipes_.emplace(resolved.string(), std::move(recipe)).first;
  }
  spec->recipe = cached->second;
}

void ManifestLoader::AddRefs(const std::string& kind, const std::string& context,
                             const std::vector<Located<std::string>>& refs) {
  for (const auto& ref : refs) notes_.refs.push_back({kind, context, ref});
}

bool ManifestLoader::InsideRepo(const fs::path& path) const {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(manifest_->root_dir, ec);
  if (ec) return false;
  const fs::path real = fs::weakly_canonical(path, ec);
  if (ec) return false;
  const fs::path rel = real.lexically_relative(root);
  return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

std::string ManifestLoader::ResolveLocalPath(const Located<std::string>& path) {
  const std::string& p = path.value;
  if (p.empty()) return p;
  if (p[0] == '~') {
    if (p.size() > 1 && p[1] != '/') {
      reporter_.Error(path.loc, "'" + p + "': ~user paths are not supported; write the full path");
      return p;
    }
    return (fs::path(HomeDir() + p.substr(1))).lexically_normal().string();
  }
  const fs::path fp(p);
  if (fp.is_absolute()) return fp.lexically_normal().string();
  return (fs::path(manifest_->root_dir) / fp).lexically_normal().string();
}

bool ManifestLoader::CheckNodePath(const Located<std::string>& path, const std::string& field) {
  const std::string& p = path.value;
  if (!p.empty() && (p[0] == '/' || p == "~" || p.rfind("~/", 0) == 0)) return true;
  reporter_.Error(path.loc, field +
                                " must be an absolute path on the node (or ~/... for the "
                                "node user's home), got '" +
                                p + "'");
  return false;
}

}  // namespace

bool LoadManifest(const std::string& dir, Manifest* manifest, Diagnostics* diags) {
  Diagnostics found;
  try {
    std::error_code ec;
    fs::path root = fs::absolute(dir.empty() ? "." : dir, ec).lexically_normal();
    std::string root_dir = root.string();
    while (root_dir.size() > 1 && root_dir.back() == '/') root_dir.pop_back();
    ManifestLoader(root_dir, manifest, &found).Load();
  } catch (const std::exception& e) {
    // Nothing above is meant to throw; if a library still does, the operator
    // gets a located-as-possible error instead of a crash.
    found.push_back({Diagnostic::Severity::kError, SourceLoc{kManifestFile, 0, 0},
                     std::string("internal error while loading the manifest: ") + e.what()});
  }
  // Report in reading order: fleet.yaml top to bottom, then each recipe.
  std::stable_sort(found.begin(), found.end(), [](const Diagnostic& a, const Diagnostic& b) {
    const bool a_main = a.loc.file == kManifestFile;
    const bool b_main = b.loc.file == kManifestFile;
    if (a_main != b_main) return a_main;
    if (a.loc.file != b.loc.file) return a.loc.file < b.loc.file;
    if (a.loc.line != b.loc.line) return a.loc.line < b.loc.line;
    return a.loc.column < b.loc.column;
  });
  const bool ok = !HasErrors(found);
  diags->insert(diags->end(), found.begin(), found.end());
  return ok;
}

}  // namespace fleet
