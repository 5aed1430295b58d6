#include "manifests/diagnostic.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace fleet {

std::string SourceLoc::ToString() const {
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  return out;
}

std::string Diagnostic::ToString() const {
  std::string out = loc.ToString();
  if (!out.empty()) out += ": ";
  out += severity == Severity::kError ? "error: " : "warning: ";
  out += message;
  return out;
}

bool HasErrors(const Diagnostics& diags) {
  return std::any_of(diags.begin(), diags.end(), [](const Diagnostic& d) {
    return d.severity == Diagnostic::Severity::kError;
  });
}

namespace {

std::string Lower(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Damerau-Levenshtein distance, optimal-string-alignment variant: one
// transposition of adjacent characters counts as one edit ("adress" and
// "adrses" are both one typo away from their target).
size_t EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  const size_t m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::string NearestName(const std::string& word,
                        const std::vector<std::string>& candidates) {
  if (word.empty()) return "";
  const std::string lower_word = Lower(word);
  // A difference of case only is always the intended name.
  for (const std::string& c : candidates) {
    if (c != word && Lower(c) == lower_word) return c;
  }
  // Allow about one typo per three characters: "adress" -> "address", but
  // "port" is not a typo of "host".
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  size_t best = limit + 1;
  std::string best_name;
  bool tie = false;
  for (const std::string& c : candidates) {
    if (c == word) continue;
    const size_t dist = EditDistance(lower_word, Lower(c));
    if (dist < best) {
      best = dist;
      best_name = c;
      tie = false;
    } else if (dist == best && c != best_name) {
      tie = true;
    }
  }
  // Two equally close names (dgx9 vs dgx1 and dgx2): guessing one of them
  // would mislead, so give no hint.
  if (best > limit || tie) return "";
  return best_name;
}

}  // namespace fleet
