#include "providers/node/fabric_stream.h"

#include <openssl/rand.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "src/shell_quote.h"

namespace fleet {

namespace {

constexpr char kReady[] = "FLEET-FABRIC-READY ";

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    return "";
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string Side(const char* name, const Result<CommandResult>& r) {
  if (!r.ok()) return std::string(name) + ": " + r.status().message();
  if (r->exit_code == 0) return "";
  std::string err = r->err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (err.size() > 600) err = err.substr(0, 600) + "...";
  return std::string(name) + " exited " + std::to_string(r->exit_code) +
         (err.empty() ? "" : ": " + err);
}

// The shell words both scripts start with.
std::string Prelude(const std::string& address, const std::string& key, const std::string& id,
                    int timeout_s) {
  return "a=" + ShellQuote(address) + "; k=" + ShellQuote(key) + "; id=" + ShellQuote(id) +
         "; to=" + std::to_string(timeout_s) +
         "\nd=$(mktemp -d \"${TMPDIR:-/tmp}/fleet-fabric.XXXXXX\") || exit 1\n"
         "trap 'rm -rf \"$d\"' EXIT\n";
}

}  // namespace

std::string FabricListenScript(const std::string& address, const std::string& key,
                               const std::string& identity, const std::string& target_cmd,
                               int accept_timeout_s, int timeout_s) {
  return Prelude(address, key, identity, timeout_s) + "ato=" + std::to_string(accept_timeout_s) +
         "\n"
         "mkfifo \"$d/in\" || exit 1\n"
         // A free port: not in /proc/net/tcp{,6} (a race with another
         // program only makes the listener fail to start, which is reported).
         "port=\nfor i in 1 2 3 4 5 6 7 8 9 10; do\n"
         "  p=$(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 28000 + 32000 ))\n"
         "  grep -q \"$(printf ':%04X ' \"$p\")\" /proc/net/tcp /proc/net/tcp6 2>/dev/null || "
         "{ port=$p; break; }\ndone\n"
         "[ -n \"$port\" ] || { echo 'fabric: no free port' >&2; exit 1; }\n"
         // stdin: a FIFO opened read-write never has data nor EOF (s_server
         // closes the connection at EOF on its stdin).
         "{ timeout \"$to\" openssl s_server -quiet -nocert -naccept 1 -tls1_3 -psk \"$k\" "
         "-psk_identity \"$id\" -accept \"$a:$port\" 0<>\"$d/in\" 2>\"$d/err\" &\n"
         "  echo $! >\"$d/spid\"; wait $!; echo $? >\"$d/rc\"; } | (\n" +
         target_cmd +
         "\n) &\njob=$!\n"
         "listen=$(printf ':%04X 00000000:0000 0A' \"$port\")\n"
         "i=0\nuntil grep -q \"$listen\" /proc/net/tcp 2>/dev/null; do\n"
         "  i=$((i + 1))\n"
         "  if [ $i -gt 200 ] || ! kill -0 $job 2>/dev/null; then\n"
         "    kill $(cat \"$d/spid\" 2>/dev/null) 2>/dev/null; wait $job 2>/dev/null\n"
         "    echo \"fabric: no listener came up on $a:$port: $(head -c 600 \"$d/err\" "
         "2>/dev/null)\" >&2; exit 1\n"
         "  fi\n  sleep 0.05\ndone\n"
         // Nobody connected within ato seconds: the listener goes.
         "est=$(printf ':%04X [0-9A-F]*:[0-9A-F]* 01' \"$port\")\n"
         "( n=0; while [ $n -lt $((ato * 10)) ]; do grep -q \"$est\" /proc/net/tcp && exit 0;\n"
         "  sleep 0.1; n=$((n + 1)); done; : >\"$d/expired\"; kill $(cat \"$d/spid\") ) "
         "</dev/null >/dev/null 2>&1 &\nwd=$!\n"
         "echo \"" +
         kReady +
         "$port\"\n"
         "wait $job; trc=$?\nkill $wd 2>/dev/null\n"
         "src=$(cat \"$d/rc\" 2>/dev/null)\n"
         "err=$(grep -v -e 'SSL_get_servername' \"$d/err\" 2>/dev/null | head -c 600)\n"
         "if [ -e \"$d/expired\" ]; then echo \"fabric: nobody connected to $a:$port within "
         "$ato s; listener stopped\" >&2; exit 1; fi\n"
         "if [ -n \"$err\" ] || [ \"$src\" != 0 ]; then\n"
         "  echo \"fabric: the stream did not end cleanly (listener exit ${src:-?}): $err\" >&2\n"
         "  [ $trc = 0 ] && trc=3\nfi\nexit $trc\n";
}

std::string FabricSendScript(const std::string& address, int port, const std::string& key,
                             const std::string& identity, const std::string& source_cmd,
                             int timeout_s) {
  return Prelude(address, key, identity, timeout_s) + "port=" + std::to_string(port) + "\n{ (\n" +
         source_cmd +
         "\n) 2>\"$d/serr\"; echo $? >\"$d/rc\"; } | timeout \"$to\" openssl s_client -quiet "
         "-no_ign_eof -nocommands -tls1_3 -psk \"$k\" -psk_identity \"$id\" -connect "
         "\"$a:$port\" >/dev/null 2>\"$d/cerr\"\n"
         "crc=$?\nsrc=$(cat \"$d/rc\" 2>/dev/null)\n"
         "if [ \"$src\" != 0 ]; then echo \"the source command exited ${src:-?}: $(head -c 600 "
         "\"$d/serr\")\" >&2; exit 1; fi\n"
         "if [ $crc != 0 ]; then echo \"fabric: sending to $a:$port failed (exit $crc): $(grep "
         "-v -e SSL_get_servername -e '^DONE' \"$d/cerr\" | head -c 600)\" >&2; exit 1; fi\n";
}

std::string FabricStreamResult::Problem() const {
  std::string p;
  for (const std::string& s : {Side("source", source), Side("target", target)})
    if (!s.empty()) p += (p.empty() ? "" : "; ") + s;
  return p;
}

FabricStreamResult FabricStream(const FabricStreamSpec& spec) {
  FabricStreamResult result;
  const auto start = std::chrono::steady_clock::now();
  const std::string key = RandomHex(32), id = "fleet-" + RandomHex(6);
  if (key.empty() || id.size() < 7) {
    result.target = Status::Error("no random bytes for the transfer's key");
    return result;
  }
  std::mutex mu;
  std::condition_variable cv;
  int port = -1;
  bool ended = false;
  std::string head, after;  // target stdout before and after the ready line
  std::thread listener([&] {
    Result<CommandResult> r =
        spec.target->RunStreaming(FabricListenScript(spec.target_address, key, id, spec.target_cmd,
                                                     spec.accept_timeout_s, spec.timeout_s),
                                  [&](std::string_view chunk) {
                                    std::lock_guard<std::mutex> lock(mu);
                                    if (port >= 0) {
                                      after.append(chunk);
                                      return true;
                                    }
                                    head.append(chunk);
                                    size_t at = head.find(kReady);
                                    size_t eol = at == std::string::npos ? at : head.find('\n', at);
                                    if (eol != std::string::npos) {
                                      port = std::atoi(head.c_str() + at + sizeof kReady - 1);
                                      after = head.substr(0, at) + head.substr(eol + 1);
                                      cv.notify_all();
                                    }
                                    return true;
                                  });
    std::lock_guard<std::mutex> lock(mu);
    result.target = std::move(r);
    ended = true;
    cv.notify_all();
  });
  int the_port;
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return port >= 0 || ended; });
    the_port = port;
  }
  if (the_port > 0) {
    result.listening = true;
    const std::string& k = spec.source_key_override.empty() ? key : spec.source_key_override;
    result.source = spec.source->Run(
        FabricSendScript(spec.target_address, the_port, k, id, spec.source_cmd, spec.timeout_s));
  } else {
    result.source = Status::Error("not started: the target's listener did not come up");
  }
  listener.join();
  if (result.target.ok()) result.target->out = after;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace fleet
