// The one way fleet builds a remote shell command.
//
// Every command sent to a node goes through ShellQuote / ShellCommand: no
// provider concatenates user-controlled text into a shell string by hand.
#ifndef FLEET_SRC_SHELL_QUOTE_H_
#define FLEET_SRC_SHELL_QUOTE_H_

#include <string>
#include <string_view>
#include <vector>

namespace fleet {

// Returns `word` quoted for a POSIX shell so that the shell reads it back as
// exactly one word with exactly these bytes (quotes, $(), backticks, newlines,
// `;`, spaces, non-ASCII and the empty string included). Words made only of
// safe characters ([A-Za-z0-9_@%+=:,./-]) are returned unchanged for
// readability.
std::string ShellQuote(std::string_view word);

// Joins argv into one shell command line, each element quoted with ShellQuote.
// REQUIRES: !argv.empty().
std::string ShellCommand(const std::vector<std::string>& argv);

}  // namespace fleet

#endif  // FLEET_SRC_SHELL_QUOTE_H_
