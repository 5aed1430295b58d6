#include "providers/shared/serving/gpu_request.h"

#include <gtest/gtest.h>

#include "src/provider.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

using Args = std::vector<std::string>;

TEST(GpuRequest, DockerGpusFlag) {
  Recipe r;
  r.gpus = "all";
  r.ipc = "host";
  r.ulimits = {{"memlock", "-1"}, {"stack", "67108864"}};
  EXPECT_EQ(GpuRunOptions("docker", r), (Args{"--gpus=all", "--ipc=host", "--ulimit", "memlock=-1",
                                              "--ulimit", "stack=67108864"}));
  r = Recipe();
  r.gpus = "2";
  EXPECT_EQ(GpuRunOptions("docker", r), (Args{"--gpus=2"}));
  r = Recipe();
  r.gpu_ids = {"0", "1"};
  EXPECT_EQ(GpuRunOptions("docker", r), (Args{"--gpus=\"device=0,1\""}));
  EXPECT_EQ(GpuRequestText(r), "0,1");
}

TEST(GpuRequest, PodmanCdiDevices) {
  Recipe r;
  r.gpus = "all";
  EXPECT_EQ(GpuRunOptions("podman", r), (Args{"--device", "nvidia.com/gpu=all"}));
  r.gpus = "2";
  EXPECT_EQ(GpuRunOptions("podman", r),
            (Args{"--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"}));
  r = Recipe();
  r.gpu_ids = {"GPU-5f1c"};
  EXPECT_EQ(GpuRunOptions("podman", r), (Args{"--device", "nvidia.com/gpu=GPU-5f1c"}));
  EXPECT_TRUE(GpuRunOptions("podman", Recipe()).empty());
}

TEST(GpuRequest, SupportErrorsSayWhatToInstall) {
  EXPECT_EQ(GpuSupportError("docker", "dgx1", {{"gpu_hook", "1"}}), "");
  EXPECT_EQ(GpuSupportError("docker", "dgx1", {{"gpu_runtime", "1"}}), "");
  const std::string d = GpuSupportError("docker", "dgx1", {{"gpu_hook", "0"}, {"gpu_cdi", "1"}});
  EXPECT_NE(d.find("nvidia-container-toolkit"), std::string::npos) << d;
  EXPECT_NE(d.find("docker on dgx1 cannot give GPUs"), std::string::npos) << d;
  EXPECT_EQ(GpuSupportError("podman", "dgx2", {{"gpu_cdi", "1"}}), "");
  const std::string p = GpuSupportError("podman", "dgx2", {{"gpu_hook", "1"}});
  EXPECT_NE(p.find("nvidia-ctk cdi generate"), std::string::npos) << p;
}

TEST(GpuRequest, PlanErrorOnlyWhenAskedAndProbed) {
  DesiredResource d;
  d.address = "deployment.s@dgx1";
  d.node = "dgx1";
  DeploymentWant want;
  want.cli = "docker";
  d.attributes = want;
  ActualResource a;
  a.probed = true;
  ContainerProbe found;
  RecordGpuSupport(want, "gpu_hook=0\ngpu_runtime=0\n", &found);
  EXPECT_TRUE(found.gpu_support.empty());
  a.attributes = found;
  EXPECT_FALSE(a.attributes.contains("gpu_support"));
  EXPECT_EQ(GpuPlanError(d, a), "");  // no GPU asked for
  want.shown.gpus = "all";
  d.attributes = want;
  RecordGpuSupport(want, "gpu_hook=0\ngpu_runtime=0\ngpu_cdi=0\nother=1\n", &found);
  EXPECT_EQ(found.gpu_support.size(), 3u);
  a.attributes = found;
  const std::string e = GpuPlanError(d, a);
  EXPECT_EQ(e.rfind("deployment.s@dgx1: gpus = \"all\": docker on dgx1 cannot give GPUs", 0), 0u)
      << e;
  found.gpu_support.clear();
  RecordGpuSupport(want, "gpu_hook=1\n", &found);
  a.attributes = found;
  EXPECT_EQ(GpuPlanError(d, a), "");
  a.probed = false;
  EXPECT_EQ(GpuPlanError(d, a), "");  // not probed: checked again at apply
}

// gpu_support.sh on its own, with stand-in CLIs and spec folders: podman
// asks its CDI specs only (one naming nvidia.com/gpu among others); docker
// its hook and runtimes too. Its answers read back by GpuSupportError.
TEST(GpuRequest, SupportProbeScriptWithStubCli) {
  const testing_support::StubCli stub("gpu_support_test");
  const std::vector<std::string> dirs = {stub.dir() + "/etc-cdi", stub.dir() + "/run-cdi"};
  stub.Tool("podman", "exit 0\n");
  stub.RecordingTool("docker",
                     "echo '{\"io.containerd.runc.v2\":{},\"nvidia\":{\"path\":\"x\"}}'\n");
  testing_support::ShellRun run = stub.Run(GpuSupportProbeScript("podman", dirs));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "gpu_cdi=0\n");
  EXPECT_NE(GpuSupportError("podman", "dgx1", ParseKeyValues(run.out)), "");

  stub.Write("etc-cdi/other.yaml", "kind: example.com/fpga\n");
  stub.Write("run-cdi/nvidia.json", "{\"kind\": \"nvidia.com/gpu\"}\n");
  run = stub.Run(GpuSupportProbeScript("podman", dirs));
  EXPECT_EQ(run.out, "gpu_cdi=1\n");
  EXPECT_EQ(GpuSupportError("podman", "dgx1", ParseKeyValues(run.out)), "");

  run = stub.Run(GpuSupportProbeScript("docker", {stub.dir() + "/etc-cdi"}));
  EXPECT_EQ(run.out, "gpu_cdi=0\ngpu_hook=0\ngpu_runtime=1\n");
  EXPECT_EQ(stub.Calls("docker"), "info --format {{json .Runtimes}}\n");
  EXPECT_EQ(GpuSupportError("docker", "dgx1", ParseKeyValues(run.out)), "");

  stub.Tool("docker", "echo '{\"runc\":{}}'\n");
  run = stub.Run(GpuSupportProbeScript("docker", dirs));
  EXPECT_EQ(run.out, "gpu_cdi=1\ngpu_hook=0\ngpu_runtime=0\n");
  EXPECT_NE(GpuSupportError("docker", "dgx1", ParseKeyValues(run.out)), "");
  stub.Tool("nvidia-container-runtime-hook", "exit 0\n");
  run = stub.Run(GpuSupportProbeScript("docker", dirs));
  EXPECT_EQ(run.out, "gpu_cdi=1\ngpu_hook=1\ngpu_runtime=0\n");
}

}  // namespace
}  // namespace fleet
