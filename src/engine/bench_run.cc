#include "src/engine/bench_run.h"

#include <future>

#include "providers/shared/serving/smoke_check.h"
#include "src/openai_client.h"

namespace fleet {
namespace {

// The question every prompt ends with: it asks for a reply of more than
// max_tokens tokens, so that each request decodes its whole budget (the tg
// figure measures max_tokens tokens, not a short answer's few).
constexpr char kQuestion[] =
    "\n\nWrite a long story about the words above, at least a thousand words.";

std::string Prompt(int depth) {
  // FreshContextPrompt starts with a random session id: even a depth of 0
  // is a prompt no cache holds.
  std::string p = FreshContextPrompt(depth < 16 ? 16 : depth);
  const size_t tail = p.rfind("\n\n");
  if (tail != std::string::npos) p.resize(tail);
  return p + kQuestion;
}

BenchSample Measure(const std::string& base_url, const std::string& model,
                    const BenchProfile& profile, const std::string& prompt) {
  ChatRequest req;
  req.model = model;
  req.prompt = prompt;
  req.max_tokens = profile.max_tokens;
  req.stream = true;
  SmokeCheck allowance;  // the smoke checks' prefill allowance, 10 minutes at most
  allowance.timeout_s = 600;
  req.first_token_s = PrefillAllowanceSeconds(allowance, prompt.size());
  req.timeout_s = req.first_token_s + 120 + profile.max_tokens;
  const ChatReply reply = Chat(base_url, req);
  BenchSample s;
  s.turn_s = reply.wall_s;
  if (!reply.error.empty()) {
    s.error = reply.error;
    return s;
  }
  if (reply.ttft_s < 0) {
    s.error = "no token came";
    return s;
  }
  s.ok = true;
  s.ttft_s = reply.ttft_s;
  s.decode_tps = reply.decode_tps;
  // The engine's own count when it gives one; else the ~4 characters a
  // token the rest of fleet assumes.
  s.prompt_tokens =
      reply.prompt_tokens > 0 ? reply.prompt_tokens : static_cast<int>(prompt.size() / 4);
  return s;
}

// `rounds` rounds of `prompts.size()` requests at once.
std::vector<BenchSample> Rounds(const std::string& base_url, const std::string& model,
                                const BenchProfile& profile,
                                const std::function<std::string(int slot)>& prompt_for, int c) {
  std::vector<BenchSample> samples;
  for (int round = 0; round < profile.requests; ++round) {
    std::vector<std::future<BenchSample>> running;
    for (int slot = 0; slot < c; ++slot) {
      const std::string prompt = prompt_for(slot);
      running.push_back(std::async(
          std::launch::async, [&, prompt] { return Measure(base_url, model, profile, prompt); }));
    }
    for (auto& f : running) samples.push_back(f.get());
  }
  return samples;
}

}  // namespace

std::vector<BenchCell> RunBenchProfile(const std::string& base_url, const std::string& model,
                                       const BenchProfile& profile, const BenchProgress& progress) {
  const int total = static_cast<int>(profile.depths.size() * profile.concurrency.size()) *
                    ((profile.fresh ? 1 : 0) + (profile.cached ? 1 : 0));
  std::vector<BenchCell> cells;
  auto done = [&](BenchCell cell) {
    cells.push_back(std::move(cell));
    if (progress) progress(cells.back(), static_cast<int>(cells.size()), total);
  };
  for (int depth : profile.depths) {
    for (int c : profile.concurrency) {
      if (profile.fresh)
        done(Summarize(depth, c, true,
                       Rounds(
                           base_url, model, profile, [&](int) { return Prompt(depth); }, c)));
      if (profile.cached) {
        // One prompt per slot, each sent once before the cell (unmeasured):
        // what the cell measures is the engine with that prefix cached.
        std::vector<std::string> prompts;
        for (int slot = 0; slot < c; ++slot) prompts.push_back(Prompt(depth));
        for (const std::string& p : prompts) (void)Measure(base_url, model, profile, p);
        done(Summarize(depth, c, false,
                       Rounds(
                           base_url, model, profile,
                           [&](int slot) { return prompts[static_cast<size_t>(slot)]; }, c)));
      }
    }
  }
  return cells;
}

}  // namespace fleet
