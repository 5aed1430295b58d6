// The part of a failed container-CLI command's output worth putting in an
// error message: podman and docker print progress first and the cause last,
// on a line starting with "Error" (sometimes followed by indented details).
#ifndef FLEET_PROVIDERS_SHARED_CLI_ERROR_H_
#define FLEET_PROVIDERS_SHARED_CLI_ERROR_H_

#include <string>

namespace fleet {

// From the last line that starts with "Error" (else the last three lines) to
// the end, lines joined by " / ", trimmed, at most `max` characters (cut at
// the end, marked "..."). A line saying "no space left on device" (ENOSPC)
// is the cause wherever it is: then "no space left on device: LINE" alone.
std::string CliErrorText(const std::string& output, size_t max = 600);

// `s` with ASCII letters lowered: container CLIs word the same error in
// either case, so their output is matched lowered.
std::string AsciiLower(std::string s);

// Whether `text` says "no space left on device" (any case): ENOSPC.
bool ContainsNoSpace(const std::string& text);

// What to do when `text` says ENOSPC, to append to an error about the image
// storage of `cli` on `node` ("" when it does not): "; the image storage of
// docker on dgx3 is full: free space there and apply again".
std::string NoSpaceFix(const std::string& text, const std::string& cli, const std::string& node);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_CLI_ERROR_H_
