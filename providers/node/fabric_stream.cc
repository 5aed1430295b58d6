#include "providers/node/fabric_stream.h"

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <memory>
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

constexpr char kHeartbeat[] = "FLEET-FABRIC-WAIT\n";  // printed by kWatchdog
// Both ends: TLS 1.3 only, the external PSK's suite (its hash must match).
constexpr char kTls[] =
    "-tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 -psk_session \"$d/psk\" "
    "-psk_identity \"$id\"";

// The shell words both scripts start with: a 0700 temp dir, removed on any
// exit (`cleanup` first), also on HUP/INT/TERM and on SIGPIPE (the channel
// gone: the shell may write to it, e.g. dash's "Terminated" for a killed
// child; untrapped, SIGPIPE would end it before its cleanup). The cleanup
// writes nowhere. Then the PSK session file, 0600, from stdin.
std::string Prelude(const std::string& address, const std::string& id, int timeout_s,
                    const std::string& cleanup) {
  return "a=" + ShellQuote(address) + "; id=" + ShellQuote(id) +
         "; to=" + std::to_string(timeout_s) +
         "\numask 077\n"
         "d=$(mktemp -d \"${TMPDIR:-/tmp}/fleet-fabric.XXXXXX\") || exit 1\n"
         "trap 'exec >/dev/null 2>&1; " +
         cleanup +
         "rm -rf \"$d\"' EXIT\n"
         "trap 'exit 143' HUP INT PIPE TERM\n"
         "cat >\"$d/psk\" || exit 1\n";
}

// Fails when the listener did not come up (~10 s). Polled every 10 ms for
// its first 0.1 s, then every 50: s_server listens ~30-40 ms after its
// start, and a chain starts its listeners one after another, so each
// listener's ready line came ~22 ms sooner than with 50 ms throughout
// (55-62 ms against 82-86: the listen script alone, 6 runs each).
constexpr char kListenCheck[] =
    "listen=$(printf ':%04X 00000000:0000 0A' \"$port\")\n"
    "i=0\nuntil grep -q \"$listen\" /proc/net/tcp 2>/dev/null; do\n"
    "  i=$((i + 1))\n"
    "  if [ $i -gt 200 ] || ! kill -0 $job 2>/dev/null; then\n"
    "    kill $(cat \"$d/spid\" 2>/dev/null) 2>/dev/null; wait $job 2>/dev/null\n"
    "    echo \"fabric: no listener came up on $a:$port: $(head -c 600 \"$d/err\" "
    "2>/dev/null)\" >&2; exit 1\n"
    "  fi\n  if [ $i -le 10 ]; then sleep 0.01; else sleep 0.05; fi\ndone\n";

// A heartbeat line every 0.5 s until a connection comes, then every
// second until the stream ends (a write that fails, the channel gone,
// stops the listener); nobody within ato s: the listener is stopped.
constexpr char kWatchdog[] =
    "est=$(printf ':%04X [0-9A-F]*:[0-9A-F]* 01' \"$port\")\n"
    "( trap '' PIPE; n=0\n"
    "  beat() { printf 'FLEET-FABRIC-WAIT\\n' || { kill $(cat \"$d/spid\"); exit 0; }; }\n"
    "  while [ $n -lt $((ato * 10)) ]; do\n"
    "    if grep -q \"$est\" /proc/net/tcp; then\n"
    "      until [ -e \"$d/rc\" ] || [ ! -d \"$d\" ]; do beat; sleep 1 >/dev/null; done; exit 0\n"
    "    fi\n"
    "    [ $((n % 5)) != 0 ] || beat\n"
    "    sleep 0.1 >/dev/null; n=$((n + 1))\n"
    "  done; : >\"$d/expired\"; kill $(cat \"$d/spid\") ) </dev/null 2>/dev/null &\nwd=$!\n";

// While s_client runs: its connection's line in /proc/net/tcp (remote
// address and port as the kernel prints them on a little-endian host,
// state 01) showing retransmissions ($7) or window probes ($9) that got no
// answer, for `stall` samples a second apart in a row, stops it. An answer
// resets both counters, so a slow receiver (a zero window, answered) never
// counts; only silence does. It is stopped with KILL: a TERM that comes
// while the forked shell still has its parent's trap handler is lost. It
// holds no fd of the caller's (a relay's pipes, the channel), so its last
// `sleep` delays nobody's end of file.
constexpr char kStallWatch[] =
    "rem=$(IFS=.; set -- $a; printf '%02X%02X%02X%02X:%04X' \"$4\" \"$3\" \"$2\" \"$1\" "
    "\"$port\")\n"
    "( n=0\n"
    "  while sleep 1 && [ -d \"$d\" ]; do\n"
    "    set -- $(grep -m 1 \" $rem 01 \" /proc/net/tcp)\n"
    "    if [ $# -ge 9 ] && { [ \"$7\" != 00000000 ] || [ \"$9\" != 0 ]; }; then n=$((n + 1)); "
    "else n=0; fi\n"
    "    [ $n -lt $stall ] || { : >\"$d/stalled\"; kill $(cat \"$d/cpid\"); exit 0; }\n"
    "  done ) </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &\nsw=$!\n";

// The source command failed ($r): s_client is stopped before it sees its
// input end, so the stream ends without close_notify and the target side
// fails, instead of taking a truncated payload for a whole one.
constexpr char kAbortOnFailure[] =
    "if [ $r != 0 ]; then\n"
    "  i=0; until [ -s \"$d/cpid\" ] || [ $i -gt 250 ]; do sleep 0.02; i=$((i + 1)); done\n"
    "  p=$(cat \"$d/cpid\" 2>/dev/null)\n"
    "  if [ -n \"$p\" ] && kill $p 2>/dev/null; then\n"
    "    : >\"$d/aborted\"; while kill -0 $p 2>/dev/null; do sleep 0.02; done\n"
    "  fi\n"
    "fi; ";

}  // namespace

std::string FabricListenScript(const std::string& address, const std::string& identity,
                               const std::string& target_cmd, const FabricLimits& limits) {
  // The EXIT trap stops a listener still running (no rc yet) and the watchdog.
  return "wd=\n" +
         Prelude(address, identity, limits.timeout_s,
                 "[ -e \"$d/rc\" ] || kill $(cat \"$d/spid\"); [ -z \"$wd\" ] || kill $wd; ") +
         "ato=" + std::to_string(limits.accept_timeout_s) +
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
         // closes the connection at EOF on its stdin). $d/rc is renamed into
         // place: whoever sees it (a relay's forward) reads its whole value.
         "{ timeout \"$to\" openssl s_server -quiet -nocert -naccept 1 " +
         kTls +
         " -accept \"$a:$port\" 0<>\"$d/in\" 2>\"$d/err\" &\n"
         "  echo $! >\"$d/spid\"; wait $!; echo $? >\"$d/rc.w\"; mv \"$d/rc.w\" \"$d/rc\"; } | "
         "(\n" +
         target_cmd + "\n) &\njob=$!\n" + kListenCheck + "echo \"" + kReady + "$port\"\n" +
         kWatchdog +
         "wait $job; trc=$?\nkill $wd 2>/dev/null; wd=\n"
         "src=$(cat \"$d/rc\" 2>/dev/null)\n"
         "err=$(grep -v -e 'SSL_get_servername' \"$d/err\" 2>/dev/null | head -c 600)\n"
         "if [ -e \"$d/expired\" ]; then echo \"fabric: nobody connected to $a:$port within "
         "$ato s; listener stopped\" >&2; exit 1; fi\n"
         "if [ -n \"$err\" ] || [ \"$src\" != 0 ]; then\n"
         "  echo \"fabric: the stream did not end cleanly (listener exit ${src:-?}): $err\" >&2\n"
         "  [ $trc = 0 ] && trc=3\nfi\nexit $trc\n";
}

std::string FabricSendScript(const std::string& address, int port, const std::string& identity,
                             const std::string& source_cmd, const FabricLimits& limits) {
  return "job=; sw=\n" +
         Prelude(address, identity, limits.timeout_s,
                 "[ -z \"$job\" ] || kill $job; [ -z \"$sw\" ] || kill -9 $sw; ") +
         "port=" + std::to_string(port) + "; cto=" + std::to_string(limits.connect_timeout_s) +
         "; stall=" + std::to_string(limits.stall_s) + "\n{ (\n" + source_cmd +
         "\n) </dev/null 2>\"$d/serr\"; r=$?; echo $r >\"$d/rc\"\n" + kAbortOnFailure +
         // $d/cpid is s_client's own pid (sh execs it), not timeout's: a
         // TERM that reached timeout while it forked ended timeout alone,
         // and the s_client it had just started then saw its input end and
         // closed the stream cleanly, a failed source delivered as empty.
         "} | d=\"$d\" id=\"$id\" a=\"$a\" port=\"$port\" timeout \"$to\" sh -c 'echo $$ "
         ">\"$d/cpid\"; exec openssl s_client -state -quiet -no_ign_eof -nocommands " +
         kTls +
         " -connect \"$a:$port\"' >/dev/null 2>\"$d/cerr\" &\njob=$!\n"
         // Connected once s_client starts its handshake (-state prints
         // "SSL_connect:" on stderr, unbuffered); no payload byte can leave
         // before that. Not within cto s: s_client is stopped.
         "n=0\nuntil grep -q '^SSL_connect:' \"$d/cerr\" 2>/dev/null; do\n"
         "  kill -0 $job 2>/dev/null || break\n"
         "  [ $n -lt $((cto * 20)) ] || { kill $job 2>/dev/null; break; }\n"
         "  sleep 0.05; n=$((n + 1))\ndone\n" +
         kStallWatch +
         "wait $job 2>/dev/null; crc=$?; job=\nkill -9 $sw 2>/dev/null; sw=\nwait 2>/dev/null\n"
         "if [ -e \"$d/stalled\" ]; then echo \"fabric: $a:$port answered nothing for $stall s: "
         "that node or its link is gone; stopped sending\" >&2; exit " +
         std::to_string(kFabricStalledExit) +
         "\nfi\n"
         // Stopped by kAbortOnFailure: the source failed while s_client ran.
         // Not when it died of SIGPIPE (141) before any connection: then
         // s_client had already given up on connecting (its exit broke the
         // pipe), and that is the failure to report.
         "conn=; grep -q '^SSL_connect:' \"$d/cerr\" 2>/dev/null && conn=1\n"
         "if [ -e \"$d/aborted\" ] && { [ -n \"$conn\" ] || [ \"$(cat \"$d/rc\")\" != 141 ]; }; "
         "then\n"
         "  echo \"the source command exited $(cat \"$d/rc\"): $(head -c 600 \"$d/serr\")\" >&2\n"
         "  [ -n \"$conn\" ] || exit " +
         std::to_string(kFabricSourceFailedUnconnectedExit) +
         "\n  exit 1\nfi\n"
         "if [ -z \"$conn\" ]; then\n"
         "  why=$(grep -e 'errno=' -e 'BIO_connect:' \"$d/cerr\" | tail -n 1 | head -c 300)\n"
         "  echo \"fabric: could not connect to $a:$port within $cto s${why:+ ($why)}; no byte "
         "was sent\" >&2; exit " +
         std::to_string(kFabricUnconnectedExit) +
         "\nfi\n"
         "src=$(cat \"$d/rc\" 2>/dev/null)\n"
         "if [ \"$src\" != 0 ]; then echo \"the source command exited ${src:-?}: $(head -c 600 "
         "\"$d/serr\")\" >&2; exit 1; fi\n"
         "if [ $crc != 0 ]; then echo \"fabric: sending to $a:$port failed (exit $crc): $(grep "
         "-v -e SSL_get_servername -e '^DONE' -e '^SSL_connect:' -e '^SSL3 alert write:warning' "
         "\"$d/cerr\" | head -c 600)\" >&2; exit 1; fi\n";
}

std::string FabricSessionPem(const std::string& key_hex) {
  if (key_hex.size() != 64) return "";
  unsigned char key[32];
  for (size_t i = 0; i < 32; ++i) {
    int hi = OPENSSL_hexchar2int(static_cast<unsigned char>(key_hex[2 * i]));
    int lo = OPENSSL_hexchar2int(static_cast<unsigned char>(key_hex[2 * i + 1]));
    if (hi < 0 || lo < 0) return "";
    key[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  std::unique_ptr<SSL, void (*)(SSL*)> ssl(ctx ? SSL_new(ctx.get()) : nullptr, SSL_free);
  std::unique_ptr<SSL_SESSION, void (*)(SSL_SESSION*)> session(SSL_SESSION_new(), SSL_SESSION_free);
  std::unique_ptr<BIO, int (*)(BIO*)> pem(BIO_new(BIO_s_mem()), BIO_free);
  static const unsigned char kAes128GcmSha256[] = {0x13, 0x01};
  constexpr long kWeek = 7 * 24 * 3600;
  const SSL_CIPHER* cipher = ssl ? SSL_CIPHER_find(ssl.get(), kAes128GcmSha256) : nullptr;
  bool ok = cipher != nullptr && session && pem &&
            SSL_SESSION_set1_master_key(session.get(), key, sizeof key) == 1 &&
            SSL_SESSION_set_cipher(session.get(), cipher) == 1 &&
            SSL_SESSION_set_protocol_version(session.get(), TLS1_3_VERSION) == 1 &&
            // OpenSSL refuses an expired session even as an external PSK, by
            // each node's clock: valid from a week before to a week after
            // now, whatever the skew between the controller and the nodes.
            SSL_SESSION_set_time(session.get(), static_cast<long>(time(nullptr)) - kWeek) != 0 &&
            SSL_SESSION_set_timeout(session.get(), 2 * kWeek) != 0 &&
            PEM_write_bio_SSL_SESSION(pem.get(), session.get()) == 1;
  OPENSSL_cleanse(key, sizeof key);
  if (!ok) return "";
  char* data = nullptr;
  long n = BIO_get_mem_data(pem.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : "";
}

std::string FabricStreamResult::Problem() const {
  // The source could not connect: the listener was stopped by us, and its
  // side of the story is only that.
  if (unconnected && listening) return Side("source", source);
  std::string p;
  for (const std::string& s : {Side("source", source), Side("target", target)})
    if (!s.empty()) p += (p.empty() ? "" : "; ") + s;
  return p;
}

namespace fabric_internal {

namespace {

// What the listener printed after its ready line, heartbeats left out.
std::string WithoutHeartbeats(std::string out) {
  const std::string beat = kHeartbeat;
  for (size_t at = out.find(beat); at != std::string::npos; at = out.find(beat, at))
    out.erase(at, beat.size());
  return out;
}

}  // namespace

std::string RandomKeyHex() { return RandomHex(32); }
std::string RandomIdentity() { return "fleet-" + RandomHex(6); }

Listener::Listener(Transport* t, const std::string& script, const std::string& stdin_data)
    : thread_([this, t, script, stdin_data] {
        Result<CommandResult> r = t->RunStreaming(
            script, [this](std::string_view chunk) { return OnStdout(chunk); }, stdin_data);
        std::lock_guard<std::mutex> lock(mu_);
        result_ = std::move(r);
        ended_ = true;
        cv_.notify_all();
      }) {}

Listener::~Listener() {
  if (thread_.joinable()) thread_.join();
}

bool Listener::OnStdout(std::string_view chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancel_) {  // stops the listener (heartbeats come while it runs)
    stopped_ = true;
    return false;
  }
  if (port_ >= 0) {
    after_.append(chunk);
    return true;
  }
  head_.append(chunk);
  size_t at = head_.find(kReady);
  size_t eol = at == std::string::npos ? at : head_.find('\n', at);
  if (eol != std::string::npos) {
    port_ = std::atoi(head_.c_str() + at + sizeof kReady - 1);
    after_ = head_.substr(0, at) + head_.substr(eol + 1);
    cv_.notify_all();
  }
  return true;
}

int Listener::WaitPort() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return port_ >= 0 || ended_; });
  return port_ > 0 ? port_ : -1;
}

void Listener::Cancel(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_ = true;
  why_ = why;
}

Result<CommandResult> Listener::Join() {
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  Result<CommandResult> r = result_;
  // Stopped by us, not lost: the node answered (a heartbeat came).
  if (!r.ok() && stopped_ && !why_.empty()) r = CommandResult{1, "", "fabric: stopped: " + why_};
  if (r.ok()) r->out = WithoutHeartbeats(after_);
  return r;
}

}  // namespace fabric_internal

FabricStreamResult FabricStream(const FabricStreamSpec& spec) {
  FabricStreamResult result;
  const auto start = std::chrono::steady_clock::now();
  const std::string key = fabric_internal::RandomKeyHex(), id = fabric_internal::RandomIdentity();
  const std::string pem = key.empty() ? "" : FabricSessionPem(key);
  const std::string source_pem =
      spec.source_key_override.empty() ? pem : FabricSessionPem(spec.source_key_override);
  if (pem.empty() || source_pem.empty() || id.size() < 7) {
    result.target = Status::Error("cannot make the transfer's key");
    return result;
  }
  fabric_internal::Listener listener(
      spec.target, FabricListenScript(spec.target_address, id, spec.target_cmd, spec.limits), pem);
  const int port = listener.WaitPort();
  if (port > 0) {
    result.listening = true;
    result.source = spec.source->Run(
        FabricSendScript(spec.target_address, port, id, spec.source_cmd, spec.limits), source_pem);
    if (result.source.ok() && result.source->exit_code == kFabricUnconnectedExit)
      result.unconnected = true;
    if (result.source.ok() && NeverConnected(result.source->exit_code)) listener.Cancel();
    if (result.source.ok() && result.source->exit_code == kFabricStalledExit)
      listener.Cancel("its sender got no answer from it for " +
                      std::to_string(spec.limits.stall_s) + " s");
  } else {
    result.source = Status::Error("not started: the target's listener did not come up");
    result.unconnected = true;
  }
  result.target = listener.Join();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace fleet
