#include "src/engine/bench_quality.h"

#include "manifests/smoke_schema.h"
#include "providers/shared/serving/smoke_check.h"

namespace fleet {
namespace {

SmokeCheck Chat(const std::string& name, const std::string& prompt, const std::string& expect) {
  SmokeCheck c;
  c.name = name;
  c.chat = prompt;
  c.expect = expect;
  return c;
}

// `text` as an ECMAScript pattern that matches it literally.
std::string Literal(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (std::string("\\^$.|?*+()[]{}").find(ch) != std::string::npos) out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

nlohmann::json QualityScore::ToJson() const {
  return {{"passed", passed}, {"total", total}, {"score", Text()}, {"failures", failures}};
}

std::vector<SmokeCheck> BuiltinQualitySet() {
  std::vector<SmokeCheck> out = {
      Chat("math1", "What is 127*89? Reply with the number only.", "\\b11303\\b"),
      Chat("math2", "What is 4096+1234? Reply with the number only.", "\\b5330\\b"),
      Chat("math3", "What is 9801/99? Reply with the number only.", "\\b99\\b"),
      Chat("math4", "What is 1000-1? Reply with the number only.", "\\b999\\b"),
      Chat("capital", "What is the capital of France? One word.", "(?i)paris"),
  };
  SmokeCheck tools;
  tools.name = "tools";
  tools.tools = true;
  out.push_back(tools);
  SmokeCheck needle;
  needle.name = "needle";
  needle.needle_tokens = 2000;
  out.push_back(needle);
  return out;
}

Result<std::vector<SmokeCheck>> ParseQualityJsonl(const std::string& file,
                                                  const std::string& text) {
  std::vector<SmokeCheck> out;
  size_t start = 0;
  for (int line = 1; start <= text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string l = text.substr(start, end - start);
    start = end + 1;
    const size_t first = l.find_first_not_of(" \t\r");
    if (first == std::string::npos || l[first] == '#') continue;
    const std::string where = file + ":" + std::to_string(line) + ": ";
    const nlohmann::json j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return Status::Error(where +
                           "not a JSON object (one {\"prompt\": ..., \"expected\": ...} "
                           "a line)");
    if (!j.contains("prompt") || !j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
      return Status::Error(where + "no \"prompt\" (a non-empty string)");
    SmokeCheck c;
    c.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>()
                                                         : "line" + std::to_string(line);
    c.chat = j["prompt"];
    if (j.contains("expect") && j["expect"].is_string()) {
      c.expect = j["expect"];
    } else if (j.contains("expected") && (j["expected"].is_string() || j["expected"].is_number())) {
      const std::string e =
          j["expected"].is_string() ? j["expected"].get<std::string>() : j["expected"].dump();
      c.expect = "(?i)" + Literal(e);
    } else {
      return Status::Error(where +
                           "no \"expected\" (the text the reply must contain) or "
                           "\"expect\" (a regular expression)");
    }
    std::regex re;
    std::string error;
    if (!CompileExpect(c.expect, &re, &error))
      return Status::Error(where + "\"expect\" is not a regular expression: " + error);
    out.push_back(c);
  }
  return out;
}

QualityScore RunQualitySet(const std::string& base_url, const std::string& model,
                           const std::vector<SmokeCheck>& items, Clock* clock) {
  QualityScore score;
  for (const SmokeCheck& item : items) {
    const SmokeResult r = RunOneCheck(base_url, model, item, clock);
    ++score.total;
    if (r.passed()) {
      ++score.passed;
    } else {
      score.failures.push_back(item.name + ": " + r.result + ": " + r.detail);
    }
  }
  return score;
}

}  // namespace fleet
