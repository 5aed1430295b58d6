// HubApi: what the Hugging Face Hub says about a repo at a revision (its
// files and their sizes, LFS files included), asked from the controller
// with libcurl at plan time, so that a download that cannot fit is refused
// before any byte moves (the log's 636 GB onto 251 GB free).
//
// The seam is this small interface: providers get a HubApi* in their
// DiffContext and StepContext, and unit tests hand them a fake; only
// MakeHubApi talks to the network.
#ifndef FLEET_SRC_HUB_API_H_
#define FLEET_SRC_HUB_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/status.h"

namespace fleet {

// One file of a revision as the Hub lists it.
struct HubFile {
  std::string path;  // relative to the repo's root
  uint64_t size = 0;
  std::string blob;  // the cache's blob name: the LFS sha256, else the git blob id
};

struct HubListing {
  std::vector<HubFile> files;  // sorted by path
  uint64_t Bytes() const;
};

class HubApi {
 public:
  virtual ~HubApi() = default;
  // The files of `repo` at `revision` (a commit or a branch). An error
  // whose status is unreachable() means the Hub could not be asked (no
  // answer, a 5xx): the caller may go on and ask again later; any other
  // error is the Hub's own answer (no such repo or revision, a gated repo
  // without a token, a token refused). Messages name the endpoint, the repo
  // and the token's variable, never the token.
  virtual Result<HubListing> ListFiles(const std::string& repo, const std::string& revision) = 0;
  // "https://huggingface.co", without a trailing slash.
  virtual std::string Endpoint() const = 0;
  // The token the nodes' downloads get ("" none): handed to the download on
  // the SSH session's standard input only, never on a command line.
  virtual std::string DownloadToken() const { return ""; }
};

// The controller's HF_ENDPOINT (huggingface_hub's variable), else
// https://huggingface.co; trailing slashes dropped.
std::string HubEndpointFromEnv();

// The Hub at `endpoint`, with `token` ("" none) sent as a Bearer header;
// `token_env` names its variable in messages. Answers are remembered for
// the life of the object (one plan asks once per repo and revision).
std::unique_ptr<HubApi> MakeHubApi(const std::string& endpoint, const std::string& token,
                                   const std::string& token_env, int timeout_s = 20);

// The Hub of HubEndpointFromEnv() with the token of the variable the
// manifest's hub.token_env names (none when unset).
struct Manifest;
std::unique_ptr<HubApi> MakeHubApiFor(const Manifest& m);

// How the Hub's answers are read (pure; for tests and fuzzing).

// "/api/models/org/name/tree/<rev>?recursive=true" with the revision
// percent-encoded (a branch may hold '/').
std::string HubTreePath(const std::string& repo, const std::string& revision);

// One page of GET .../tree/<rev>?recursive=true: HTTP status `code`, its
// `body`. Directories are skipped. `where` prefixes errors ("the Hub at X:
// org/name@rev"); `token_env` ("" none) names the token's variable.
Result<std::vector<HubFile>> ReadHubTreePage(long code, const std::string& body,
                                             const std::string& where, const std::string& token_env,
                                             bool sent_token);

// The URL of rel="next" in a Link header ("" when there is none).
std::string NextPageLink(const std::string& link_header);

}  // namespace fleet

#endif  // FLEET_SRC_HUB_API_H_
