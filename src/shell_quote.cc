// POSIX sh quoting. Single quotes are the only quoting in which the shell
// interprets nothing at all (no $, `, \, globbing, newlines), so every unsafe
// word is wrapped in them and each embedded ' becomes '\'' (close the quote,
// an escaped quote, reopen).
#include "src/shell_quote.h"

#include <string>
#include <string_view>
#include <vector>

namespace fleet {

namespace {

bool IsSafe(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
      (c >= '0' && c <= '9')) {
    return true;
  }
  switch (c) {
    case '_':
    case '@':
    case '%':
    case '+':
    case '=':
    case ':':
    case ',':
    case '.':
    case '/':
    case '-':
      return true;
    default:
      return false;
  }
}

std::string SingleQuote(std::string_view word) {
  std::string out;
  out.reserve(word.size() + 2);
  out.push_back('\'');
  for (char c : word) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

}  // namespace

// A NUL byte cannot be passed through a shell at all (argv strings end at
// it); such a word is quoted like any other and the shell sees it cut short.
std::string ShellQuote(std::string_view word) {
  if (word.empty()) return "''";
  for (char c : word) {
    if (!IsSafe(c)) return SingleQuote(word);
  }
  return std::string(word);
}

std::string ShellCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) out.push_back(' ');
    // A safe first word holding '=' (FOO=bar) would be read as a variable
    // assignment, not as the command to run: quote it so it stays a command.
    if (i == 0 && argv[0].find('=') != std::string::npos) {
      out.append(SingleQuote(argv[0]));
    } else {
      out.append(ShellQuote(argv[i]));
    }
  }
  return out;
}

}  // namespace fleet
