// How fleet hands a node-side script its values. The script is a .sh file
// beside its provider, embedded at build time (kNAMEScript, kNAMEScriptSize;
// providers/meson.build), linted by shellcheck -s sh. Its values go before
// its text as one line of assignments, run in the caller's shell: no
// `sh -c`, so no process more on the node, and a probe fragment stays one
// subshell. Each value is a shell word quoted once, by the one quoting
// function (ShellQuote), or NodePathWord for a path on the node (which may
// start from "$HOME").
#ifndef FLEET_PROVIDERS_SHARED_NODE_SCRIPT_H_
#define FLEET_PROVIDERS_SHARED_NODE_SCRIPT_H_

#include <cstddef>
#include <initializer_list>
#include <string>

namespace fleet {

struct ScriptValue {
  const char* name;  // the variable the script reads
  std::string word;  // its value as a shell word (ShellQuote, NodePathWord)
};

// "NAME=WORD NAME=WORD...\n" and then the script's text.
inline std::string ScriptWithValues(std::initializer_list<ScriptValue> values, const char* script,
                                    std::size_t size) {
  std::string s;
  for (const ScriptValue& v : values)
    s += (s.empty() ? "" : " ") + std::string(v.name) + "=" + v.word;
  return s + "\n" + std::string(script, size);
}

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_NODE_SCRIPT_H_
