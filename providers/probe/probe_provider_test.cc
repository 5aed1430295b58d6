// probe_installed.sh (ProbeProvider::ProbeScript) on its own under /bin/sh,
// from a node user's home with stand-ins: what the plan reads of the
// installed fleet-probe and the node's compiler, through ParseProbe.
#include "providers/probe/probe_provider.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "providers/probe/probe_json.h"
#include "src/probe/probe_install.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

class ProbeInstalledTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(stub_.dir(), ""); }
  // The probe's script run from / (it must find the probe from $HOME), with
  // only the stand-ins on PATH: the machine's own c++ is not the node's.
  std::string Run() const {
    testing_support::ShellRun run =
        stub_.Run("cd /\n" + provider_.ProbeScript({}, {}), "PATH=" + stub_.bin());
    return run.out;
  }
  ProbeFound Found(const std::string& out) const {
    NodeFacts facts;
    facts.arch = "aarch64";
    ActualResource a = provider_.ParseProbe({}, out, facts);
    found_exists_ = a.exists;
    return a.attributes.get<ProbeFound>();
  }
  void InstallProbe(const std::string& version, mode_t mode) const {
    stub_.Write(kProbeInstallPath, "#!/bin/sh\n");
    chmod((stub_.dir() + "/" + kProbeInstallPath).c_str(), mode);
    if (!version.empty()) stub_.Write(kProbeVersionFile, version + "\n");
  }

  const testing_support::StubCli stub_{"probe_installed_test"};
  const ProbeProvider provider_;
  mutable bool found_exists_ = false;
};

TEST_F(ProbeInstalledTest, InstalledProbeAndCompiler) {
  InstallProbe("5e1f", 0755);
  stub_.Tool("c++", "exit 0\n");
  const std::string out = Run();
  EXPECT_EQ(out, "installed=5e1f\ncompiler=c++\n");
  const ProbeFound f = Found(out);
  EXPECT_TRUE(found_exists_);
  EXPECT_EQ(f.source_sha256, "5e1f");
  EXPECT_EQ(f.compiler, "c++");
  EXPECT_EQ(f.arch, "aarch64");
}

TEST_F(ProbeInstalledTest, NotExecutableIsNotInstalledAndNoCompilerIsNone) {
  InstallProbe("5e1f", 0644);
  const std::string out = Run();
  EXPECT_EQ(out, "");
  const ProbeFound f = Found(out);
  EXPECT_FALSE(found_exists_);
  EXPECT_EQ(f.source_sha256, "");
  EXPECT_EQ(f.compiler, "");
}

TEST_F(ProbeInstalledTest, InstalledWithoutAVersionFileHasNoVersion) {
  InstallProbe("", 0755);
  const std::string out = Run();
  EXPECT_EQ(out, "installed=\n");
  const ProbeFound f = Found(out);
  EXPECT_TRUE(found_exists_);  // installed, of a version that differs from any wanted
  EXPECT_EQ(f.source_sha256, "");
}

}  // namespace
}  // namespace fleet
