#include "src/engine/bench_record.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fleet {

nlohmann::json BenchRecord::ToJson() const {
  nlohmann::json j = {{"id", id},
                      {"time", time},
                      {"deployment", deployment},
                      {"node", node},
                      {"profile", profile},
                      {"model", model},
                      {"spec",
                       {{"image", spec.image_ref},
                        {"model_repo", spec.model_repo},
                        {"model_revision", spec.model_revision},
                        {"spec_hash", spec.spec_hash},
                        {"nodes", spec.nodes},
                        {"engine_args", spec.engine_args},
                        {"fleet_version", spec.fleet_version}}},
                      {"cells", nlohmann::json::array()}};
  for (const BenchCell& c : cells) j["cells"].push_back(c.ToJson());
  if (quality)
    j["quality"] = {
        {"passed", quality->passed},
        {"total", quality->total},
        {"score", std::to_string(quality->passed) + "/" + std::to_string(quality->total)},
        {"failures", quality_failures}};
  if (!harness.is_null()) j["harness"] = harness;
  return j;
}

Result<BenchRecord> BenchRecord::FromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("cells") ||
      !j["cells"].is_array())
    return Status::Error("not a bench record (no id or cells)");
  BenchRecord r;
  auto str = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string();
  };
  r.id = str(j, "id");
  r.time = str(j, "time");
  r.deployment = str(j, "deployment");
  r.node = str(j, "node");
  r.profile = str(j, "profile");
  r.model = str(j, "model");
  if (j.contains("spec") && j["spec"].is_object()) {
    const nlohmann::json& s = j["spec"];
    r.spec.image_ref = str(s, "image");
    r.spec.model_repo = str(s, "model_repo");
    r.spec.model_revision = str(s, "model_revision");
    r.spec.spec_hash = str(s, "spec_hash");
    r.spec.fleet_version = str(s, "fleet_version");
  }
  for (const nlohmann::json& c : j["cells"]) r.cells.push_back(BenchCell::FromJson(c));
  if (j.contains("quality") && j["quality"].is_object()) {
    const nlohmann::json& q = j["quality"];
    QualityCount count;
    count.passed = q.value("passed", 0);
    count.total = q.value("total", 0);
    r.quality = count;
  }
  if (j.contains("harness")) r.harness = j["harness"];
  return r;
}

std::string BenchRecord::Markdown() const {
  std::ostringstream out;
  out << "# Bench " << id << ": deployment." << deployment << "@" << node << "\n\n";
  out << "- date: " << time << "\n- profile: " << profile << "\n- image: `" << spec.image_ref
      << "`\n- model: " << (spec.model_repo.empty() ? "-" : spec.model_repo) << " @ "
      << (spec.model_revision.empty() ? "-" : spec.model_revision) << "\n- spec: `"
      << spec.spec_hash << "`\n- nodes:";
  for (const std::string& n : spec.nodes) out << " " << n;
  out << "\n- engine args: `";
  for (size_t i = 0; i < spec.engine_args.size(); ++i) out << (i ? " " : "") << spec.engine_args[i];
  out << "`\n- fleet: " << spec.fleet_version << "\n\n";
  out << RenderBenchTable(model, cells) << "\n" << BenchSummaryLine(cells) << "\n";
  if (quality) {
    out << "\nQuality: " << quality->passed << "/" << quality->total << "\n";
    for (const std::string& f : quality_failures) out << "- " << f << "\n";
  }
  if (!harness.is_null()) out << "\nHarness: `" << harness.dump() << "`\n";
  return out.str();
}

std::string BenchRunId(const std::string& time, const std::string& spec_hash) {
  std::string t = time;
  for (char& c : t)
    if (c == ':') c = '-';
  return t + "_" + spec_hash.substr(0, 12);
}

Status WriteBenchReport(const std::string& root, const BenchRecord& r) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(root) / "reports" / r.deployment;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Error("cannot create " + dir.string() + ": " + ec.message());
  for (const auto& [ext, text] :
       {std::pair<std::string, std::string>{".json", r.ToJson().dump(2) + "\n"},
        std::pair<std::string, std::string>{".md", r.Markdown()}}) {
    const fs::path file = dir / (r.id + ext);
    std::ofstream out(file);
    out << text;
    if (!out.flush()) return Status::Error("cannot write " + file.string());
  }
  return Status::OK();
}

}  // namespace fleet
