// ShellQuote / ShellCommand against a real shell: every hostile word must come
// back byte for byte from `printf %s WORD`, under dash (/bin/sh) and bash
// (the usual login shell sshd runs the command with).
#include "src/shell_quote.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "src/local_transport.h"

namespace fleet {
namespace {

std::vector<std::string> HostileWords() {
  std::vector<std::string> words = {
      "",
      " ",
      "plain",
      "two words",
      "'",
      "''",
      "it's",
      "\"double\"",
      "'mixed\" quotes'",
      "$(touch /tmp/fleet-pwned)",
      "`touch /tmp/fleet-pwned`",
      "${HOME}",
      "$HOME",
      "$0 $1 $@ $* $# $? $$ $!",
      "a\nb",
      "\n",
      "trailing newline\n\n",
      "a;b",
      "; rm -rf /",
      "a && b || c",
      "a | b",
      "a > b < c >> d 2>&1",
      "(sub) {group}",
      "*",
      "?",
      "[a-z]*",
      "/*",
      "~",
      "~root",
      "~/x",
      "-n",
      "-e",
      "--",
      "-",
      "a=b",
      "#comment",
      "back\\slash",
      "\\",
      "\\'",
      "'\\''",
      "!event",
      "%s%d%n",
      "tab\there",
      "\r\n",
      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80",
      "\xff\xfe\x80 invalid utf-8",
      "safe_chars-@%+=:,./0123456789",
  };
  std::string controls;
  for (int c = 1; c < 0x20; ++c) controls.push_back(static_cast<char>(c));
  words.push_back(controls);
  std::string all_bytes;
  for (int c = 1; c < 256; ++c) all_bytes.push_back(static_cast<char>(c));
  words.push_back(all_bytes);
  return words;
}

class ShellQuoteShellTest : public ::testing::Test {
 protected:
  // Runs `printf %s QUOTED` under `shell` and returns what it printed.
  std::string Echo(const std::string& shell, const std::string& word) {
    std::string script = "printf %s " + ShellQuote(word);
    auto r = local_.Run(ShellCommand({shell, "-c", script}));
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return "<error>";
    EXPECT_EQ(r->exit_code, 0) << r->err;
    EXPECT_EQ(r->err, "");
    return r->out;
  }

  static SshEndpoint LocalEndpoint() {
    SshEndpoint e;
    e.node = "test";
    e.address = "local";
    return e;
  }

  LocalTransport local_{LocalEndpoint()};
};

TEST(ShellQuoteTest, Forms) {
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("abc"), "abc");
  EXPECT_EQ(ShellQuote("/usr/bin/x-y_z.1:2,3@4%5+6=7"),
            "/usr/bin/x-y_z.1:2,3@4%5+6=7");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("~"), "'~'");
  EXPECT_EQ(ShellQuote("*"), "'*'");
  EXPECT_EQ(ShellCommand({"echo", "a b", ""}), "echo 'a b' ''");
  // A first word like FOO=bar would be an assignment, not a command.
  EXPECT_EQ(ShellCommand({"A=b", "c=d"}), "'A=b' c=d");
}

TEST_F(ShellQuoteShellTest, HostileWordsRoundTripInSh) {
  for (const std::string& w : HostileWords()) {
    EXPECT_EQ(Echo("/bin/sh", w), w) << "quoted as " << ShellQuote(w);
  }
}

TEST_F(ShellQuoteShellTest, HostileWordsRoundTripInBash) {
  for (const std::string& w : HostileWords()) {
    EXPECT_EQ(Echo("/bin/bash", w), w) << "quoted as " << ShellQuote(w);
  }
}

TEST_F(ShellQuoteShellTest, ShellCommandPrintfPrintsTheWord) {
  for (const std::string& w : HostileWords()) {
    auto r = local_.Run(ShellCommand({"printf", "%s\n", w}));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->exit_code, 0);
    EXPECT_EQ(r->out, w + "\n")
        << "command: " << ShellCommand({"printf", "%s\n", w});
  }
}

TEST_F(ShellQuoteShellTest, NothingWasExecuted) {
  // The $() and backtick words above must not have run.
  auto r = local_.Run("test -e /tmp/fleet-pwned && echo pwned || echo clean");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "clean\n");
}

TEST_F(ShellQuoteShellTest, VeryLongWords) {
  // One argv string may hold at most 128 KiB on Linux, and quoting it twice
  // (the word, then the script for sh -c) inflates it: stay well under there,
  // and go to 1 MiB through the shell's stdin.
  std::string w;
  while (w.size() < 24 * 1024) w += "it's $(x) `y` \n\t*?[ ~ -";
  EXPECT_TRUE(Echo("/bin/sh", w) == w) << "24 KiB word did not round-trip";

  std::string big;
  while (big.size() < 1024 * 1024) big += "'\"$\\`\n ;&|<>*?[]~#!%\x01\xc3\xa9";
  auto r = local_.Run("/bin/sh", "printf %s " + ShellQuote(big));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_TRUE(r->out == big) << "1 MiB word did not round-trip";
}

TEST_F(ShellQuoteShellTest, RandomBytes) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(1, 255);
  std::uniform_int_distribution<int> len(0, 64);
  // Batch many words into one script, separated by NUL (which no word holds).
  std::string script;
  std::string expected;
  for (int i = 0; i < 400; ++i) {
    std::string w;
    for (int n = len(rng); n > 0; --n)
      w.push_back(static_cast<char>(byte(rng)));
    script += "printf '%s\\0' " + ShellQuote(w) + "\n";
    expected += w;
    expected.push_back('\0');
  }
  for (const char* shell : {"/bin/sh", "/bin/bash"}) {
    auto r = local_.Run(shell, script);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->exit_code, 0) << r->err;
    EXPECT_TRUE(r->out == expected)
        << shell << ": random words did not round-trip";
  }
}

}  // namespace
}  // namespace fleet
