#include "providers/model/hub_download.h"

#include <sstream>

#include "providers/model/hub_download_sh.h"
#include "src/shell_quote.h"

namespace fleet {

std::vector<std::string> DefaultDownloadCommand() {
  return {"hf", "download", "--revision", "{revision}", "{repo}", "--cache-dir", "{cache}"};
}

std::vector<std::string> ParseDownloadTemplate(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

std::string DownloadCommandLine(const std::vector<std::string>& argv_template,
                                const HubLocation& loc) {
  std::string line;
  for (const std::string& w : argv_template) {
    const std::string& word = w == "{repo}"       ? loc.repo
                              : w == "{revision}" ? loc.revision
                              : w == "{cache}"    ? loc.cache
                                                  : w;
    line += (line.empty() ? "" : " ") + word;
  }
  return line;
}

std::string DownloadScript(const std::vector<std::string>& argv_template, const HubLocation& loc,
                           const HubDownloadEnv& env) {
  std::string cmd = "sh -c " + ShellQuote(std::string(kHubDownloadScript, kHubDownloadScriptSize)) +
                    " fleet-hub-download " + NodePathWord(loc.cache) + " " +
                    ShellQuote(HubRepoDirName(loc.repo)) + " " +
                    (env.cli.empty() ? std::string("''") : NodePathWord(env.cli)) + " " +
                    ShellQuote(env.endpoint) + " " + (env.token.empty() ? "0" : "1");
  for (const std::string& w : argv_template) {
    if (w == "{repo}")
      cmd += " " + ShellQuote(loc.repo);
    else if (w == "{revision}")
      cmd += " " + ShellQuote(loc.revision);
    else if (w == "{cache}")
      cmd += " " + NodePathWord(loc.cache);
    else
      cmd += " " + ShellQuote(w);
  }
  return cmd;
}

std::string DownloadStdin(const HubDownloadEnv& env) {
  return env.token.empty() ? "" : env.token + "\n";
}

Status RunHubDownload(Transport* t, const std::string& node,
                      const std::vector<std::string>& argv_template, const HubLocation& loc,
                      const HubDownloadEnv& env) {
  const std::vector<std::string> argv =
      argv_template.empty() ? DefaultDownloadCommand() : argv_template;
  if (env.token.find_first_of("\r\n") != std::string::npos)
    return Status::Error(node +
                         ": the Hub token holds a line break; check the variable "
                         "hub.token_env names");
  const std::string in = DownloadStdin(env);
  Result<CommandResult> r = t->Run(DownloadScript(argv, loc, env), in);
  if (!r.ok()) return r.status();
  std::string err = r->err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  if (r->exit_code == 127 && err.find("fleet: " + argv[0] + " not found") != std::string::npos) {
    if (argv[0] == "hf" && !env.cli.empty())
      return Status::Error(node + ": `hf` is not installed on the node at " + env.cli +
                           ", the path the manifest's hub.cli names (" + err.substr(7) +
                           "). Install the hub CLI there, or correct hub.cli (without it fleet "
                           "searches ~/.local/bin/hf, /usr/local/bin/hf and PATH)");
    return Status::Error(
        node + ": `" + argv[0] + "` is not installed on the node (" + err.substr(7) +
        "). Install the hub CLI there as the node's SSH user: `uv tool install huggingface_hub` "
        "or `pip install --user -U huggingface_hub` (both put hf in ~/.local/bin, which fleet "
        "searches even where the login's PATH lacks it); or name its path in fleet.yaml "
        "(hub: {cli: /path/to/hf}); or download through uv without installing: set "
        "FLEET_MODEL_DOWNLOAD='uv tool run hf download --revision {revision} {repo} --cache-dir "
        "{cache}'");
  }
  if (r->exit_code != 0)
    return Status::Error(node + ": the download of " + loc.repo + "@" + loc.revision + " exited " +
                         std::to_string(r->exit_code) + " (log " + loc.cache + "/.fleet-download-" +
                         HubRepoDirName(loc.repo) + ".log): " + err);
  return Status::OK();
}

}  // namespace fleet
