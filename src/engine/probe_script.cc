#include "src/engine/probe_script.h"

#include <sstream>

#include "src/shell_quote.h"

namespace fleet {

std::string BuildProbeScript(const std::vector<ProbeFragment>& fragments,
                             const std::string& nonce) {
  std::string s;
  for (const ProbeFragment& f : fragments) {
    const std::string tag = ShellQuote(f.address);
    s += "printf '\\n@@fleet:" + nonce + ":begin:%s\\n' " + tag + "\n";
    s += "{\nset --\n" + f.script + "\n}\n";
    s += "printf '\\n@@fleet:" + nonce + ":end:%s:%s\\n' " + tag + " \"$?\"\n";
  }
  return s;
}

std::map<std::string, ProbeSection> SplitProbeOutput(const std::string& output,
                                                     const std::string& nonce) {
  const std::string begin = "@@fleet:" + nonce + ":begin:";
  const std::string end = "@@fleet:" + nonce + ":end:";
  std::map<std::string, ProbeSection> sections;
  std::istringstream in(output);
  std::string line, current;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind(begin, 0) == 0) {
      current = line.substr(begin.size());
      sections[current] = ProbeSection{};
      inside = true;
    } else if (line.rfind(end, 0) == 0) {
      std::string rest = line.substr(end.size());
      size_t colon = rest.rfind(':');
      if (colon != std::string::npos && inside && rest.substr(0, colon) == current) {
        try {
          sections[current].exit_code = std::stoi(rest.substr(colon + 1));
        } catch (...) {
        }
        // Drop the newline the end marker's leading \n added.
        std::string& out = sections[current].output;
        if (!out.empty() && out.back() == '\n') out.pop_back();
      }
      inside = false;
    } else if (inside) {
      sections[current].output += line + "\n";
    }
  }
  return sections;
}

}  // namespace fleet
