#include "providers/shared/serving/gpu_request.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace fleet
