// Expectations on a manifest or recipe's diagnostics, each compared by the
// line an operator reads (Diagnostic::ToString()), so a failure prints
// every diagnostic there was.
#ifndef FLEET_TESTS_SUPPORT_EXPECT_DIAG_H_
#define FLEET_TESTS_SUPPORT_EXPECT_DIAG_H_

#include <gtest/gtest.h>

#include <string>

#include "manifests/diagnostic.h"

namespace fleet::testing_support {

// One line a diagnostic, indented: for a failure's message.
inline std::string Dump(const Diagnostics& diags) {
  std::string out;
  for (const Diagnostic& d : diags) out += "  " + d.ToString() + "\n";
  return out;
}

}  // namespace fleet::testing_support

// Expects exactly one diagnostic whose ToString() is `line`.
#define EXPECT_DIAG(diags, line)                                                                \
  do {                                                                                          \
    const ::fleet::Diagnostics& d_ = (diags);                                                   \
    int n_ = 0;                                                                                 \
    for (const ::fleet::Diagnostic& x_ : d_) n_ += x_.ToString() == (line);                     \
    EXPECT_EQ(n_, 1) << "want: " << (line) << "\ngot:\n" << ::fleet::testing_support::Dump(d_); \
  } while (0)

#endif  // FLEET_TESTS_SUPPORT_EXPECT_DIAG_H_
