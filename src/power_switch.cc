#include "src/power_switch.h"

#include <curl/curl.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

namespace fleet {

namespace {

size_t Collect(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

class HomeAssistantSwitch : public PowerSwitch {
 public:
  HomeAssistantSwitch(std::string url, std::string token, int timeout_s, PowerTls tls)
      : url_(std::move(url)),
        token_(std::move(token)),
        timeout_s_(timeout_s),
        tls_(std::move(tls)) {
    while (!url_.empty() && url_.back() == '/') url_.pop_back();
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  Result<std::string> GetState(const std::string& entity) override {
    Result<nlohmann::json> r = Request("GET", "/api/states/" + entity, "");
    if (!r.ok()) return r.status();
    return HomeAssistantState(*r, Where(entity));
  }
  Status TurnOn(const std::string& entity) override { return Service("turn_on", entity); }
  Status TurnOff(const std::string& entity) override { return Service("turn_off", entity); }

 private:
  // What to do about a certificate the controller's TLS was refused for.
  std::string TlsHint(CURLcode rc) const {
    if (rc != CURLE_PEER_FAILED_VERIFICATION && rc != CURLE_SSL_CACERT_BADFILE &&
        rc != CURLE_SSL_CERTPROBLEM)
      return "";
    return tls_.ca_file.empty()
               ? " (checked against the system's CAs: name the CA that signed the controller's "
                 "certificate with power.ca_file, or set power.insecure: true)"
               : " (checked against power.ca_file " + tls_.ca_file + ")";
  }

  std::string Where(const std::string& entity) const {
    return "power controller " + url_ + " (" + entity + ")";
  }

  Status Service(const std::string& service, const std::string& entity) {
    nlohmann::json body = {{"entity_id", entity}};
    Result<nlohmann::json> r = Request("POST", "/api/services/switch/" + service, body.dump());
    // A service call that failed is a failed step, not a dark node.
    return r.ok() ? Status::OK() : Status::Error(r.status().message());
  }

  Result<nlohmann::json> Request(const std::string& method, const std::string& path,
                                 const std::string& body) {
    const std::string entity = path.substr(path.rfind('/') + 1);
    // Not asked (no token) and not answered (curl's failures) are
    // Unreachable: the controller said nothing about the entity.
    if (token_.empty())
      return Result<nlohmann::json>(
          Status::Unreachable(Where(entity) + ": no token (the manifest's token_env is not set)"));
    CURL* curl = curl_easy_init();
    if (!curl) return Result<nlohmann::json>::Error("curl_easy_init failed");
    std::string response;
    // The header is built in memory only; curl never logs it (no VERBOSE).
    std::string auth = "Authorization: Bearer " + token_;
    curl_slist* headers = curl_slist_append(nullptr, auth.c_str());
    headers = curl_slist_append(headers, "Content-Type: application/json");
    std::string url = url_ + path;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(timeout_s_));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    // Never follow a redirect: the token would go along to wherever it points.
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    if (!tls_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, tls_.ca_file.c_str());
    if (tls_.insecure) {
      curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (method == "POST") {
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    }
    CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK) {
      // A certificate fleet was told not to trust is a refusal to fix, not
      // a controller that is away.
      const std::string hint = TlsHint(rc);
      const std::string message =
          Where(entity) + ": " + method + " " + path + " failed: " + curl_easy_strerror(rc) + hint;
      return Result<nlohmann::json>(hint.empty() ? Status::Unreachable(message)
                                                 : Status::Error(message));
    }
    return ReadHomeAssistantAnswer(code, response, method + " " + path, Where(entity));
  }

  std::string url_;
  std::string token_;
  int timeout_s_;
  PowerTls tls_;
};

}  // namespace

Result<nlohmann::json> ReadHomeAssistantAnswer(long code, const std::string& body,
                                               const std::string& request,
                                               const std::string& where) {
  if (code == 401 || code == 403)
    return Result<nlohmann::json>::Error(where + ": HTTP " + std::to_string(code) +
                                         ": the token was refused (check the token in the "
                                         "environment variable the manifest's token_env names)");
  if (code == 404 && request.rfind("GET /api/states/", 0) == 0)
    return Result<nlohmann::json>(Status::NotFound(
        where +
        ": HTTP 404: the controller has no such entity (check the switch name in the "
        "manifest against the controller's entity ids)"));
  if (code < 200 || code >= 300)
    return Result<nlohmann::json>::Error(where + ": " + request + " answered HTTP " +
                                         std::to_string(code));
  nlohmann::json answer =
      body.empty() ? nlohmann::json() : nlohmann::json::parse(body, nullptr, false);
  if (answer.is_discarded()) return Result<nlohmann::json>::Error(where + ": answer is not JSON");
  return answer;
}

Result<std::string> HomeAssistantState(const nlohmann::json& answer, const std::string& where) {
  if (!answer.is_object() || !answer.contains("state") || !answer["state"].is_string())
    return Result<std::string>::Error(where + ": unexpected answer (no state)");
  return answer["state"].get<std::string>();
}

std::unique_ptr<PowerSwitch> MakeHomeAssistantSwitch(const std::string& url,
                                                     const std::string& token, int timeout_s,
                                                     const PowerTls& tls) {
  return std::make_unique<HomeAssistantSwitch>(url, token, timeout_s, tls);
}

std::unique_ptr<PowerSwitch> MakeDeclaredPowerSwitch(const PowerController& controller) {
  if (!controller.present) return nullptr;
  // The token lives in the environment only; it is handed to the switch
  // and never printed, logged or saved.
  const char* token = std::getenv(controller.token_env.c_str());
  return MakeHomeAssistantSwitch(controller.url, token ? token : "", 10,
                                 PowerTls{controller.ca_file, controller.insecure});
}

std::string UnusableSwitchState(const std::string& state) {
  if (state == "unavailable" || state == "unknown")
    return "the controller reads it '" + state +
           "' (the device behind the entity does not answer the controller)";
  return "";
}

Status ConfirmSwitched(PowerSwitch* power, const std::string& entity, const std::string& want,
                       Clock* clock, int bound_ms, int poll_ms) {
  const auto start = clock->SteadyNow();
  const auto deadline = start + std::chrono::milliseconds(bound_ms);
  std::string last;
  while (true) {
    Result<std::string> state = power->GetState(entity);
    if (state.ok()) {
      last = *state;
      if (last == want) return Status::OK();
    } else {
      last = "(not read: " + state.status().message() + ")";
    }
    if (clock->SteadyNow() >= deadline) break;
    clock->SleepFor(std::chrono::milliseconds(poll_ms));
  }
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock->SteadyNow() - start).count();
  return Status::Error("switch " + entity + " did not follow turn_" + want + ": it still reads " +
                       last + " " + std::to_string((waited + 500) / 1000) +
                       " s later (a stuck relay, or an entity that is not the one feeding this "
                       "node)");
}

}  // namespace fleet
