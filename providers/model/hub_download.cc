#include "providers/model/hub_download.h"

#include <sstream>

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

std::string DownloadScript(const std::vector<std::string>& argv_template, const HubLocation& loc) {
  std::string cmd;
  for (const std::string& w : argv_template) {
    std::string word;
    if (w == "{repo}")
      word = ShellQuote(loc.repo);
    else if (w == "{revision}")
      word = ShellQuote(loc.revision);
    else if (w == "{cache}")
      word = NodePathWord(loc.cache);
    else
      word = ShellQuote(w);
    cmd += (cmd.empty() ? "" : " ") + word;
  }
  const std::string tool = argv_template.empty() ? "hf" : argv_template[0];
  return "c=" + NodePathWord(loc.cache) + "; d=" + ShellQuote(HubRepoDirName(loc.repo)) + "\n" +
         "mkdir -p -- \"$c\" || exit 1\n"
         "command -v " +
         ShellQuote(tool) + " >/dev/null 2>&1 || { echo \"fleet: " + tool +
         " not found on PATH ($PATH)\" >&2; exit 127; }\n"
         "log=\"$c/.fleet-download-$d.log\"\n"
         "HF_HUB_DISABLE_PROGRESS_BARS=1 " +
         cmd +
         " > \"$log\" 2>&1 < /dev/null; rc=$?\n"
         "if [ $rc -ne 0 ]; then tail -n 15 -- \"$log\" >&2; fi\n"
         "exit $rc\n";
}

Status RunHubDownload(Transport* t, const std::string& node,
                      const std::vector<std::string>& argv_template, const HubLocation& loc) {
  const std::vector<std::string> argv =
      argv_template.empty() ? DefaultDownloadCommand() : argv_template;
  Result<CommandResult> r = t->Run(DownloadScript(argv, loc));
  if (!r.ok()) return r.status();
  std::string err = r->err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  if (r->exit_code == 127 && err.find("fleet: " + argv[0] + " not found") != std::string::npos) {
    return Status::Error(
        node + ": `" + argv[0] + "` is not installed on the node (" + err.substr(7) +
        "). Install the hub CLI there (`uv tool install huggingface_hub`, or `pip install -U "
        "huggingface_hub`), or download through uv without installing: set "
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
