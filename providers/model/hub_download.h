// Downloading a model from the hub ON the node, with the node's own tool
// (default `hf download --revision <rev> <repo> --cache-dir <cache>`).
//
// The tool's output goes to <cache>/.fleet-download-models--x.log on the
// node, and its tail into the error: the log's download that "completed"
// instantly with 0 bytes was a missing `hf` whose wrapper still wrote its
// `.done`. Here a missing tool is an error naming the fallback, and the
// exit status is only the first check: the caller verifies the snapshot.
#ifndef FLEET_PROVIDERS_MODEL_HUB_DOWNLOAD_H_
#define FLEET_PROVIDERS_MODEL_HUB_DOWNLOAD_H_

#include <functional>
#include <string>
#include <vector>

#include "providers/shared/hub_remote.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

// The default download command; {repo}, {revision} and {cache} are
// replaced by the values (each one word, quoted).
std::vector<std::string> DefaultDownloadCommand();

// Splits a template such as "uv tool run hf download --revision {revision}
// {repo} --cache-dir {cache}" on spaces.
std::vector<std::string> ParseDownloadTemplate(const std::string& text);

// The command as the operator would type it (for progress lines; not
// quoted for a shell).
std::string DownloadCommandLine(const std::vector<std::string>& argv_template,
                                const HubLocation& loc);

// What the node's download gets besides the command: the hub CLI's path
// (hub.cli; "" searches ~/.local/bin/hf, /usr/local/bin/hf, PATH), the Hub
// to download from (HF_ENDPOINT; "" the node's own) and its token ("" none).
struct HubDownloadEnv {
  std::string cli;
  std::string endpoint;
  std::string token;  // fed on the session's stdin, never on a command line
};

// The shell command that runs `argv_template` for `loc` on the node: the
// embedded hub_download.sh with its arguments, each quoted once. It holds
// no secret: the token goes on standard input (DownloadStdin).
std::string DownloadScript(const std::vector<std::string>& argv_template, const HubLocation& loc,
                           const HubDownloadEnv& env = {});
// What the command reads on standard input: the token's line, or nothing.
std::string DownloadStdin(const HubDownloadEnv& env);

// Runs the download on the node behind `t` (blocking; hours for a big
// model). `node` names the node in errors.
Status RunHubDownload(Transport* t, const std::string& node,
                      const std::vector<std::string>& argv_template, const HubLocation& loc,
                      const HubDownloadEnv& env = {});

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_HUB_DOWNLOAD_H_
