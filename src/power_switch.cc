#include "src/power_switch.h"

#include <curl/curl.h>

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
  HomeAssistantSwitch(std::string url, std::string token, int timeout_s)
      : url_(std::move(url)), token_(std::move(token)), timeout_s_(timeout_s) {
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
  std::string Where(const std::string& entity) const {
    return "power controller " + url_ + " (" + entity + ")";
  }

  Status Service(const std::string& service, const std::string& entity) {
    nlohmann::json body = {{"entity_id", entity}};
    Result<nlohmann::json> r = Request("POST", "/api/services/switch/" + service, body.dump());
    return r.ok() ? Status::OK() : r.status();
  }

  Result<nlohmann::json> Request(const std::string& method, const std::string& path,
                                 const std::string& body) {
    const std::string entity = path.substr(path.rfind('/') + 1);
    if (token_.empty())
      return Result<nlohmann::json>::Error(Where(entity) +
                                           ": no token (the manifest's token_env is not set)");
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
    if (method == "POST") {
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    }
    CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK)
      return Result<nlohmann::json>::Error(Where(entity) + ": " + method + " " + path +
                                           " failed: " + curl_easy_strerror(rc));
    return ReadHomeAssistantAnswer(code, response, method + " " + path, Where(entity));
  }

  std::string url_;
  std::string token_;
  int timeout_s_;
};

}  // namespace

Result<nlohmann::json> ReadHomeAssistantAnswer(long code, const std::string& body,
                                               const std::string& request,
                                               const std::string& where) {
  if (code == 401 || code == 403)
    return Result<nlohmann::json>::Error(where + ": HTTP " + std::to_string(code) +
                                         ": the token was refused (check the token in the "
                                         "environment variable the manifest's token_env names)");
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
                                                     const std::string& token, int timeout_s) {
  return std::make_unique<HomeAssistantSwitch>(url, token, timeout_s);
}

}  // namespace fleet
