#include "providers/shared/gpu_facts.h"

#include <charconv>
#include <string>
#include <utility>

#include "manifests/utf8.h"
#include "src/json_number.h"
#include "src/probe/drop_caches_sudo_sh.h"

namespace fleet {
namespace {

using nlohmann::json;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// ---------------------------------------------------------------------------
// Reading JSON without exceptions: each getter returns false with *error
// naming the field ("gpus[0].memory_free_bytes: ...").

// A value for an error message; replaces invalid UTF-8 instead of throwing.
std::string Show(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool GetOptUint(const json& obj, const char* key, const std::string& path,
                std::optional<uint64_t>* out, std::string* error) {
  out->reset();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  *out = NonNegativeInteger(*it);
  if (!*out) {
    *error = path + key + ": expected a non-negative integer or null, got " + Show(*it);
    return false;
  }
  return true;
}

// Null or missing reads as "".
bool GetOptString(const json& obj, const char* key, const std::string& path, std::string* out,
                  std::string* error) {
  out->clear();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) {
    *error = path + key + ": expected a string or null, got " + Show(*it);
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

// Null or missing reads as false.
bool GetOptBool(const json& obj, const char* key, const std::string& path, bool* out,
                std::string* error) {
  *out = false;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *error = path + key + ": expected true, false or null, got " + Show(*it);
    return false;
  }
  *out = it->get<bool>();
  return true;
}

json OptUintJson(const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); }

json OptStringJson(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

// One GPU object; fleet-probe and GpuFactsToJson share its shape.
bool GpuFromJson(const json& j, const std::string& path, GpuInfo* gpu, std::string* error) {
  if (!j.is_object()) {
    *error = path + ": expected an object";
    return false;
  }
  const std::optional<int> index = OptionalInteger<int>(j, "index");
  if (!index || *index < 0 || *index > 1'000'000) {
    *error = path + ".index: expected a GPU index";
    return false;
  }
  gpu->index = *index;
  const std::string p = path + ".";
  if (!GetOptString(j, "name", p, &gpu->name, error) ||
      !GetOptString(j, "uuid", p, &gpu->uuid, error) ||
      !GetOptString(j, "compute_capability", p, &gpu->compute_capability, error) ||
      !GetOptUint(j, "memory_total_bytes", p, &gpu->memory_total_bytes, error) ||
      !GetOptUint(j, "memory_free_bytes", p, &gpu->memory_free_bytes, error) ||
      !GetOptString(j, "memory_free_source", p, &gpu->memory_free_source, error) ||
      !GetOptUint(j, "memory_reclaimable_bytes", p, &gpu->memory_reclaimable_bytes, error) ||
      !GetOptBool(j, "unified_memory", p, &gpu->unified_memory, error)) {
    return false;
  }
  gpu->processes.clear();
  gpu->processes_known = false;
  const auto procs = j.find("processes");
  if (procs != j.end() && !procs->is_null()) {
    if (!procs->is_array()) {
      *error = p + "processes: expected an array or null";
      return false;
    }
    for (size_t i = 0; i < procs->size(); ++i) {
      const json& pj = (*procs)[i];
      const std::string pp = p + "processes[" + std::to_string(i) + "].";
      GpuProcess proc;
      std::optional<uint64_t> pid;
      if (!pj.is_object()) {
        *error = pp + ": expected an object";
        return false;
      }
      if (!GetOptUint(pj, "pid", pp, &pid, error) ||
          !GetOptUint(pj, "used_bytes", pp, &proc.used_bytes, error)) {
        return false;
      }
      if (!pid || *pid > UINT32_MAX) {
        *error = pp + "pid: expected a process id";
        return false;
      }
      proc.pid = static_cast<uint32_t>(*pid);
      gpu->processes.push_back(proc);
    }
    gpu->processes_known = true;
  }
  gpu->errors.clear();
  const auto errors = j.find("errors");
  if (errors != j.end() && !errors->is_null()) {
    if (!errors->is_array()) {
      *error = p + "errors: expected an array of strings";
      return false;
    }
    for (const json& e : *errors) {
      if (!e.is_string()) {
        *error = p + "errors: expected an array of strings";
        return false;
      }
      gpu->errors.push_back(e.get<std::string>());
    }
  }
  return true;
}

json GpuToJson(const GpuInfo& gpu) {
  json processes = nullptr;
  if (gpu.processes_known) {
    processes = json::array();
    for (const GpuProcess& p : gpu.processes) {
      processes.push_back({{"pid", p.pid}, {"used_bytes", OptUintJson(p.used_bytes)}});
    }
  }
  return {{"index", gpu.index},
          {"name", OptStringJson(gpu.name)},
          {"uuid", OptStringJson(gpu.uuid)},
          {"compute_capability", OptStringJson(gpu.compute_capability)},
          {"memory_total_bytes", OptUintJson(gpu.memory_total_bytes)},
          {"memory_free_bytes", OptUintJson(gpu.memory_free_bytes)},
          {"memory_free_source", OptStringJson(gpu.memory_free_source)},
          {"memory_reclaimable_bytes", OptUintJson(gpu.memory_reclaimable_bytes)},
          {"unified_memory", gpu.unified_memory},
          {"processes", std::move(processes)},
          {"errors", gpu.errors}};
}

bool GpusFromJson(const json& j, GpuFacts* facts, std::string* error) {
  const auto gpus = j.find("gpus");
  if (gpus == j.end() || !gpus->is_array()) {
    *error = "gpus: expected an array";
    return false;
  }
  for (size_t i = 0; i < gpus->size(); ++i) {
    GpuInfo gpu;
    if (!GpuFromJson((*gpus)[i], "gpus[" + std::to_string(i) + "]", &gpu, error)) {
      return false;
    }
    facts->gpus.push_back(std::move(gpu));
  }
  return true;
}

bool HostFromJson(const json& j, GpuFacts* facts, std::string* error) {
  const auto host = j.find("host");
  if (host == j.end() || host->is_null()) return true;
  if (!host->is_object()) {
    *error = "host: expected an object";
    return false;
  }
  return GetOptUint(*host, "mem_total_bytes", "host.", &facts->host_mem_total_bytes, error) &&
         GetOptUint(*host, "mem_available_bytes", "host.", &facts->host_mem_available_bytes, error);
}

// ---------------------------------------------------------------------------
// nvidia-smi CSV.

std::string_view Trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// nvidia-smi's way of saying "no value": [N/A], [Not Supported], [Unknown
// Error], ...
// `s` with every byte that is not part of UTF-8 (RFC 3629) replaced by
// U+FFFD: what nvidia-smi prints ends up in plans and state, JSON that holds
// only UTF-8 (nlohmann's dump throws on anything else).
std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

bool IsBracketed(std::string_view s) {
  return s.size() >= 2 && s.front() == '[' && s.back() == ']';
}

bool ParseUint(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// ---------------------------------------------------------------------------
// Budget arithmetic, in tenths of a GiB so that the figures shown add up.

uint64_t TenthsOfGib(uint64_t bytes) {
  const uint64_t rem = bytes & ((uint64_t{1} << 30) - 1);
  return (bytes >> 30) * 10 + ((rem * 10 + (uint64_t{1} << 29)) >> 30);
}

std::string FormatTenths(uint64_t tenths) {
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " GiB";
}

std::string Gib(uint64_t bytes) { return FormatTenths(TenthsOfGib(bytes)); }

struct Verdict {
  bool known = false;
  bool fits = false;
  bool fits_after_drop = false;  // free + reclaimable page cache
  uint64_t free_bytes = 0;
  uint64_t reclaimable_bytes = 0;
  std::string text;
};

// " (from NVML, no CUDA context)" where the free figure is not the CUDA
// driver's own (fleet-probe --no-context); "" otherwise.
std::string FreeSourceNote(const GpuInfo& gpu) {
  if (gpu.memory_free_source != "nvml" && gpu.memory_free_source != "host MemAvailable" &&
      gpu.memory_free_source != "host MemFree")
    return "";
  return " (from " +
         (gpu.memory_free_source == "nvml" ? std::string("NVML") : gpu.memory_free_source) +
         ", no CUDA context)";
}

std::string GpuLabel(const GpuInfo& gpu) {
  std::string label =
      "GPU " + std::to_string(gpu.index) + " (" + (gpu.name.empty() ? "name unknown" : gpu.name);
  if (gpu.unified_memory) label += ", unified";
  return label + ")";
}

// The note first: for nvidia-smi it tells the operator what to do about it.
std::string UnknownReason(const GpuFacts& facts, const GpuInfo& gpu) {
  if (!facts.note.empty()) return facts.note;
  std::string why;
  for (const std::string& e : gpu.errors) {
    why += (why.empty() ? "" : "; ") + e;
  }
  return why.empty() ? "not reported by " + facts.source : why;
}

Verdict Judge(const GpuFacts& facts, const GpuInfo& gpu, uint64_t need_bytes) {
  Verdict v;
  if (!gpu.memory_free_bytes) {
    v.text = GpuLabel(gpu) + " free memory is unknown (" + UnknownReason(facts, gpu) + ")";
    return v;
  }
  // Unified memory (GB10) too is decided on CUDA's free figure, not on the
  // host's MemAvailable: CUDA's is what a serving engine checks at start-up
  // (vLLM refuses to start when --gpu-memory-utilization x total exceeds it)
  // and what cudaMalloc gets without the kernel first dropping page cache.
  // MemAvailable counts that reclaimable cache and would say "fits" for a
  // start that then fails; it is shown so the operator sees what dropping
  // the cache would gain.
  v.known = true;
  v.free_bytes = *gpu.memory_free_bytes;
  v.fits = need_bytes <= v.free_bytes;
  const uint64_t need = TenthsOfGib(need_bytes);
  const uint64_t free = TenthsOfGib(v.free_bytes);
  v.text = GpuLabel(gpu) + " has " + FormatTenths(free) + " free";
  if (gpu.memory_total_bytes) v.text += " of " + Gib(*gpu.memory_total_bytes);
  v.text += FreeSourceNote(gpu);
  // Unified memory: the page cache the kernel would give back. A start that
  // fits only with it fits once fleet drops the cache before it: vLLM's
  // check (cuMemGetInfo) then sees it free. Judged in the same figures with
  // and without a CUDA context, since the probe reports both alike.
  if (gpu.unified_memory && gpu.memory_reclaimable_bytes) {
    v.reclaimable_bytes = *gpu.memory_reclaimable_bytes;
    v.fits_after_drop = !v.fits && need_bytes <= v.free_bytes + v.reclaimable_bytes;
    v.text += " + " + Gib(v.reclaimable_bytes) + " reclaimable page cache";
  }
  if (v.fits) {
    v.text += free > need ? ": fits with " + FormatTenths(free - need) + " to spare"
                          : ": fits with under 0.1 GiB to spare";
  } else if (v.fits_after_drop) {
    v.text += ": fits once the page cache is dropped (short by " +
              (need > free ? FormatTenths(need - free) : std::string("under 0.1 GiB")) +
              " without)";
  } else {
    const uint64_t with_cache = TenthsOfGib(v.free_bytes + v.reclaimable_bytes);
    v.text += need > with_cache ? ": short by " + FormatTenths(need - with_cache)
                                : ": short by under 0.1 GiB";
    if (v.reclaimable_bytes > 0) v.text += " even with the page cache dropped";
  }
  if (gpu.unified_memory && !gpu.memory_reclaimable_bytes && facts.host_mem_available_bytes &&
      gpu.memory_free_source != "host MemAvailable") {
    v.text += " (host MemAvailable " + Gib(*facts.host_mem_available_bytes);
    if (*facts.host_mem_available_bytes > v.free_bytes) {
      v.text +=
          ", which counts page cache that CUDA sees as used until it is "
          "dropped";
    }
    v.text += ")";
  }
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------

bool ParseProbeJson(std::string_view text, GpuFacts* out, std::string* error) {
  const json j = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                             /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = "fleet-probe output is not valid JSON";
    return false;
  }
  if (!j.is_object()) {
    *error = "fleet-probe output is not a JSON object";
    return false;
  }
  const auto version = j.find("probe_version");
  if (version == j.end() || !version->is_number_integer()) {
    *error = "probe_version: missing; not fleet-probe output";
    return false;
  }
  if (version->get<int64_t>() != 1) {
    *error =
        "probe_version " + Show(*version) + " is not supported (this fleet reads 1): update fleet";
    return false;
  }
  GpuFacts facts;
  facts.source = "fleet-probe";
  if (!HostFromJson(j, &facts, error) || !GpusFromJson(j, &facts, error) ||
      !GetOptBool(j, "cuda_context", "", &facts.cuda_context, error) ||
      !GetOptUint(j, "elapsed_ns", "", &facts.probe_elapsed_ns, error) ||
      !GetOptString(j, "cuda_context_refused", "", &facts.context_decision, error)) {
    return false;
  }
  // The probe's own refusal (a process holds a GPU) says more than the
  // caller's choice, which saw only fleet's serves.
  if (!facts.context_decision.empty())
    facts.context_decision = "no CUDA context: " + facts.context_decision;
  std::string cuda_error;
  for (const char* lib : {"cuda", "nvml"}) {
    const auto it = j.find(lib);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) {
      *error = std::string(lib) + ": expected an object";
      return false;
    }
    std::string lib_error, driver;
    const std::string path = std::string(lib) + ".";
    if (!GetOptString(*it, "error", path, &lib_error, error) ||
        !GetOptString(*it, "driver_version", path, &driver, error)) {
      return false;
    }
    if (std::string_view(lib) == "cuda") {
      cuda_error = lib_error;
    } else {
      facts.driver_version = driver;  // NVML's is the NVIDIA driver's version
    }
  }
  if (facts.gpus.empty()) {
    facts.note =
        "no GPU: " + (cuda_error.empty() ? std::string("CUDA reports no device") : cuda_error);
  }
  *out = std::move(facts);
  return true;
}

bool ParseNvidiaSmiCsv(std::string_view csv_noheader_output, GpuFacts* out, std::string* error) {
  GpuFacts facts;
  facts.source = "nvidia-smi";
  std::string unknown_value;  // the first [N/A]-like memory figure
  int line_number = 0;
  const std::string text = ValidUtf8(csv_noheader_output);
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = Trim(rest.substr(0, eol));
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    ++line_number;
    if (line.empty()) continue;
    if (line == "No devices were found") {
      facts.note = "no GPU: nvidia-smi: No devices were found";
      continue;
    }
    std::vector<std::string_view> fields;
    for (std::string_view l = line;;) {
      const size_t comma = l.find(',');
      fields.push_back(Trim(l.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      l.remove_prefix(comma + 1);
    }
    const std::string where = "nvidia-smi output line " + std::to_string(line_number);
    if (fields.size() != 6) {
      *error = where +
               ": expected 6 fields (index, name, uuid, memory.total, "
               "memory.free, driver_version), got " +
               std::to_string(fields.size()) + ": \"" + std::string(line) + "\"";
      return false;
    }
    GpuInfo gpu;
    uint64_t index = 0;
    if (!ParseUint(fields[0], &index) || index > 1'000'000) {
      *error = where + ": index \"" + std::string(fields[0]) + "\" is not a number";
      return false;
    }
    gpu.index = static_cast<int>(index);
    if (!IsBracketed(fields[1])) gpu.name = fields[1];
    if (!IsBracketed(fields[2])) gpu.uuid = fields[2];
    const std::pair<const char*, std::optional<uint64_t>*> memory[] = {
        {"memory.total", &gpu.memory_total_bytes}, {"memory.free", &gpu.memory_free_bytes}};
    for (size_t k = 0; k < 2; ++k) {
      const std::string_view value = fields[3 + k];
      uint64_t mib = 0;
      if (IsBracketed(value)) {
        gpu.errors.push_back("nvidia-smi reports " + std::string(memory[k].first) + " as " +
                             std::string(value));
        if (unknown_value.empty()) unknown_value = value;
      } else if (ParseUint(value, &mib) && mib <= UINT64_MAX / kMiB) {
        *memory[k].second = mib * kMiB;
      } else {
        *error = where + ": " + memory[k].first + " \"" + std::string(value) +
                 "\" is not a number of MiB";
        return false;
      }
    }
    if (gpu.memory_free_bytes) gpu.memory_free_source = "nvidia-smi";
    if (facts.driver_version.empty() && !IsBracketed(fields[5])) {
      facts.driver_version = fields[5];
    }
    facts.gpus.push_back(std::move(gpu));
  }
  if (!unknown_value.empty()) {
    facts.note = "memory unknown: nvidia-smi reports " + unknown_value +
                 " (unified memory?); install fleet-probe";
  } else if (facts.gpus.empty() && facts.note.empty()) {
    facts.note = "no GPU: nvidia-smi listed none";
  }
  *out = std::move(facts);
  return true;
}

json GpuFactsToJson(const GpuFacts& facts) {
  json gpus = json::array();
  for (const GpuInfo& gpu : facts.gpus) gpus.push_back(GpuToJson(gpu));
  return {{"source", facts.source},
          {"driver_version", OptStringJson(facts.driver_version)},
          {"note", facts.note},
          {"cuda_context", facts.cuda_context},
          {"context_decision", OptStringJson(facts.context_decision)},
          {"drop_caches_sudo",
           {{"answer", OptStringJson(facts.drop_caches_sudo)},
            {"command", OptStringJson(facts.drop_caches_command)},
            {"user", OptStringJson(facts.drop_caches_user)}}},
          {"host",
           {{"mem_total_bytes", OptUintJson(facts.host_mem_total_bytes)},
            {"mem_available_bytes", OptUintJson(facts.host_mem_available_bytes)}}},
          {"gpus", std::move(gpus)}};
}

bool GpuFactsFromJson(const json& j, GpuFacts* out, std::string* error) {
  std::string ignored;
  if (error == nullptr) error = &ignored;
  if (!j.is_object()) {
    *error = "GPU facts: expected an object";
    return false;
  }
  GpuFacts facts;
  if (!GetOptString(j, "source", "", &facts.source, error) ||
      !GetOptString(j, "driver_version", "", &facts.driver_version, error) ||
      !GetOptString(j, "note", "", &facts.note, error) ||
      !GetOptBool(j, "cuda_context", "", &facts.cuda_context, error) ||
      !GetOptString(j, "context_decision", "", &facts.context_decision, error) ||
      !HostFromJson(j, &facts, error) || !GpusFromJson(j, &facts, error)) {
    return false;
  }
  if (const auto sudo = j.find("drop_caches_sudo"); sudo != j.end() && !sudo->is_null()) {
    if (!sudo->is_object() ||
        !GetOptString(*sudo, "answer", "drop_caches_sudo.", &facts.drop_caches_sudo, error) ||
        !GetOptString(*sudo, "command", "drop_caches_sudo.", &facts.drop_caches_command, error) ||
        !GetOptString(*sudo, "user", "drop_caches_sudo.", &facts.drop_caches_user, error)) {
      if (!sudo->is_object()) *error = "drop_caches_sudo: expected an object";
      return false;
    }
  }
  if (facts.source != "fleet-probe" && facts.source != "nvidia-smi" && facts.source != "none") {
    *error = "source: expected \"fleet-probe\", \"nvidia-smi\" or \"none\", got \"" + facts.source +
             "\"";
    return false;
  }
  *out = std::move(facts);
  return true;
}

BudgetAnswer CheckMemoryBudget(const GpuFacts& facts, uint64_t need_bytes, int gpu_index) {
  BudgetAnswer answer;
  const std::string needs = "needs " + Gib(need_bytes);
  if (facts.source == "none" || facts.source.empty()) {
    answer.explanation = needs + ", but the node's GPUs are unknown" +
                         (facts.note.empty() ? "" : " (" + facts.note + ")");
    return answer;
  }
  answer.known = true;
  if (facts.gpus.empty()) {
    answer.explanation =
        needs + ", but the node has no GPU" + (facts.note.empty() ? "" : " (" + facts.note + ")");
    return answer;
  }

  std::vector<const GpuInfo*> candidates;
  for (const GpuInfo& gpu : facts.gpus) {
    if (gpu_index < 0 || gpu.index == gpu_index) candidates.push_back(&gpu);
  }
  if (candidates.empty()) {
    std::string have;
    for (const GpuInfo& gpu : facts.gpus) {
      have += (have.empty() ? "" : ", ") + std::to_string(gpu.index);
    }
    answer.explanation = needs + " on GPU " + std::to_string(gpu_index) +
                         ", but the node has no GPU " + std::to_string(gpu_index) + " (it has " +
                         have + ")";
    return answer;
  }

  std::vector<Verdict> verdicts;
  const Verdict* best = nullptr;   // the fitting GPU with the most free memory
  const Verdict* after = nullptr;  // else the one that fits once the cache is dropped
  bool all_known = true;
  for (const GpuInfo* gpu : candidates) verdicts.push_back(Judge(facts, *gpu, need_bytes));
  for (const Verdict& v : verdicts) {
    all_known = all_known && v.known;
    if (v.fits && (best == nullptr || v.free_bytes > best->free_bytes)) best = &v;
    if (v.fits_after_drop && (after == nullptr || v.free_bytes + v.reclaimable_bytes >
                                                      after->free_bytes + after->reclaimable_bytes))
      after = &v;
  }
  if (best != nullptr) {
    answer.fits = true;
    answer.explanation = needs + ", " + best->text;
    return answer;
  }
  if (after != nullptr) {
    answer.fits_after_drop = true;
    answer.explanation = needs + ", " + after->text;
    return answer;
  }
  // Neither yes nor no while a GPU that might fit is unknown.
  answer.known = all_known;
  answer.explanation = needs;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    answer.explanation += (i == 0 ? ", " : "; ") + verdicts[i].text;
  }
  return answer;
}

std::string DescribeGpuMemory(const GpuFacts& facts) {
  if (facts.source == "none" || facts.source.empty()) {
    return "GPU facts unknown" + (facts.note.empty() ? "" : ": " + facts.note);
  }
  if (facts.gpus.empty()) return facts.note.empty() ? "no GPU" : facts.note;
  std::string line;
  for (const GpuInfo& gpu : facts.gpus) {
    if (!line.empty()) line += "; ";
    line += GpuLabel(gpu);
    if (!gpu.memory_free_bytes) {
      line += " memory unknown (" + UnknownReason(facts, gpu) + ")";
      continue;
    }
    line += " " + Gib(*gpu.memory_free_bytes) + " free";
    if (gpu.memory_total_bytes) line += " of " + Gib(*gpu.memory_total_bytes);
    line += FreeSourceNote(gpu);
    if (gpu.unified_memory && gpu.memory_reclaimable_bytes) {
      line += " + " + Gib(*gpu.memory_reclaimable_bytes) + " reclaimable page cache";
    } else if (gpu.unified_memory && facts.host_mem_available_bytes &&
               gpu.memory_free_source != "host MemAvailable") {
      line += ", host MemAvailable " + Gib(*facts.host_mem_available_bytes);
    }
  }
  return line;
}

std::vector<std::string> DropCachesArgv() { return {"sysctl", "vm.drop_caches=3"}; }

std::string DropCachesSudoScript() {
  return std::string(kDropCachesSudoScript, kDropCachesSudoScriptSize);
}

void ParseDropCachesSudo(const std::map<std::string, std::string>& kv, GpuFacts* facts) {
  const auto get = [&](const char* key) {
    const auto it = kv.find(key);
    return it == kv.end() ? std::string() : it->second;
  };
  facts->drop_caches_sudo = get("drop_caches_sudo");
  facts->drop_caches_command = get("drop_caches_sudo_command");
  facts->drop_caches_user = get("drop_caches_sudo_user");
}

std::string DropCachesSudoRefusal(const std::string& node, const GpuFacts& facts) {
  if (facts.drop_caches_sudo.empty() || facts.drop_caches_sudo == "allowed") return "";
  const std::string user = facts.drop_caches_user.empty() ? "the SSH user" : facts.drop_caches_user;
  const std::string command = facts.drop_caches_command.empty()
                                  ? "/usr/sbin/sysctl vm.drop_caches=3"
                                  : facts.drop_caches_command;
  if (facts.drop_caches_sudo == "no-sudo")
    return "node " + node +
           " has no sudo, and the start must first drop the page cache (`sudo -n " + command + "`)";
  return "sudo on " + node + " asks " + user + " for a password for `sudo -n " + command +
         "` (fleet cannot answer one). Install this drop-in on " + node +
         " (`sudo visudo -f /etc/sudoers.d/fleet`), nothing broader:\n    " + user +
         " ALL=(root) NOPASSWD: " + command;
}

}  // namespace fleet
