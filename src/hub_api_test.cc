#include "src/hub_api.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace fleet {
namespace {

const char* kTree = R"([
  {"type": "directory", "oid": "d1", "size": 0, "path": "draft"},
  {"type": "file", "oid": "3f1a", "size": 712, "path": "config.json"},
  {"type": "file", "oid": "9c2b", "size": 135, "path": "model-00001-of-00002.safetensors",
   "lfs": {"oid": "aa11", "size": 300000000000, "pointerSize": 135}},
  {"type": "file", "oid": "9c2c", "size": 135, "path": "draft/model.safetensors",
   "lfs": {"oid": "bb22", "size": 336000000000, "pointerSize": 135}}
])";

TEST(HubApi, TreePageCountsLfsSizesAndBlobNames) {
  Result<std::vector<HubFile>> r = ReadHubTreePage(200, kTree, "the Hub", "HF_TOKEN", false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);  // the directory is left out
  EXPECT_EQ((*r)[0].path, "config.json");
  EXPECT_EQ((*r)[0].size, 712u);
  EXPECT_EQ((*r)[0].blob, "3f1a");         // the git blob id of a small file
  EXPECT_EQ((*r)[1].size, 300000000000u);  // the LFS size, not the pointer's
  EXPECT_EQ((*r)[1].blob, "aa11");         // the LFS sha256
  HubListing l;
  l.files = *r;
  EXPECT_EQ(l.Bytes(), 636000000712u);
}

TEST(HubApi, GatedRepoWithoutTokenSaysWhichVariable) {
  Result<std::vector<HubFile>> r =
      ReadHubTreePage(401, "{}", "the Hub: org/gated@main", "HF_TOKEN", false);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.status().unreachable());
  EXPECT_NE(r.status().message().find("fleet sent no token"), std::string::npos);
  EXPECT_NE(r.status().message().find("export the Hub token in HF_TOKEN"), std::string::npos);
  r = ReadHubTreePage(403, "{}", "the Hub: org/gated@main", "", false);
  EXPECT_NE(r.status().message().find("set hub: {token_env: HF_TOKEN}"), std::string::npos);
  r = ReadHubTreePage(403, "{}", "the Hub: org/gated@main", "HF_TOKEN", true);
  EXPECT_NE(r.status().message().find("the token in HF_TOKEN was refused"), std::string::npos);
}

TEST(HubApi, BadAnswersAreErrorsNotCrashes) {
  for (const char* body :
       {"", "nul", "{}", "[1]", R"([{"type":"file"}])", R"([{"type":"file","path":"a"}])",
        R"([{"type":"file","path":"a","size":-1}])",
        R"([{"type":"file","path":"a","size":1.5}])"}) {
    EXPECT_FALSE(ReadHubTreePage(200, body, "w", "", false).ok()) << body;
  }
  EXPECT_FALSE(ReadHubTreePage(404, "", "w", "", false).ok());
  // A repo or revision the Hub does not have is told apart by its code.
  EXPECT_TRUE(ReadHubTreePage(404, "", "w", "", false).status().not_found());
  EXPECT_FALSE(ReadHubTreePage(403, "{}", "w", "", false).status().not_found());
  EXPECT_FALSE(ReadHubTreePage(200, "{}", "w", "", false).status().not_found());
  EXPECT_TRUE(ReadHubTreePage(200, "[]", "w", "", false).ok());
}

TEST(HubApi, NextPageLink) {
  EXPECT_EQ(NextPageLink(""), "");
  EXPECT_EQ(NextPageLink(" <https://h/api/models/a/b/tree/main?recursive=true&cursor=x>; "
                         "rel=\"next\"\r\n"),
            "https://h/api/models/a/b/tree/main?recursive=true&cursor=x");
  EXPECT_EQ(NextPageLink(" <https://h/p1>; rel=\"prev\", <https://h/p3>; rel=\"next\""),
            "https://h/p3");
  EXPECT_EQ(NextPageLink(" <https://h/p1>; rel=\"prev\""), "");
}

TEST(HubApi, TreePathEncodesTheRevision) {
  EXPECT_EQ(HubTreePath("org/name", "0123abc"), "/api/models/org/name/tree/0123abc?recursive=true");
  EXPECT_EQ(HubTreePath("org/name", "refs/pr/1"),
            "/api/models/org/name/tree/refs%2Fpr%2F1?recursive=true");
}

TEST(HubApi, EndpointFromEnv) {
  unsetenv("HF_ENDPOINT");
  EXPECT_EQ(HubEndpointFromEnv(), "https://huggingface.co");
  setenv("HF_ENDPOINT", "http://127.0.0.1:8080/", 1);
  EXPECT_EQ(HubEndpointFromEnv(), "http://127.0.0.1:8080");
  unsetenv("HF_ENDPOINT");
}

TEST(HubApi, NoAnswerIsUnreachableAndNamesNoToken) {
  // Port 9 (discard) on loopback: nothing listens in a test environment.
  std::unique_ptr<HubApi> hub =
      MakeHubApi("http://127.0.0.1:9", "hf_secretTOKENvalue123", "HF_TOKEN", 5);
  Result<HubListing> r = hub->ListFiles("org/name", "main");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().unreachable());
  EXPECT_EQ(r.status().message().find("hf_secret"), std::string::npos);
  EXPECT_NE(r.status().message().find("org/name@main"), std::string::npos);
}

}  // namespace
}  // namespace fleet
