#include "manifests/recipe.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "manifests/file_text.h"
#include "manifests/secrets.h"
#include "manifests/served_name.h"

namespace fleet {

namespace {

const std::vector<std::string>& TopLevelKeys() {
  static const std::vector<std::string> keys = {"model",        "args",    "env",         "devices",
                                                "memory_limit", "cpus",    "shm_size",    "gpus",
                                                "ipc",          "ulimits", "extra_mounts"};
  return keys;
}

// Keys that only make sense at the top level: finding one in a sub-table
// means it was written below that table's header.
bool IsTopLevelOnly(const std::string& key) {
  return key != "extra_mounts" &&
         std::find(TopLevelKeys().begin(), TopLevelKeys().end(), key) != TopLevelKeys().end();
}

const std::vector<std::string>& MountKeys() {
  static const std::vector<std::string> keys = {"host", "container", "read_only"};
  return keys;
}

// Keys people reach for that belong somewhere else: the hint says where.
std::string MisplacedKeyHint(const std::string& key) {
  if (key == "image" || key == "docker_image") {
    return "; the image is declared in fleet.yaml (images:) and chosen by the "
           "deployment";
  }
  if (key == "port") return "; the port is the deployment's (fleet.yaml); use {port} in args";
  if (key == "nodes" || key == "cluster") return "; nodes are the deployment's (fleet.yaml)";
  return "";
}

// One key of a TOML table, in file order.
struct TomlEntry {
  std::string key;
  const toml::key* key_ref;
  const toml::node* value;
};

std::vector<TomlEntry> InFileOrder(const toml::table& table) {
  std::vector<TomlEntry> out;
  for (auto&& [k, v] : table) out.push_back({std::string(k.str()), &k, &v});
  std::stable_sort(out.begin(), out.end(), [](const TomlEntry& a, const TomlEntry& b) {
    const auto& pa = a.key_ref->source().begin;
    const auto& pb = b.key_ref->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  return out;
}

std::string TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date/time";
  }
}

// The TOML text of a number or boolean, for "quote it" hints and cpus.
std::string ScalarText(const toml::node& node) {
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* f = node.as_floating_point()) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), f->get());
    return std::string(buffer, result.ptr);
  }
  return "";
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "6", "1.5": a plain decimal, as --cpus takes it.
bool IsDecimal(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == 0) return false;
  if (i == s.size()) return true;
  if (s[i] != '.') return false;
  const size_t fraction = ++i;
  while (i < s.size() && IsDigit(s[i])) ++i;
  return i == s.size() && i > fraction;
}

bool IsDevicePath(std::string_view s) { return !s.empty() && s[0] == '/'; }

// A CDI device name, "vendor.tld/class=name" (nvidia.com/gpu=all, =0, =GPU-…):
// how podman (and docker 25+) give a container the GPU.
bool IsCdiDevice(std::string_view s) {
  const size_t slash = s.find('/'), eq = s.find('=');
  if (slash == 0 || slash == std::string_view::npos || eq == std::string_view::npos ||
      eq < slash + 2 || eq + 1 == s.size())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') continue;
    if ((c == '/' && i == slash) || (c == '=' && i == eq) || (c == ':' && i > eq)) continue;
    return false;
  }
  return true;
}

// What docker and podman accept for --memory and --shm-size:
// <decimal>[ ][kmgtp][i][b], case-insensitive ("9g", "512m", "9GiB").
bool IsSize(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (IsDigit(s[i]) || s[i] == '.')) ++i;
  if (!IsDecimal(s.substr(0, i))) return false;
  if (i < s.size() && s[i] == ' ') ++i;
  auto take = [&](std::string_view set) {
    if (i < s.size() && set.find(s[i]) != std::string_view::npos) ++i;
  };
  take("kKmMgGtTpP");
  take("iI");
  take("bB");
  return i == s.size();
}

// Every {identifier} in `s` (JSON such as {"a": 1} is not one).
std::vector<std::string> PlaceholderNames(const std::string& s) {
  std::vector<std::string> names;
  for (size_t open = s.find('{'); open != std::string::npos; open = s.find('{', open + 1)) {
    size_t i = open + 1;
    if (i >= s.size() || !(std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_')) continue;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    if (i < s.size() && s[i] == '}') names.push_back(s.substr(open + 1, i - open - 1));
  }
  return names;
}

// A string in the recipe with where it came from, for the placeholder lint.
struct RecipeString {
  std::string value;
  std::string field;  // "args[2]", "env.FOO", "model"
  SourceLoc loc;
};

class RecipeReader {
 public:
  RecipeReader(std::string file, Recipe* recipe, Diagnostics* diags)
      : file_(std::move(file)), recipe_(recipe), diags_(diags) {}

  void Read(const toml::table& root);

 private:
  SourceLoc Loc(const toml::source_region& region) const {
    return SourceLoc{file_, static_cast<int>(region.begin.line),
                     static_cast<int>(region.begin.column)};
  }
  void Error(const SourceLoc& loc, std::string message) {
    diags_->push_back({Diagnostic::Severity::kError, loc, std::move(message)});
  }

  void ReadKey(const TomlEntry& e);
  std::optional<std::string> ReadString(const TomlEntry& e, const std::string& field);
  std::vector<std::string> ReadStringArray(const TomlEntry& e, const std::string& field);
  void ReadEnv(const TomlEntry& e);
  void ReadCpus(const TomlEntry& e);
  void ReadSize(const TomlEntry& e, std::string* out);
  void ReadMounts(const TomlEntry& e);
  void ReadGpus(const TomlEntry& e);
  void ReadUlimits(const TomlEntry& e);
  void ReadMount(const toml::table& table, size_t index);
  // A top-level key found in `table`: the ordering trap.
  void OrderingTrap(const TomlEntry& e, const std::string& header, const toml::table& table);
  void CheckTwoPositionals();
  void CheckPlaceholders();
  void CheckServedName();

  std::string file_;
  Recipe* recipe_;
  Diagnostics* diags_;
  std::vector<std::string> top_level_seen_;
  std::optional<SourceLoc> model_loc_;
  std::vector<SourceLoc> arg_locs_;
  std::vector<RecipeString> strings_;
};

void RecipeReader::Read(const toml::table& root) {
  const std::vector<TomlEntry> entries = InFileOrder(root);
  for (const TomlEntry& e : entries) top_level_seen_.push_back(e.key);
  for (const TomlEntry& e : entries) ReadKey(e);
  CheckTwoPositionals();
  CheckPlaceholders();
  CheckServedName();
}

void RecipeReader::ReadKey(const TomlEntry& e) {
  const std::string& k = e.key;
  if (k == "model") {
    if (auto v = ReadString(e, "model")) {
      recipe_->model = *v;
      model_loc_ = Loc(e.value->source());
    }
  } else if (k == "args") {
    recipe_->args = ReadStringArray(e, "args");
  } else if (k == "env") {
    ReadEnv(e);
  } else if (k == "devices") {
    recipe_->devices = ReadStringArray(e, "devices");
    for (size_t i = 0; i < recipe_->devices.size(); ++i) {
      if (!IsDevicePath(recipe_->devices[i]) && !IsCdiDevice(recipe_->devices[i])) {
        Error(Loc(e.value->as_array()->get(i)->source()),
              "devices[" + std::to_string(i) + "] '" + recipe_->devices[i] +
                  "' must be a device path such as /dev/dri/card0 (or "
                  "host:container), or a CDI device such as nvidia.com/gpu=all");
      }
    }
  } else if (k == "memory_limit") {
    ReadSize(e, &recipe_->memory_limit);
  } else if (k == "shm_size") {
    ReadSize(e, &recipe_->shm_size);
  } else if (k == "cpus") {
    ReadCpus(e);
  } else if (k == "extra_mounts") {
    ReadMounts(e);
  } else if (k == "gpus") {
    ReadGpus(e);
  } else if (k == "ipc") {
    if (auto v = ReadString(e, "ipc")) {
      if (*v != "host" && *v != "private" && *v != "shareable" && *v != "none")
        Error(Loc(e.value->source()),
              "'ipc' must be \"host\" (what NCCL and TensorRT-LLM serves use), \"private\", "
              "\"shareable\" or \"none\", got '" +
                  *v + "'");
      else
        recipe_->ipc = *v;
    }
  } else if (k == "ulimits") {
    ReadUlimits(e);
  } else {
    std::string message = "unknown key '" + k + "' in recipe";
    const std::string near = NearestName(k, TopLevelKeys());
    if (!near.empty()) {
      message += "; did you mean '" + near + "'?";
    } else {
      message +=
          "; expected one of: model, args, env, devices, memory_limit, cpus, "
          "shm_size, gpus, ipc, ulimits, "
          "[[extra_mounts]]";
    }
    Error(Loc(e.key_ref->source()), message + MisplacedKeyHint(k));
  }
}

std::optional<std::string> RecipeReader::ReadString(const TomlEntry& e, const std::string& field) {
  const auto* s = e.value->as_string();
  if (s == nullptr) {
    Error(Loc(e.value->source()), "'" + field + "' must be a string, got " + TypeName(*e.value));
    return std::nullopt;
  }
  strings_.push_back({s->get(), field, Loc(e.value->source())});
  return s->get();
}

std::vector<std::string> RecipeReader::ReadStringArray(const TomlEntry& e,
                                                       const std::string& field) {
  std::vector<std::string> out;
  const auto* array = e.value->as_array();
  if (array == nullptr) {
    std::string message = "'" + field + "' must be an array of strings, got " + TypeName(*e.value);
    if (e.value->is_string()) {
      message += "; write " + field + " = [\"" + e.value->as_string()->get() + "\"]";
    }
    Error(Loc(e.value->source()), message);
    return out;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& item = *array->get(i);
    const std::string item_field = field + "[" + std::to_string(i) + "]";
    if (const auto* s = item.as_string()) {
      out.push_back(s->get());
      strings_.push_back({s->get(), item_field, Loc(item.source())});
      if (field == "args") arg_locs_.push_back(Loc(item.source()));
    } else {
      Error(Loc(item.source()),
            item_field + " must be a string, got " + TypeName(item) + "; quote it (\"...\")");
      // Keep the argument positions aligned with `args` for later lints.
      out.push_back("");
      if (field == "args") arg_locs_.push_back(Loc(item.source()));
    }
  }
  return out;
}

void RecipeReader::ReadEnv(const TomlEntry& e) {
  const auto* table = e.value->as_table();
  if (table == nullptr) {
    Error(Loc(e.value->source()),
          "'env' must be a table of strings (env = {NAME = \"value\"} or an "
          "[env] section), "
          "got " +
              TypeName(*e.value));
    return;
  }
  for (const TomlEntry& var : InFileOrder(*table)) {
    // Under an [env] header, a lowercase top-level key is the ordering trap,
    // not a variable: `args` below [env] would vanish from the command line.
    if (!table->is_inline() && IsTopLevelOnly(var.key)) {
      OrderingTrap(var, "[env]", *table);
      continue;
    }
    const SourceLoc key_loc = Loc(var.key_ref->source());
    if (!IsEnvVarName(var.key)) {
      Error(key_loc, "env '" + var.key +
                         "' is not a valid environment variable name "
                         "([A-Za-z_][A-Za-z0-9_]*)");
    }
    if (const auto* from = var.value->as_table()) {
      const auto* name = from->get("from_env");
      if (from->size() != 1 || name == nullptr || !name->is_string() ||
          !IsEnvVarName(name->as_string()->get())) {
        Error(Loc(var.value->source()),
              "env '" + var.key +
                  "' must be a string or {from_env = \"VAR\"} (the value of VAR in the "
                  "environment of the controller that runs fleet apply)");
        continue;
      }
      recipe_->env_from[var.key] = name->as_string()->get();
      continue;
    }
    const auto* s = var.value->as_string();
    if (s != nullptr && IsSecretValue(var.key, s->get())) {
      // A recipe is committed with the manifests: a token in it is leaked.
      Error(Loc(var.value->source()),
            "env '" + var.key +
                "' holds what looks like a token; recipes are committed with the manifests: "
                "take it from the controller's environment instead: " +
                var.key + " = {from_env = \"" + var.key + "\"}");
      continue;
    }
    if (s == nullptr) {
      std::string message = "env '" + var.key + "' must be a string, got " + TypeName(*var.value);
      const std::string text = ScalarText(*var.value);
      if (!text.empty()) message += "; quote it: " + var.key + " = \"" + text + "\"";
      Error(Loc(var.value->source()), message);
      continue;
    }
    recipe_->env[var.key] = s->get();
    strings_.push_back({s->get(), "env." + var.key, Loc(var.value->source())});
  }
}

void RecipeReader::ReadCpus(const TomlEntry& e) {
  const SourceLoc loc = Loc(e.value->source());
  std::string text;
  if (const auto* s = e.value->as_string()) {
    text = s->get();
  } else if (e.value->is_integer() || e.value->is_floating_point()) {
    text = ScalarText(*e.value);
  } else {
    Error(loc, "'cpus' must be a number or a string such as \"6\" or \"1.5\", got " +
                   TypeName(*e.value));
    return;
  }
  if (!IsDecimal(text) || std::strtod(text.c_str(), nullptr) <= 0) {
    Error(loc, "'cpus' must be a positive number such as 6 or 1.5, got '" + text + "'");
    return;
  }
  recipe_->cpus = text;
}

// gpus = "all" | N | ["0", "1"]: every GPU, a count, or device ids.
void RecipeReader::ReadGpus(const TomlEntry& e) {
  const SourceLoc loc = Loc(e.value->source());
  const std::string expected =
      "'gpus' must be \"all\", a count such as 2, or device ids such as [\"0\", \"1\"]";
  if (const auto* s = e.value->as_string()) {
    const std::string v = s->get();
    if (v == "all" ||
        (IsDecimal(v) && v.find('.') == std::string::npos && std::atoi(v.c_str()) > 0))
      recipe_->gpus = v;
    else
      Error(loc, expected + ", got '" + v + "'");
  } else if (const auto* n = e.value->as_integer()) {
    if (n->get() > 0)
      recipe_->gpus = std::to_string(n->get());
    else
      Error(loc, expected + ", got " + std::to_string(n->get()));
  } else if (const auto* a = e.value->as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node* id = a->get(i);
      std::string v = id->is_string()    ? id->as_string()->get()
                      : id->is_integer() ? std::to_string(id->as_integer()->get())
                                         : "";
      const bool ok = !v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_';
      });
      if (!ok)
        Error(Loc(id->source()), "gpus[" + std::to_string(i) +
                                     "] must be a device index or UUID such as \"0\" or "
                                     "\"GPU-5f1c...\"");
      else
        recipe_->gpu_ids.push_back(v);
    }
    if (a->empty()) Error(loc, expected + "; leave it out for no GPU");
  } else {
    Error(loc, expected + ", got " + TypeName(*e.value));
  }
}

// ulimits = {memlock = -1, stack = 67108864} (or an [ulimits] section):
// NAME = N (soft and hard; -1: unlimited) or "SOFT:HARD".
void RecipeReader::ReadUlimits(const TomlEntry& e) {
  static const std::vector<std::string> names = {
      "core",   "cpu",   "data", "fsize",  "locks",  "memlock",    "msgqueue", "nice",
      "nofile", "nproc", "rss",  "rtprio", "rttime", "sigpending", "stack"};
  const auto* table = e.value->as_table();
  if (table == nullptr) {
    Error(Loc(e.value->source()),
          "'ulimits' must be a table such as ulimits = {memlock = -1, stack = 67108864}, got " +
              TypeName(*e.value));
    return;
  }
  for (const TomlEntry& u : InFileOrder(*table)) {
    if (!table->is_inline() && IsTopLevelOnly(u.key)) {
      OrderingTrap(u, "[ulimits]", *table);
      continue;
    }
    if (std::find(names.begin(), names.end(), u.key) == names.end()) {
      std::string message = "unknown ulimit '" + u.key + "'";
      const std::string near = NearestName(u.key, names);
      if (!near.empty()) message += "; did you mean '" + near + "'?";
      Error(Loc(u.key_ref->source()), message);
      continue;
    }
    std::string v;
    if (const auto* n = u.value->as_integer()) v = std::to_string(n->get());
    if (const auto* s = u.value->as_string()) v = s->get();
    const size_t colon = v.find(':');
    auto number = [](const std::string& t) {
      return !t.empty() && (t == "-1" || std::all_of(t.begin(), t.end(), [](unsigned char c) {
                              return std::isdigit(c);
                            }));
    };
    const bool ok = colon == std::string::npos
                        ? number(v)
                        : number(v.substr(0, colon)) && number(v.substr(colon + 1));
    if (!ok) {
      Error(Loc(u.value->source()), "ulimit '" + u.key +
                                        "' must be a number (-1: unlimited) or \"SOFT:HARD\", "
                                        "e.g. memlock = -1, stack = 67108864");
      continue;
    }
    recipe_->ulimits[u.key] = v;
  }
}

void RecipeReader::ReadSize(const TomlEntry& e, std::string* out) {
  auto text = ReadString(e, e.key);
  if (!text) return;
  if (!IsSize(*text)) {
    Error(Loc(e.value->source()),
          "'" + e.key + "' must be a size such as \"9g\" or \"512m\", got '" + *text + "'");
    return;
  }
  *out = *text;
}

void RecipeReader::ReadMounts(const TomlEntry& e) {
  const auto* array = e.value->as_array();
  if (array == nullptr) {
    std::string message =
        "'extra_mounts' must be an array of tables ([[extra_mounts]] "
        "entries with host, container, read_only), got " +
        TypeName(*e.value);
    if (e.value->is_table())
      message += "; write the header as [[extra_mounts]], not [extra_mounts]";
    Error(Loc(e.value->source()), message);
    return;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& item = *array->get(i);
    if (const auto* table = item.as_table()) {
      ReadMount(*table, i);
    } else {
      Error(Loc(item.source()), "extra_mounts[" + std::to_string(i) +
                                    "] must be a table {host, container, read_only}, got " +
                                    TypeName(item));
    }
  }
}

void RecipeReader::ReadMount(const toml::table& table, size_t index) {
  const std::string field = "extra_mounts[" + std::to_string(index) + "]";
  RecipeMount mount;
  bool has_host = false;
  bool has_container = false;
  for (const TomlEntry& e : InFileOrder(table)) {
    const SourceLoc value_loc = Loc(e.value->source());
    if (IsTopLevelOnly(e.key)) {
      OrderingTrap(e, "[[extra_mounts]]", table);
    } else if (e.key == "host" || e.key == "container") {
      const auto* s = e.value->as_string();
      if (s == nullptr) {
        Error(value_loc, field + "." + e.key + " must be a string path, got " + TypeName(*e.value));
        continue;
      }
      strings_.push_back({s->get(), field + "." + e.key, value_loc});
      if (e.key == "host") {
        mount.host = s->get();
        has_host = !mount.host.empty();
      } else {
        mount.container = s->get();
        has_container = !mount.container.empty();
        if (has_container && mount.container[0] != '/' && mount.container[0] != '{') {
          Error(value_loc, field + ".container '" + mount.container +
                               "' must be an absolute path inside the container");
        }
      }
    } else if (e.key == "read_only") {
      if (const auto* b = e.value->as_boolean()) {
        mount.read_only = b->get();
      } else {
        Error(value_loc, field + ".read_only must be true or false, got " + TypeName(*e.value));
      }
    } else {
      std::string message = "unknown key '" + e.key + "' in " + field;
      const std::string near = NearestName(e.key, MountKeys());
      message += near.empty() ? "; expected host, container or read_only"
                              : "; did you mean '" + near + "'?";
      Error(Loc(e.key_ref->source()), message);
    }
  }
  const SourceLoc header = Loc(table.source());
  if (!has_host) Error(header, field + " has no 'host' (required: the path on the node)");
  if (!has_container) {
    Error(header, field + " has no 'container' (required: the path inside the container)");
  }
  recipe_->extra_mounts.push_back(std::move(mount));
}

void RecipeReader::OrderingTrap(const TomlEntry& e, const std::string& header,
                                const toml::table& table) {
  const int header_line = static_cast<int>(table.source().begin.line);
  const bool also_at_top =
      std::find(top_level_seen_.begin(), top_level_seen_.end(), e.key) != top_level_seen_.end();
  const std::string consequence = also_at_top ? "this '" + e.key + "' would be ignored"
                                              : "this recipe would run with no " + e.key;
  const std::string where =
      header == "[env]" ? "the [env] header" : "the first " + header + " header";
  Error(Loc(e.key_ref->source()),
        "'" + e.key + "' is inside " + header + " (line " + std::to_string(header_line) +
            "): TOML puts every key after a " + (header == "[env]" ? "[table]" : "[[table]]") +
            " header into that table, so " + consequence + "; move '" + e.key + "' above " + where);
}

void RecipeReader::CheckTwoPositionals() {
  if (recipe_->model.empty() || recipe_->args.empty() || arg_locs_.empty()) return;
  const std::string& first = recipe_->args[0];
  if (first.empty() || first[0] == '-') return;
  Error(arg_locs_[0], "args[0] '" + first +
                          "' is a positional argument, but the launcher "
                          "already passes model '" +
                          recipe_->model +
                          "' as the positional model: the server would get two "
                          "models and refuse "
                          "('unrecognized arguments'); set model = \"\" when "
                          "args carries the model path, "
                          "or start args with a --flag");
}

// The name the serve answers to (what ExpectedServedModel reads from the
// command) reaches the gateway's HAProxy config: it passes the one served
// name check (manifests/served_name.h). A placeholder counts as a safe
// word here; what it becomes is checked again at plan, rendered.
void RecipeReader::CheckServedName() {
  std::string value, field;
  std::optional<SourceLoc> loc;
  if (auto arg = FindServedNameArg(recipe_->args); arg && arg->index < arg_locs_.size()) {
    value = arg->value;
    field = "args[" + std::to_string(arg->index) + "]";
    loc = arg_locs_[arg->index];
  } else if (!recipe_->model.empty() && model_loc_) {
    value = recipe_->model;
    field = "model";
    loc = model_loc_;
  } else {
    return;
  }
  const std::vector<std::string>& known = RecipePlaceholders();
  for (const std::string& name : PlaceholderNames(value))
    if (std::find(known.begin(), known.end(), name) == known.end()) return;  // reported
  std::string filled = value;
  for (const std::string& name : known)
    for (size_t at; (at = filled.find("{" + name + "}")) != std::string::npos;)
      filled.replace(at, name.size() + 2, "0");
  const std::string problem = ServedNameProblem(filled);
  if (problem.empty()) return;
  Error(*loc, field + " '" + value +
                  "' is the model name the serve answers to, which a gateway writes into its "
                  "HAProxy config: it " +
                  problem);
}

void RecipeReader::CheckPlaceholders() {
  const std::vector<std::string>& allowed = RecipePlaceholders();
  for (const RecipeString& s : strings_) {
    for (const std::string& name : PlaceholderNames(s.value)) {
      if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
      std::string message = "unknown placeholder '{" + name + "}' in " + s.field;
      const std::string near = NearestName(name, allowed);
      if (!near.empty()) message += "; did you mean '{" + near + "}'?";
      message +=
          " (the launcher fills {port}, {model_path}, {host}, {node}, and for a deployment on "
          "several nodes {rank}, {nnodes} and {head}; from the fabric {fabric_addr}, {fabric_if}, "
          "{fabric_hca}, {fabric_gid_index} and {head_fabric_addr})";
      Error(s.loc, message);
    }
  }
}

}  // namespace

const std::vector<std::string>& RecipePlaceholders() {
  // clang-format off
  static const std::vector<std::string> names = {
      "port", "model_path", "host", "node", "rank", "nnodes", "head",
      "fabric_addr", "fabric_if", "fabric_hca", "fabric_gid_index", "head_fabric_addr"};
  // clang-format on
  return names;
}

bool RecipeUsesPlaceholder(const Recipe& recipe, const std::string& name) {
  const std::string token = "{" + name + "}";
  auto has = [&](const std::string& s) { return s.find(token) != std::string::npos; };
  if (has(recipe.model)) return true;
  if (std::any_of(recipe.args.begin(), recipe.args.end(), has)) return true;
  if (std::any_of(recipe.devices.begin(), recipe.devices.end(), has)) return true;
  for (const auto& [k, v] : recipe.env) {
    if (has(v)) return true;
  }
  for (const RecipeMount& m : recipe.extra_mounts) {
    if (has(m.host) || has(m.container)) return true;
  }
  return false;
}

bool ParseRecipe(std::string_view text, const std::string& display_file, Recipe* recipe,
                 Diagnostics* diags) {
  Diagnostics found;
  try {
    toml::table root = toml::parse(text, display_file);
    RecipeReader(display_file, recipe, &found).Read(root);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    std::string message = "TOML syntax error: " + std::string(e.description());
    if (message.find("expected '='") != std::string::npos) {
      message += " (a comment line that lost its '#'?)";
    }
    found.push_back(
        {Diagnostic::Severity::kError,
         SourceLoc{display_file, static_cast<int>(begin.line), static_cast<int>(begin.column)},
         message});
  } catch (const std::exception& e) {
    found.push_back({Diagnostic::Severity::kError, SourceLoc{display_file, 0, 0},
                     std::string("cannot read recipe: ") + e.what()});
  }
  const bool ok = !HasErrors(found);
  diags->insert(diags->end(), found.begin(), found.end());
  return ok;
}

bool LoadRecipe(const std::string& path, const std::string& display_file, Recipe* recipe,
                Diagnostics* diags) {
  recipe->file = path;
  const FileText read = ReadFileText(path, "recipe file " + path);
  if (!read.ok) {
    diags->push_back(
        {Diagnostic::Severity::kError, SourceLoc{display_file, 0, 0}, read.error, read.own_fault});
    return false;
  }
  return ParseRecipe(read.text, display_file, recipe, diags);
}

}  // namespace fleet
