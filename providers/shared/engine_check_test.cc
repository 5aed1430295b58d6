#include "providers/shared/engine_check.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

// What the CLIs print, copied from docker 28 / 20.10 and podman 4.3 here.
const char kDown[] =
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
    "running?";
const char kDenied[] =
    "permission denied while trying to connect to the Docker daemon socket at "
    "unix:///run/docker.sock: Get \"http://%2Frun%2Fdocker.sock/v1.50/containers/json\": dial "
    "unix /run/docker.sock: connect: permission denied";
const char kDenied2010[] =
    "Got permission denied while trying to connect to the Docker daemon socket at "
    "unix:///var/run/docker.sock: Get ...: dial unix /var/run/docker.sock: connect: permission "
    "denied";
const char kNoSubuid[] =
    "Error: cannot set up namespace using \"/usr/bin/newuidmap\": exit status 1 "
    "WARN[0000] no subuid ranges found for user \"kilork\" in /etc/subuid";

TEST(EngineCheck, ClassifiesWhatTheClisPrint) {
  EXPECT_EQ(ClassifyEngineOutput(kDown), EngineProblem::kDaemonDown);
  EXPECT_EQ(ClassifyEngineOutput(kDenied), EngineProblem::kPermissionDenied);
  EXPECT_EQ(ClassifyEngineOutput(kDenied2010), EngineProblem::kPermissionDenied);
  EXPECT_EQ(ClassifyEngineOutput(kNoSubuid), EngineProblem::kNoSubordinateIds);
  EXPECT_EQ(ClassifyEngineOutput("container_cli 'docker' not found on the node's PATH"),
            EngineProblem::kCliMissing);
  // Not engine problems: left to the caller's message.
  EXPECT_EQ(ClassifyEngineOutput("Error: No such image: r@sha256:00"), EngineProblem::kNone);
  EXPECT_EQ(ClassifyEngineOutput("Error: image not known"), EngineProblem::kNone);
  EXPECT_EQ(ClassifyEngineOutput("open /srv/x: permission denied"), EngineProblem::kNone);
  EXPECT_EQ(ClassifyEngineOutput(""), EngineProblem::kNone);
}

TEST(EngineCheck, FixNamesTheCommandAndTheUser) {
  std::string m =
      WithEngineFix(std::string("`image inspect` exited 1: ") + kDown, "docker", "dgx1", "kilork");
  EXPECT_NE(m.find("the Docker daemon does not answer on dgx1"), std::string::npos) << m;
  EXPECT_NE(m.find("sudo systemctl start docker"), std::string::npos) << m;
  EXPECT_NE(m.find("Cannot connect"), std::string::npos) << m;  // the evidence
  m = WithEngineFix(kDenied, "docker", "dgx2", "kilork");
  EXPECT_NE(m.find("user kilork may not use the Docker daemon on dgx2"), std::string::npos) << m;
  EXPECT_NE(m.find("sudo usermod -aG docker kilork"), std::string::npos) << m;
  m = WithEngineFix(kDenied, "docker", "dgx2", "");
  EXPECT_NE(m.find("sudo usermod -aG docker USER"), std::string::npos) << m;
  m = WithEngineFix(kNoSubuid, "podman", "dgx3", "kilork");
  EXPECT_NE(m.find("--add-subuids 100000-165535 --add-subgids 100000-165535 kilork"),
            std::string::npos)
      << m;
  m = WithEngineFix("container_cli 'docker' not found on the node's PATH", "docker", "dgx4", "k");
  EXPECT_NE(m.find("not found on the node's PATH"), std::string::npos) << m;
  EXPECT_NE(m.find("apt-get install docker.io"), std::string::npos) << m;
  EXPECT_EQ(WithEngineFix("digest mismatch", "docker", "dgx1", "k"), "digest mismatch");
}

TEST(EngineCheck, EvidenceIsShortAndOneLine) {
  const std::string m = EngineFixMessage(EngineProblem::kDaemonDown, "docker", "n", "u",
                                         std::string(kDown) + "\n" + std::string(500, 'x'));
  EXPECT_EQ(m.find('\n'), std::string::npos);
  EXPECT_LT(m.size(), 400u);
}

}  // namespace
}  // namespace fleet
