#include "providers/shared/fabric_stream.h"

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
#include <string>
#include <thread>
#include <vector>

#include "providers/shared/fabric_listen_sh.h"
#include "providers/shared/fabric_send_sh.h"
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

constexpr char kHeartbeat[] = "FLEET-FABRIC-WAIT\n";  // printed by fabric_listen.sh

}  // namespace

std::string FabricListenScript(const std::string& address, const std::string& identity,
                               const std::string& target_cmd, const FabricLimits& limits,
                               const std::string& forward_cmd) {
  std::vector<std::string> argv = {"sh",
                                   "-c",
                                   std::string(kFabricListenScript, kFabricListenScriptSize),
                                   "fleet-fabric-listen",
                                   address,
                                   identity,
                                   std::to_string(limits.timeout_s),
                                   std::to_string(limits.accept_timeout_s),
                                   target_cmd};
  if (!forward_cmd.empty()) argv.push_back(forward_cmd);
  return ShellCommand(argv);
}

std::string FabricSendScript(const std::string& address, int port, const std::string& identity,
                             const std::string& source_cmd, const FabricLimits& limits) {
  return ShellCommand({"sh", "-c", std::string(kFabricSendScript, kFabricSendScriptSize),
                       "fleet-fabric-send", address, std::to_string(port), identity,
                       std::to_string(limits.timeout_s), std::to_string(limits.connect_timeout_s),
                       std::to_string(limits.stall_s), source_cmd});
}

std::string FabricSessionPem(const std::string& key_hex, int64_t now_s) {
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
            SSL_SESSION_set_time(session.get(), static_cast<long>(now_s) - kWeek) != 0 &&
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
  const auto start = spec.clock->SteadyNow();
  const int64_t now_s = spec.clock->UnixSeconds();
  const std::string key = fabric_internal::RandomKeyHex(), id = fabric_internal::RandomIdentity();
  const std::string pem = key.empty() ? "" : FabricSessionPem(key, now_s);
  const std::string source_pem =
      spec.source_key_override.empty() ? pem : FabricSessionPem(spec.source_key_override, now_s);
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
  result.seconds = std::chrono::duration<double>(spec.clock->SteadyNow() - start).count();
  return result;
}

}  // namespace fleet
