// Unit tests of the node's image listing: the script run by a real sh
// against a stand-in container CLI (a shell script that answers `image ls
// -q` and `image inspect` the way docker and podman do), and what the
// per-image decisions read from it.
#include "providers/shared/image_listing.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "src/shell_quote.h"
#include "tests/support/run_shell.h"
#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

const std::string kD = "sha256:" + std::string(64, 'd');
const std::string kC = std::string(64, 'c');
const std::string kE = std::string(64, 'e');
const std::string kRepo = "127.0.0.1:5000/team/vllm";

// What `script` prints, run by sh.
std::string RunSh(const std::string& script) {
  return testing_support::RunShell("sh -c " + ShellQuote(script)).out;
}

// A stand-in CLI: `ls` is what `image ls -q --no-trunc` prints (and `ls_rc`
// its status), `inspect` what `image inspect` prints for the IDs it is
// given, one line per ID ("<id> <line>" in `lines`), misses on stderr.
class FakeCli {
 public:
  FakeCli(const std::string& ls, int ls_rc, const std::string& lines)
      : dir_("fleet-listing"), path_(dir_.path() + "/cli") {
    dir_.Write("ls", ls);
    dir_.Write("lines", lines);
    std::ofstream(path_) << "#!/bin/sh\n"
                            "d=$(dirname \"$0\"); echo \"$*\" >> \"$d/calls\"\n"
                            "if [ \"$2\" = ls ]; then cat \"$d/ls\"; exit " +
                                std::to_string(ls_rc) +
                                "; fi\n"
                                "shift 4; rc=0\n"
                                "for id; do l=$(grep \"^$id \" \"$d/lines\" | cut -d' ' -f2-)\n"
                                "  if [ -n \"$l\" ]; then echo \"img $l\"; else\n"
                                "  echo \"Error: No such image: $id\" >&2; rc=1; fi; done\n"
                                "exit $rc\n";
    chmod(path_.c_str(), 0755);
  }
  std::string Run() const { return RunSh(ImageListingScript(path_)); }
  int Calls() const {
    std::ifstream in(dir_.path() + "/calls");
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

 private:
  const testing_support::TempDir dir_;
  const std::string path_;
};

TEST(ImageListingTest, ListsEveryImageOnceWithTwoCliRuns) {
  // docker prints "sha256:<hex>" once per tag; podman bare hex; warnings too.
  FakeCli cli("sha256:" + kC + "\nsha256:" + kC + "\nWARN[0000] cgroup thing\n" + kE + "\n", 0,
              "sha256:" + kC + " sha256:" + kC + " [\"other/name@" + kD + "\"] [\"x:1\",\"" +
                  kRepo + ":sha256-" + kD.substr(7) + "\"]\n" + kE + " " + kE + " null null\n");
  const ImageListing l = ParseImageListing(cli.Run());
  EXPECT_EQ(cli.Calls(), 2);
  ASSERT_TRUE(l.listed);
  EXPECT_TRUE(l.error.empty()) << l.error;
  ASSERT_EQ(l.images.size(), 2u);
  EXPECT_EQ(l.images[0].id, "sha256:" + kC);
  EXPECT_EQ(l.images[1].id, "sha256:" + kE);
  EXPECT_TRUE(l.images[1].tags.empty());
  // A digest pulled under another repository name is found (docker's
  // `inspect repo@D` would miss it).
  const ImageProbe p = ImageProbeFromListing(l, ParseImageRef(kRepo + "@" + kD));
  EXPECT_TRUE(p.by_ref.found);
  EXPECT_EQ(p.by_ref.id, "sha256:" + kC);
  EXPECT_FALSE(p.by_name.tried);
  ASSERT_EQ(p.fleet_tagged.size(), 1u);
  EXPECT_FALSE(p.fleet_tagged[0].staged);
}

// podman: one `image ls` with the inspect's template, its rows one per tag.
TEST(ImageListingTest, PodmanListsWithOneCliRun) {
  const testing_support::TempDir dir("fleet-listing");
  const std::string d = dir.path(), cli = d + "/podman";
  const std::string row = "img sha256:" + kC + " [\"other/name@" + kD + "\"] [\"x:1\",\"y:2\"]";
  std::ofstream(cli) << "#!/bin/sh\necho \"$*\" >> \"$(dirname \"$0\")/calls\"\n"
                        "[ \"$1 $2 $3 $4\" = 'image ls --no-trunc --format' ] || exit 9\n"
                        "echo '" +
                            row + "'; echo '" + row + "'\n";
  chmod(cli.c_str(), 0755);
  const ImageListing l = ParseImageListing(RunSh(ImageListingScript(cli)));
  std::ifstream calls(d + "/calls");
  int n = 0;
  for (std::string line; std::getline(calls, line);) ++n;
  EXPECT_EQ(n, 1);
  ASSERT_TRUE(l.listed) << l.error;
  EXPECT_EQ(l.error, "");
  ASSERT_EQ(l.images.size(), 1u);
  EXPECT_EQ(l.images[0].id, "sha256:" + kC);
  EXPECT_EQ(l.images[0].tags, (std::vector<std::string>{"x:1", "y:2"}));
}

TEST(ImageListingTest, NoImagesNoInspect) {
  FakeCli cli("", 0, "");
  const ImageListing l = ParseImageListing(cli.Run());
  EXPECT_EQ(cli.Calls(), 1);
  EXPECT_TRUE(l.listed);
  EXPECT_TRUE(l.error.empty());
  const ImageProbe p = ImageProbeFromListing(l, ParseImageRef(kRepo + "@" + kD));
  EXPECT_TRUE(p.by_ref.tried);
  EXPECT_FALSE(p.by_ref.found);
  EXPECT_TRUE(p.by_name.tried);
  EXPECT_FALSE(p.by_name.found);
}

TEST(ImageListingTest, AnImageRemovedMeanwhileIsNoError) {
  FakeCli cli(kC + "\n" + kE + "\n", 0, kE + " " + kE + " [] []\n");
  const ImageListing l = ParseImageListing(cli.Run());
  EXPECT_TRUE(l.error.empty()) << l.error;
  ASSERT_EQ(l.images.size(), 1u);
}

TEST(ImageListingTest, AFailingCliIsAnErrorAndAMissingOneSaidSo) {
  FakeCli down("Cannot connect to the Docker daemon at unix:///var/run/docker.sock\n", 1, "");
  const ImageListing l = ParseImageListing(down.Run());
  EXPECT_TRUE(l.listed);
  EXPECT_EQ(l.error,
            "`image ls` exited 1: Cannot connect to the Docker daemon at "
            "unix:///var/run/docker.sock");
  const ImageListing none = ParseImageListing(RunSh(ImageListingScript("/nonexistent/cli")));
  EXPECT_TRUE(none.listed);
  EXPECT_FALSE(none.cli_found);
  EXPECT_FALSE(ImageProbeFromListing(none, ParseImageRef(kRepo + "@" + kD)).cli_found);
}

TEST(ImageListingTest, ABrokenRecordWithNamesIsNamedByItsId) {
  // podman 4.3's words, tried on this machine: an image record that still
  // has names but lost its manifest (rm of it in the store) fails every
  // `image ls`, naming the record.
  const std::string id = std::string(32, '7') + std::string(32, 'a');
  FakeCli cli("Error: retrieving label for image \"" + id +
                  "\": you may need to remove the image to resolve the error: fallback error "
                  "checking whether image is a manifest list: locating item named \"manifest\" "
                  "for image with ID \"" +
                  id +
                  "\" (consider removing the image to resolve the issue): file does not exist\n",
              125, "");
  const ImageListing l = ParseImageListing(cli.Run());
  EXPECT_EQ(l.broken_id, "sha256:" + id);
  EXPECT_EQ(l.error.rfind(
                "`image ls` exited 125: the engine holds a broken record of image sha256:" + id +
                    " (a `load` cut short may leave one) and lists no image until it is "
                    "removed (Error: retrieving label for image",
                0),
            0u)
      << l.error;
  EXPECT_EQ(ImageListing::FromJson(l.ToJson()).broken_id, l.broken_id);
  // Either of podman's two sentences names it; anything but 64 hex digits
  // in their quotes names nothing, and neither does any other failure.
  FakeCli label_only("Error: retrieving label for image \"" + id +
                         "\": you may need to remove the image to resolve the error\n",
                     125, "");
  EXPECT_EQ(ParseImageListing(label_only.Run()).broken_id, "sha256:" + id);
  FakeCli not_hex(
      "Error: locating item named \"manifest\" for image with ID \"$(reboot)\" "
      "(consider removing the image to resolve the issue)\n",
      125, "");
  const ImageListing n = ParseImageListing(not_hex.Run());
  EXPECT_EQ(n.broken_id, "");
  EXPECT_NE(n.error.find("$(reboot)"), std::string::npos) << n.error;  // podman's words, as error
  FakeCli other("Error: database is locked\n", 125, "");
  EXPECT_EQ(ParseImageListing(other.Run()).broken_id, "");
}

TEST(ImageListingTest, FleetsTagIsFoundUnderEitherCLIsSpelling) {
  // podman tags a name without a registry "localhost/name"; docker keeps it.
  const ImageRef ref = ParseImageRef("team/vllm@" + kD);
  for (const char* tag : {"team/vllm", "localhost/team/vllm", "docker.io/team/vllm"}) {
    const ImageListing l = ParseImageListing("images=inspect 0\nimage_out=img " + kC + " [] [\"" +
                                             tag + ":sha256-" + kD.substr(7) + "\"]\n");
    const ImageProbe p = ImageProbeFromListing(l, ref);
    EXPECT_FALSE(p.by_ref.found);
    EXPECT_TRUE(p.by_name.found) << tag;
  }
  const ImageListing other =
      ParseImageListing("images=inspect 0\nimage_out=img " + kC + " [] [\"else/where:sha256-" +
                        kD.substr(7) + "\"]\n");
  EXPECT_FALSE(ImageProbeFromListing(other, ref).by_name.found);
}

TEST(ImageListingTest, TheScriptQuotesTheCli) {
  EXPECT_NE(ImageListingScript("podman; rm -rf /").find("ilc='podman; rm -rf /'"),
            std::string::npos);
  EXPECT_EQ(ImageListingScript("docker").find(".Digest"), std::string::npos);
}

}  // namespace
}  // namespace fleet
