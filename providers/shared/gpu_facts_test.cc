#include "providers/shared/gpu_facts.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/support/run_shell.h"
#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Fixtures recorded in providers/shared/testdata (meson passes the path).
std::string ReadFixture(const std::string& name) {
  const char* dir = std::getenv("GPU_FACTS_TESTDATA");
  const std::string path =
      std::string(dir != nullptr ? dir : "providers/shared/testdata") + "/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

GpuFacts Probe(const std::string& fixture) {
  GpuFacts facts;
  std::string error;
  EXPECT_TRUE(ParseProbeJson(ReadFixture(fixture), &facts, &error)) << error;
  return facts;
}

GpuFacts Unprobed(const std::string& note) {
  GpuFacts facts;
  facts.source = "none";
  facts.note = note;
  return facts;
}

// `facts` as the node probe's sudo check left them.
GpuFacts WithDropCachesSudo(GpuFacts facts, const std::string& answer) {
  facts.drop_caches_sudo = answer;
  facts.drop_caches_command = "/usr/sbin/sysctl vm.drop_caches=3";
  facts.drop_caches_user = "lab";
  return facts;
}

GpuFacts Smi(const std::string& fixture) {
  GpuFacts facts;
  std::string error;
  EXPECT_TRUE(ParseNvidiaSmiCsv(ReadFixture(fixture), &facts, &error)) << error;
  return facts;
}

TEST(ParseProbeJson, Gb10IsUnifiedWithCudaMemoryFigures) {
  const GpuFacts facts = Probe("probe_gb10.json");
  EXPECT_EQ(facts.source, "fleet-probe");
  EXPECT_EQ(facts.driver_version, "580.95.05");
  EXPECT_EQ(facts.host_mem_total_bytes, 128526893056u);
  EXPECT_EQ(facts.host_mem_available_bytes, 118541094912u);
  EXPECT_EQ(facts.note, "");
  ASSERT_EQ(facts.gpus.size(), 1u);
  const GpuInfo& gpu = facts.gpus[0];
  EXPECT_EQ(gpu.index, 0);
  EXPECT_EQ(gpu.name, "NVIDIA GB10");
  EXPECT_EQ(gpu.uuid, "GPU-5b3e8f2a-91c4-4d7e-b0a6-3f1c2d9e8a47");
  EXPECT_EQ(gpu.compute_capability, "12.1");
  EXPECT_EQ(gpu.memory_total_bytes, 128526893056u);
  EXPECT_EQ(gpu.memory_free_bytes, 103401336832u);
  EXPECT_TRUE(gpu.unified_memory);
  EXPECT_TRUE(gpu.processes_known);
  ASSERT_EQ(gpu.processes.size(), 1u);
  EXPECT_EQ(gpu.processes[0].pid, 48213u);
  EXPECT_EQ(gpu.processes[0].used_bytes, std::nullopt);  // N/A, not 0
  EXPECT_TRUE(gpu.errors.empty());
}

TEST(ParseProbeJson, H200IsDiscrete) {
  const GpuFacts facts = Probe("probe_h200.json");
  ASSERT_EQ(facts.gpus.size(), 1u);
  EXPECT_EQ(facts.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(facts.gpus[0].compute_capability, "9.0");
  EXPECT_EQ(facts.gpus[0].memory_total_bytes, 150109106176u);
  EXPECT_FALSE(facts.gpus[0].unified_memory);
  EXPECT_TRUE(facts.gpus[0].processes_known);
  EXPECT_TRUE(facts.gpus[0].processes.empty());
}

TEST(ParseProbeJson, NoGpuSaysWhy) {
  const GpuFacts facts = Probe("probe_nogpu.json");
  EXPECT_EQ(facts.source, "fleet-probe");
  EXPECT_TRUE(facts.gpus.empty());
  EXPECT_EQ(facts.note.rfind("no GPU: libcuda.so.1", 0), 0u) << facts.note;
  EXPECT_TRUE(facts.host_mem_total_bytes.has_value());
}

TEST(ParseProbeJson, MalformedInputIsAnErrorNotACrash) {
  const char* bad[] = {
      "",
      "{",
      "not json",
      "[]",
      "{}",
      R"({"probe_version":2,"gpus":[]})",
      R"({"probe_version":"1","gpus":[]})",
      R"({"probe_version":1})",
      R"({"probe_version":1,"gpus":{}})",
      R"({"probe_version":1,"gpus":[7]})",
      R"({"probe_version":1,"gpus":[{"name":"x"}]})",
      R"({"probe_version":1,"gpus":[{"index":-1}]})",
      R"({"probe_version":1,"gpus":[{"index":0,"memory_free_bytes":-5}]})",
      R"({"probe_version":1,"gpus":[{"index":0,"memory_free_bytes":"96 GiB"}]})",
      R"({"probe_version":1,"gpus":[{"index":0,"memory_free_bytes":1.5}]})",
      R"({"probe_version":1,"gpus":[{"index":0,"unified_memory":1}]})",
      R"({"probe_version":1,"gpus":[{"index":0,"processes":[{"used_bytes":1}]}]})",
      R"({"probe_version":1,"gpus":[{"index":0,"errors":[1]}]})",
      R"({"probe_version":1,"host":[],"gpus":[]})",
      R"({"probe_version":1,"cuda":"up","gpus":[]})",
  };
  for (const char* text : bad) {
    GpuFacts facts;
    facts.note = "untouched";
    std::string error;
    EXPECT_FALSE(ParseProbeJson(text, &facts, &error)) << text;
    EXPECT_FALSE(error.empty()) << text;
    EXPECT_EQ(facts.note, "untouched") << text;
  }
  std::string error;
  GpuFacts facts;
  ASSERT_FALSE(ParseProbeJson(
      R"({"probe_version":1,"gpus":[{"index":0,"memory_free_bytes":"96 GiB"}]})", &facts, &error));
  EXPECT_NE(error.find("gpus[0].memory_free_bytes"), std::string::npos) << error;
}

TEST(ParseNvidiaSmiCsv, Gb10NotApplicableIsUnknownNotZero) {
  const GpuFacts facts = Smi("nvidia_smi_gb10.csv");
  EXPECT_EQ(facts.source, "nvidia-smi");
  EXPECT_EQ(facts.driver_version, "580.95.05");
  ASSERT_EQ(facts.gpus.size(), 1u);
  EXPECT_EQ(facts.gpus[0].name, "NVIDIA GB10");
  EXPECT_EQ(facts.gpus[0].memory_total_bytes, std::nullopt);
  EXPECT_EQ(facts.gpus[0].memory_free_bytes, std::nullopt);
  EXPECT_FALSE(facts.gpus[0].processes_known);
  EXPECT_EQ(facts.note,
            "memory unknown: nvidia-smi reports [N/A] (unified memory?); "
            "install fleet-probe");
}

TEST(ParseNvidiaSmiCsv, H200InMiB) {
  const GpuFacts facts = Smi("nvidia_smi_h200.csv");
  ASSERT_EQ(facts.gpus.size(), 1u);
  EXPECT_EQ(facts.gpus[0].uuid, "GPU-0c7d41e9-6a2b-4f83-9e15-d24b7a0c6f31");
  EXPECT_EQ(facts.gpus[0].memory_total_bytes, uint64_t{143771} << 20);
  EXPECT_EQ(facts.gpus[0].memory_free_bytes, uint64_t{143156} << 20);
  EXPECT_EQ(facts.note, "");
}

// Found by fuzz/nvidia_smi_fuzzer: a byte that is not UTF-8 in a field made
// the facts unprintable (nlohmann's dump threw type_error 316, so `fleet
// plan` crashed). Such bytes now read as U+FFFD.
TEST(ParseNvidiaSmiCsv, BytesThatAreNotUtf8AreReplaced) {
  GpuFacts facts;
  std::string error;
  ASSERT_TRUE(
      ParseNvidiaSmiCsv("0, NVIDIA H200\xff, GPU-0c7d41e9-6a2b-\xca\x66"
                        "83, 143771, "
                        "143156, 570.86.15\n",
                        &facts, &error))
      << error;
  ASSERT_EQ(facts.gpus.size(), 1u);
  EXPECT_EQ(facts.gpus[0].name, "NVIDIA H200\xEF\xBF\xBD");
  EXPECT_EQ(facts.gpus[0].uuid,
            "GPU-0c7d41e9-6a2b-\xEF\xBF\xBD"
            "f83");
  const std::string printed = GpuFactsToJson(facts).dump();
  GpuFacts back;
  ASSERT_TRUE(GpuFactsFromJson(nlohmann::json::parse(printed), &back, &error)) << error;
  EXPECT_EQ(back, facts);
  // Valid multi-byte text is kept as it is.
  ASSERT_TRUE(
      ParseNvidiaSmiCsv("0, caf\xc3\xa9 \xf0\x9f\x9a\x80, GPU-1, 10, 5, 1\n", &facts, &error));
  EXPECT_EQ(facts.gpus[0].name, "caf\xc3\xa9 \xf0\x9f\x9a\x80");
}

TEST(ParseNvidiaSmiCsv, NotSupportedAndNoDevices) {
  GpuFacts facts;
  std::string error;
  ASSERT_TRUE(
      ParseNvidiaSmiCsv("0, NVIDIA GB10, GPU-1, [Not Supported], [Not Supported], 580.95.05\r\n"
                        "1, NVIDIA H200, GPU-2, 143771, 1024, 580.95.05\r\n",
                        &facts, &error))
      << error;
  ASSERT_EQ(facts.gpus.size(), 2u);
  EXPECT_EQ(facts.gpus[0].memory_free_bytes, std::nullopt);
  EXPECT_EQ(facts.gpus[1].memory_free_bytes, uint64_t{1024} << 20);
  EXPECT_NE(facts.note.find("[Not Supported]"), std::string::npos);

  ASSERT_TRUE(ParseNvidiaSmiCsv("No devices were found\n", &facts, &error));
  EXPECT_TRUE(facts.gpus.empty());
  EXPECT_EQ(facts.note, "no GPU: nvidia-smi: No devices were found");
}

TEST(ParseNvidiaSmiCsv, MalformedLinesAreErrors) {
  const char* bad[] = {
      "0, NVIDIA GB10, GPU-1\n",
      "zero, NVIDIA GB10, GPU-1, 1, 1, 580\n",
      "0, NVIDIA GB10, GPU-1, 12 GiB, 1, 580\n",
      "0, NVIDIA GB10, GPU-1, -1, 1, 580\n",
      "0, NVIDIA GB10, GPU-1, 99999999999999999999, 1, 580\n",
  };
  for (const char* text : bad) {
    GpuFacts facts;
    std::string error;
    EXPECT_FALSE(ParseNvidiaSmiCsv(text, &facts, &error)) << text;
    EXPECT_NE(error.find("line 1"), std::string::npos) << error;
  }
}

TEST(GpuFactsJson, RoundTripsEveryFixture) {
  for (const GpuFacts& facts :
       {Probe("probe_gb10.json"), Probe("probe_h200.json"), Probe("probe_nogpu.json"),
        Probe("probe_gb10_page_cache.json"),
        WithDropCachesSudo(Probe("probe_gb10_page_cache.json"), "refused"),
        Smi("nvidia_smi_gb10.csv"), Smi("nvidia_smi_h200.csv"), Unprobed("")}) {
    const nlohmann::json j = GpuFactsToJson(facts);
    GpuFacts back;
    std::string error;
    ASSERT_TRUE(GpuFactsFromJson(nlohmann::json::parse(j.dump()), &back, &error)) << error << "\n"
                                                                                  << j.dump();
    EXPECT_EQ(back, facts) << j.dump();
  }
}

TEST(GpuFactsJson, UnknownIsNull) {
  const nlohmann::json j = GpuFactsToJson(Smi("nvidia_smi_gb10.csv"));
  EXPECT_TRUE(j["gpus"][0]["memory_free_bytes"].is_null());
  EXPECT_TRUE(j["gpus"][0]["processes"].is_null());
  GpuFacts facts;
  std::string error;
  EXPECT_FALSE(GpuFactsFromJson(nlohmann::json{{"source", "guess"}, {"gpus", {}}}, &facts, &error));
  EXPECT_FALSE(GpuFactsFromJson(nlohmann::json::array(), &facts, &error));
  EXPECT_FALSE(GpuFactsFromJson(nlohmann::json::array(), &facts));  // no error
  EXPECT_TRUE(GpuFactsFromJson(j, &facts));
}

TEST(CheckMemoryBudget, Gb10ShortGivesTheFigures) {
  const BudgetAnswer a = CheckMemoryBudget(Probe("probe_gb10.json"), 120 * kGiB);
  EXPECT_TRUE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_EQ(a.explanation,
            "needs 120.0 GiB, GPU 0 (NVIDIA GB10, unified) has 96.3 GiB free "
            "of 119.7 GiB: short by 23.7 GiB (host MemAvailable 110.4 GiB, "
            "which counts page cache that CUDA sees as used until it is "
            "dropped)");
}

TEST(CheckMemoryBudget, H200ShortGivesTheFigures) {
  const BudgetAnswer a = CheckMemoryBudget(Probe("probe_h200.json"), 140 * kGiB);
  EXPECT_TRUE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_EQ(a.explanation,
            "needs 140.0 GiB, GPU 0 (NVIDIA H200) has 139.2 GiB free of "
            "139.8 GiB: short by 0.8 GiB");
}

TEST(CheckMemoryBudget, NoGpuIsNo) {
  const BudgetAnswer a = CheckMemoryBudget(Probe("probe_nogpu.json"), 1 * kGiB);
  EXPECT_TRUE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_EQ(a.explanation.rfind("needs 1.0 GiB, but the node has no GPU (no GPU: "
                                "libcuda.so.1",
                                0),
            0u)
      << a.explanation;
}

TEST(CheckMemoryBudget, FitsSaysBy) {
  BudgetAnswer a = CheckMemoryBudget(Probe("probe_gb10.json"), 80 * kGiB, 0);
  EXPECT_TRUE(a.known);
  EXPECT_TRUE(a.fits);
  EXPECT_EQ(a.explanation.rfind("needs 80.0 GiB, GPU 0 (NVIDIA GB10, unified) has "
                                "96.3 GiB free of 119.7 GiB: fits with 16.3 GiB "
                                "to spare",
                                0),
            0u)
      << a.explanation;
  a = CheckMemoryBudget(Probe("probe_h200.json"), 100 * kGiB);
  EXPECT_TRUE(a.fits);
  EXPECT_EQ(a.explanation,
            "needs 100.0 GiB, GPU 0 (NVIDIA H200) has 139.2 GiB free of "
            "139.8 GiB: fits with 39.2 GiB to spare");
  a = CheckMemoryBudget(Smi("nvidia_smi_h200.csv"), 100 * kGiB);
  EXPECT_TRUE(a.fits);
}

TEST(CheckMemoryBudget, UnknownMemoryIsNeitherYesNorNo) {
  for (uint64_t need : {uint64_t{0}, 1 * kGiB, 500 * kGiB}) {
    const BudgetAnswer a = CheckMemoryBudget(Smi("nvidia_smi_gb10.csv"), need);
    EXPECT_FALSE(a.known);
    EXPECT_FALSE(a.fits);
    EXPECT_EQ(a.explanation, "needs " + std::to_string(need / kGiB) +
                                 ".0 GiB, GPU 0 (NVIDIA GB10) free memory is unknown "
                                 "(memory unknown: nvidia-smi reports [N/A] (unified "
                                 "memory?); install fleet-probe)");
  }
  const BudgetAnswer none = CheckMemoryBudget(Unprobed("ssh failed"), kGiB);
  EXPECT_FALSE(none.known);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.explanation, "needs 1.0 GiB, but the node's GPUs are unknown (ssh failed)");
}

TEST(DescribeGpuMemory, OneLinePerNode) {
  EXPECT_EQ(DescribeGpuMemory(Probe("probe_gb10.json")),
            "GPU 0 (NVIDIA GB10, unified) 96.3 GiB free of 119.7 GiB, host "
            "MemAvailable 110.4 GiB");
  EXPECT_EQ(DescribeGpuMemory(Probe("probe_h200.json")),
            "GPU 0 (NVIDIA H200) 139.2 GiB free of 139.8 GiB");
  EXPECT_EQ(DescribeGpuMemory(Smi("nvidia_smi_gb10.csv")),
            "GPU 0 (NVIDIA GB10) memory unknown (memory unknown: nvidia-smi "
            "reports [N/A] (unified memory?); install fleet-probe)");
  EXPECT_EQ(DescribeGpuMemory(Probe("probe_nogpu.json")).rfind("no GPU: libcuda.so.1", 0), 0u);
  EXPECT_EQ(DescribeGpuMemory(Unprobed("ssh failed")), "GPU facts unknown: ssh failed");
}

TEST(CheckMemoryBudget, SeveralGpus) {
  GpuFacts facts = Probe("probe_h200.json");
  GpuInfo small = facts.gpus[0];
  small.index = 1;
  small.memory_free_bytes = 10 * kGiB;
  GpuInfo unknown = facts.gpus[0];
  unknown.index = 2;
  unknown.memory_free_bytes.reset();
  unknown.errors = {"cuDevicePrimaryCtxRetain: CUDA_ERROR_DEVICE_UNAVAILABLE"};
  facts.gpus = {small, facts.gpus[0], unknown};

  BudgetAnswer a = CheckMemoryBudget(facts, 20 * kGiB);  // the roomiest one
  EXPECT_TRUE(a.fits);
  EXPECT_NE(a.explanation.find("GPU 0 "), std::string::npos) << a.explanation;

  a = CheckMemoryBudget(facts, 20 * kGiB, 1);
  EXPECT_TRUE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_NE(a.explanation.find("short by 10.0 GiB"), std::string::npos);

  // GPU 2 might have room: not a "no".
  a = CheckMemoryBudget(facts, 145 * kGiB);
  EXPECT_FALSE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_NE(a.explanation.find("CUDA_ERROR_DEVICE_UNAVAILABLE"), std::string::npos);

  a = CheckMemoryBudget(facts, kGiB, 7);
  EXPECT_TRUE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_EQ(a.explanation, "needs 1.0 GiB on GPU 7, but the node has no GPU 7 (it has 1, 0, 2)");
}

// A GB10 right after a model was staged: 36.3 GiB free as cuMemGetInfo
// counts it (MemFree), 60.0 GiB of page cache the kernel can give back.
TEST(ParseProbeJson, Gb10PageCacheIsReclaimableNotFree) {
  const GpuFacts facts = Probe("probe_gb10_page_cache.json");
  ASSERT_EQ(facts.gpus.size(), 1u);
  EXPECT_EQ(facts.gpus[0].memory_free_bytes, uint64_t{38976827392});
  EXPECT_EQ(facts.gpus[0].memory_free_source, "host MemFree");
  EXPECT_EQ(facts.gpus[0].memory_reclaimable_bytes, 60 * kGiB);
  EXPECT_FALSE(facts.cuda_context);
  // The probe's own refusal is the decision the facts carry.
  EXPECT_EQ(facts.context_decision, "no CUDA context: process 48213 runs on GPU 0 (NVML)");
  // An older probe's document has neither: unknown, not 0.
  EXPECT_FALSE(Probe("probe_gb10.json").gpus[0].memory_reclaimable_bytes);
}

TEST(CheckMemoryBudget, FitsOnceThePageCacheIsDropped) {
  const GpuFacts facts = Probe("probe_gb10_page_cache.json");
  // Within free: fits, no drop needed.
  BudgetAnswer a = CheckMemoryBudget(facts, 30 * kGiB);
  EXPECT_TRUE(a.fits);
  EXPECT_FALSE(a.fits_after_drop);
  // Over free, within free + page cache: not "fits" (vLLM's check would
  // refuse it as things stand), but fits once the cache is dropped.
  a = CheckMemoryBudget(facts, 90 * kGiB);
  EXPECT_TRUE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_TRUE(a.fits_after_drop);
  EXPECT_EQ(a.explanation,
            "needs 90.0 GiB, GPU 0 (NVIDIA GB10, unified) has 36.3 GiB free of 119.7 GiB "
            "(from host MemFree, no CUDA context) + 60.0 GiB reclaimable page cache: fits once "
            "the page cache is dropped (short by 53.7 GiB without)");
  // Over both: refused, with both figures.
  a = CheckMemoryBudget(facts, 100 * kGiB);
  EXPECT_TRUE(a.known);
  EXPECT_FALSE(a.fits);
  EXPECT_FALSE(a.fits_after_drop);
  EXPECT_EQ(a.explanation,
            "needs 100.0 GiB, GPU 0 (NVIDIA GB10, unified) has 36.3 GiB free of 119.7 GiB "
            "(from host MemFree, no CUDA context) + 60.0 GiB reclaimable page cache: short by "
            "3.7 GiB even with the page cache dropped");
}

// The verdict must not depend on whether the probe opened a context: the
// same node measured through cuMemGetInfo gives the same answer.
TEST(CheckMemoryBudget, SameVerdictWithAndWithoutAContext) {
  GpuFacts with = Probe("probe_gb10_page_cache.json");
  with.gpus[0].memory_free_source = "cuMemGetInfo";
  const GpuFacts without = Probe("probe_gb10_page_cache.json");
  for (uint64_t need : {30 * kGiB, 90 * kGiB, 100 * kGiB}) {
    const BudgetAnswer a = CheckMemoryBudget(with, need);
    const BudgetAnswer b = CheckMemoryBudget(without, need);
    EXPECT_EQ(a.fits, b.fits) << need;
    EXPECT_EQ(a.fits_after_drop, b.fits_after_drop) << need;
  }
}

// A discrete GPU's memory holds no page cache: a reclaimable figure (which
// the probe never gives one) must not make a short H200 fit.
TEST(CheckMemoryBudget, DiscreteGpuNeverFitsAfterADrop) {
  GpuFacts facts = Probe("probe_h200.json");
  facts.gpus[0].memory_reclaimable_bytes = 100 * kGiB;
  const BudgetAnswer a = CheckMemoryBudget(facts, 140 * kGiB);
  EXPECT_FALSE(a.fits);
  EXPECT_FALSE(a.fits_after_drop);
}

TEST(DropCachesSudo, RefusalNamesTheExactSudoersLine) {
  const GpuFacts facts = Probe("probe_gb10_page_cache.json");
  EXPECT_EQ(DropCachesSudoRefusal("dgx5", facts), "");  // not asked: nothing known
  EXPECT_EQ(DropCachesSudoRefusal("dgx5", WithDropCachesSudo(facts, "allowed")), "");
  EXPECT_EQ(DropCachesSudoRefusal("dgx5", WithDropCachesSudo(facts, "refused")),
            "sudo on dgx5 asks lab for a password for `sudo -n /usr/sbin/sysctl "
            "vm.drop_caches=3` (fleet cannot answer one). Install this drop-in on dgx5 (`sudo "
            "visudo -f /etc/sudoers.d/fleet`), nothing broader:\n    lab ALL=(root) NOPASSWD: "
            "/usr/sbin/sysctl vm.drop_caches=3");
  EXPECT_NE(DropCachesSudoRefusal("dgx5", WithDropCachesSudo(facts, "no-sudo")), "");
}

// The node-side fragment, run by sh against a stand-in sudo that allows
// only what a sudoers file lists: asked only on unified memory, and for
// exactly the command the apply runs.
TEST(DropCachesSudo, ScriptAsksExactlyTheCommandOnUnifiedMemoryOnly) {
  const testing_support::TempDir dir("drop-caches-sudo");
  ASSERT_NE(dir.path(), "");
  const std::string& d = dir.path();
  {
    std::ofstream sudo(d + "/sudo");
    sudo << "#!/bin/sh\n[ \"$1\" = -n ] && [ \"$2\" = -l ] || exit 2\nshift 2\n"
            "grep -qxF \"$*\" "
         << d << "/allowed\n";
    std::ofstream sysctl(d + "/sysctl");
    sysctl << "#!/bin/sh\nexit 1\n";
  }
  ASSERT_EQ(std::system(("chmod +x " + d + "/sudo " + d + "/sysctl").c_str()), 0);
  const auto run = [&](const std::string& gpj) {
    const std::string script =
        "PATH=" + d + ":/usr/bin:/bin\ngpj='" + gpj + "'\n" + DropCachesSudoScript();
    dir.Write("script.sh", script);
    const testing_support::ShellRun run = testing_support::RunShell("sh " + d + "/script.sh");
    EXPECT_EQ(run.exit_code, 0);
    std::stringstream ss(run.out);
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(ss, line)) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    GpuFacts facts;
    ParseDropCachesSudo(kv, &facts);
    return facts;
  };
  std::ofstream(d + "/allowed") << "";
  GpuFacts f = run(R"({"gpus":[{"unified_memory":true}]})");
  EXPECT_EQ(f.drop_caches_sudo, "refused");
  EXPECT_EQ(f.drop_caches_command, d + "/sysctl vm.drop_caches=3");
  std::ofstream(d + "/allowed") << d << "/sysctl vm.drop_caches=3\n";
  EXPECT_EQ(run(R"({"gpus":[{"unified_memory":true}]})").drop_caches_sudo, "allowed");
  // A broader-looking grant of another command does not count.
  std::ofstream(d + "/allowed") << d << "/sysctl -a\n";
  EXPECT_EQ(run(R"({"gpus":[{"unified_memory":true}]})").drop_caches_sudo, "refused");
  // A discrete GPU: not asked.
  EXPECT_EQ(run(R"({"gpus":[{"unified_memory":false}]})").drop_caches_sudo, "");
}

}  // namespace
}  // namespace fleet
