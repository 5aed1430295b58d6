// `fleet events` and `fleet heal reset`: what `fleet watch --heal` did, and
// forgetting what it keeps of a serve (its tries, its quarantine).
#include <cstdio>
#include <ctime>
#include <iostream>

#include "manifests/duration.h"
#include "manifests/manifest.h"
#include "providers/shared/serving/deployment_json.h"
#include "src/engine/commands.h"
#include "src/engine/serve_commands.h"
#include "src/provider.h"
#include "state/state.h"

namespace fleet {
namespace {

// The manifests' state store; null (the errors printed) when they do not load.
std::unique_ptr<StateStore> OpenStore(const GlobalOptions& g) {
  Manifest m;
  return LoadManifestSaying(g, &m) ? OpenStateStore(m.state) : nullptr;
}

std::string Rfc3339(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int CmdEvents(const GlobalOptions& g, const std::string& since, bool json) {
  std::string from;
  if (!since.empty()) {
    std::optional<int> secs = ParseDurationSeconds(since, 0);
    if (!secs) {
      std::cerr << "fleet: --since " << since << " is not a duration (e.g. 1h, 30m)\n";
      return 1;
    }
    from = Rfc3339(g.clock->UnixSeconds() - *secs);
  }
  std::unique_ptr<StateStore> store = OpenStore(g);
  if (!store) return 1;
  Result<std::vector<nlohmann::json>> events = store->Events(from);
  if (!events.ok()) {
    std::cerr << "fleet: " << events.status().message() << "\n";
    return 1;
  }
  for (const nlohmann::json& e : *events) {
    if (json) {
      std::cout << e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      continue;
    }
    std::printf("%-20s %-10s %-32s %-11s %s\n", e.value("time", "").c_str(),
                e.value("event", "").c_str(), e.value("address", "").c_str(),
                e.value("outcome", "").c_str(), e.value("detail", "").c_str());
  }
  if (!json && events->empty())
    std::cout << "No events" << (from.empty() ? "" : " since " + from) << ".\n";
  return 0;
}

int CmdHealReset(const GlobalOptions& g, const std::string& address) {
  std::unique_ptr<StateStore> store = OpenStore(g);
  if (!store) return 1;
  Result<std::unique_ptr<StateLock>> lock = store->Lock("heal reset");
  if (!lock.ok()) {
    std::cerr << "fleet: " << lock.status().message() << "\n";
    return 1;
  }
  Result<State> state = store->Load();
  if (!state.ok()) {
    std::cerr << "fleet: " << state.status().message() << "\n";
    return 1;
  }
  const ResourceRecord* r = state->Find(address);
  std::optional<DeploymentRecord> rec;
  if (r != nullptr && RoleOf(r->type) == Role::kServe) rec = DeploymentRecordFrom(r->attributes);
  if (!rec) {
    std::cerr << "fleet: no deployment " << address << " in the state\n";
    return 1;
  }
  if (!rec->heal || rec->heal->Empty()) {
    std::cout << address << ": fleet watch --heal keeps nothing of it; nothing to reset.\n";
    return 0;
  }
  const bool was_quarantined = rec->heal->quarantined;
  rec->heal.reset();
  ResourceRecord updated = *r;
  updated.attributes = *rec;
  updated.updated_at = NowRfc3339();
  state->Upsert(std::move(updated));
  ++state->serial;
  Status saved = store->Save(*state);
  if (!saved.ok()) {
    std::cerr << "fleet: " << saved.message() << "\n";
    return 1;
  }
  (void)store->AppendEvent(
      {{"time", NowRfc3339()},
       {"event", "heal_reset"},
       {"address", address},
       {"outcome", "reset"},
       {"detail", was_quarantined ? "quarantine lifted by hand" : "heal tries forgotten by hand"}});
  std::cout << address << ": " << (was_quarantined ? "quarantine lifted" : "heal tries forgotten")
            << "; fleet watch --heal may heal it again.\n";
  return 0;
}

}  // namespace fleet
