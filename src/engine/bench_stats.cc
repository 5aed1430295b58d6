#include "src/engine/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace fleet {
namespace {

nlohmann::json SpreadJson(const Spread& s) { return {{"median", s.median}, {"p95", s.p95}}; }

Spread SpreadFrom(const nlohmann::json& j, const char* key) {
  Spread s;
  if (!j.contains(key) || !j[key].is_object()) return s;
  const nlohmann::json& v = j[key];
  if (v.contains("median") && v["median"].is_number()) s.median = v["median"].get<double>();
  if (v.contains("p95") && v["p95"].is_number()) s.p95 = v["p95"].get<double>();
  return s;
}

// "1,886", "66", "4.5": the log writes rates as whole numbers with
// thousands separators; below 10 a decimal still says something.
std::string Rate(double v) {
  if (v < 0) return "-";
  if (v < 10) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  std::string digits = std::to_string(static_cast<long long>(std::llround(v)));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Millis(double s) {
  if (s < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", s * 1000);
  return buf;
}

std::string Secs(double s) {
  if (s < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

std::string Pair(const Spread& s, std::string (*f)(double)) {
  return f(s.median) + " (" + f(s.p95) + ")";
}

// "4K" for 4096, "512" for 512: the log's depth names.
std::string DepthName(int depth) {
  if (depth >= 1024 && depth % 1024 == 0) return std::to_string(depth / 1024) + "K";
  return std::to_string(depth);
}

}  // namespace

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

Spread SpreadOf(const std::vector<double>& values) {
  return {Quantile(values, 0.5), Quantile(values, 0.95)};
}

std::string BenchCell::Key() const {
  return "d" + std::to_string(depth) + "/c" + std::to_string(concurrency) + "/" +
         (fresh ? "fresh" : "cached");
}

nlohmann::json BenchCell::ToJson() const {
  nlohmann::json j = {{"depth", depth},
                      {"concurrency", concurrency},
                      {"context", fresh ? "fresh" : "cached"},
                      {"requests", requests},
                      {"failed", failed},
                      {"prompt_tokens", prompt_tokens},
                      {"ttft_s", SpreadJson(ttft_s)},
                      {"prefill_tps", SpreadJson(prefill_tps)},
                      {"decode_tps", SpreadJson(decode_tps)},
                      {"turn_s", SpreadJson(turn_s)}};
  if (!first_error.empty()) j["error"] = first_error;
  return j;
}

BenchCell BenchCell::FromJson(const nlohmann::json& j) {
  BenchCell c;
  if (!j.is_object()) return c;
  auto integer = [&](const char* key) {
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<int>() : 0;
  };
  c.depth = integer("depth");
  c.concurrency = integer("concurrency");
  c.fresh = !(j.contains("context") && j["context"] == "cached");
  c.requests = integer("requests");
  c.failed = integer("failed");
  c.prompt_tokens = integer("prompt_tokens");
  c.ttft_s = SpreadFrom(j, "ttft_s");
  c.prefill_tps = SpreadFrom(j, "prefill_tps");
  c.decode_tps = SpreadFrom(j, "decode_tps");
  c.turn_s = SpreadFrom(j, "turn_s");
  if (j.contains("error") && j["error"].is_string()) c.first_error = j["error"];
  return c;
}

BenchCell Summarize(int depth, int concurrency, bool fresh,
                    const std::vector<BenchSample>& samples) {
  BenchCell c;
  c.depth = depth;
  c.concurrency = concurrency;
  c.fresh = fresh;
  c.requests = static_cast<int>(samples.size());
  std::vector<double> ttft, prefill, decode, turn, prompt;
  for (const BenchSample& s : samples) {
    if (!s.ok) {
      ++c.failed;
      if (c.first_error.empty()) c.first_error = s.error;
      continue;
    }
    prompt.push_back(s.prompt_tokens);
    if (s.ttft_s > 0) {
      ttft.push_back(s.ttft_s);
      prefill.push_back(s.prompt_tokens / s.ttft_s);
    }
    if (s.decode_tps > 0) decode.push_back(s.decode_tps);
    if (s.turn_s >= 0) turn.push_back(s.turn_s);
  }
  c.prompt_tokens = prompt.empty() ? 0 : static_cast<int>(std::lround(Quantile(prompt, 0.5)));
  c.ttft_s = SpreadOf(ttft);
  c.prefill_tps = SpreadOf(prefill);
  c.decode_tps = SpreadOf(decode);
  c.turn_s = SpreadOf(turn);
  return c;
}

std::string RenderBenchTable(const std::string& model, const std::vector<BenchCell>& cells) {
  std::ostringstream out;
  out << "| model | test | c | context | t/s median (p95) | ttft ms median (p95) | turn s median "
         "(p95) | ok |\n";
  out << "|:--|--:|--:|:--|--:|--:|--:|--:|\n";
  for (const BenchCell& c : cells) {
    const std::string at = " @ d" + DepthName(c.depth);
    const std::string ctx = c.fresh ? "fresh" : "cached";
    const std::string ok = std::to_string(c.requests - c.failed) + "/" + std::to_string(c.requests);
    out << "| " << model << " | pp" << c.prompt_tokens << at << " | " << c.concurrency << " | "
        << ctx << " | " << Pair(c.prefill_tps, Rate) << " | " << Pair(c.ttft_s, Millis) << " | "
        << Pair(c.turn_s, Secs) << " | " << ok << " |\n";
    out << "| " << model << " | tg" << at << " | " << c.concurrency << " | " << ctx << " | "
        << Pair(c.decode_tps, Rate) << " |  |  |  |\n";
  }
  return out.str();
}

std::string BenchSummaryLine(const std::vector<BenchCell>& cells) {
  double pp_lo = -1, pp_hi = -1, tg_lo = -1, tg_hi = -1;
  std::vector<double> turns;
  std::vector<int> cs;
  auto widen = [](double v, double* lo, double* hi) {
    if (v < 0) return;
    if (*lo < 0 || v < *lo) *lo = v;
    if (*hi < 0 || v > *hi) *hi = v;
  };
  for (const BenchCell& c : cells) {
    // The log's pp range is the fresh prefill: a cached prompt's rate is
    // the cache's, not the engine's.
    if (c.fresh && c.depth > 0) widen(c.prefill_tps.median, &pp_lo, &pp_hi);
    widen(c.decode_tps.median, &tg_lo, &tg_hi);
    if (c.turn_s.median >= 0) turns.push_back(c.turn_s.median);
    if (std::find(cs.begin(), cs.end(), c.concurrency) == cs.end()) cs.push_back(c.concurrency);
  }
  std::string conc;
  for (int c : cs) conc += (conc.empty() ? "c" : "/c") + std::to_string(c);
  auto range = [](double lo, double hi) {
    return lo == hi || Rate(lo) == Rate(hi) ? Rate(lo) : Rate(lo) + "-" + Rate(hi);
  };
  char turn[32];
  std::snprintf(turn, sizeof turn, "%.1f", Quantile(turns, 0.5));
  return "pp " + range(pp_lo, pp_hi) + " t/s, tg " + range(tg_lo, tg_hi) + " t/s (" + conc +
         "), median turn " + turn + " s";
}

}  // namespace fleet
