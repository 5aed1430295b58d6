// Small helpers shared by the transports (not part of the public interface).
#ifndef FLEET_SRC_TRANSPORT_INTERNAL_H_
#define FLEET_SRC_TRANSPORT_INTERNAL_H_

#include <functional>
#include <string>
#include <string_view>

namespace fleet::transport_internal {

// Pulls the next piece of a command's standard input into *piece; returns
// false at EOF. The piece stays valid until the next call.
using StdinPull = std::function<bool(std::string_view* piece)>;

// A stdin source that yields `data` once (nothing when empty).
StdinPull StdinFromView(std::string_view data);

// Adapts the public RunWithInput callback. A chunk left in *chunk on the call
// that returns false is still sent, so a producer may hand over its last
// piece together with EOF.
StdinPull StdinFromCallback(
    const std::function<bool(std::string* chunk)>& next_stdin);

// The first 80 characters of `command`, newlines shown as "\n", in quotes:
// enough to recognise a command in an error message without flooding it.
std::string CommandSnippet(const std::string& command);

// Appends "killed by signal SIGNAME" (and "(core dumped)") to *err on a line
// of its own, for a command that did not exit normally.
void AppendSignalNote(const std::string& signal_name, bool core_dumped,
                      std::string* err);

// Expands a leading "~/" to $HOME (or the passwd entry's home).
std::string ExpandHome(const std::string& path);

// The name of the user this process runs as ("" if unknown).
std::string CurrentUserName();

}  // namespace fleet::transport_internal

#endif  // FLEET_SRC_TRANSPORT_INTERNAL_H_
