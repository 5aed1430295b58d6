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

#include "providers/model/hub_remote.h"
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

// The shell command that runs `argv_template` for `loc` on the node, with
// the tool check, the log file and the tail of the log on stderr.
std::string DownloadScript(const std::vector<std::string>& argv_template, const HubLocation& loc);

// Runs the download on the node behind `t` (blocking; hours for a big
// model). `node` names the node in errors.
Status RunHubDownload(Transport* t, const std::string& node,
                      const std::vector<std::string>& argv_template, const HubLocation& loc);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_HUB_DOWNLOAD_H_
