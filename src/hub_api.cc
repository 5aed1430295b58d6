#include "src/hub_api.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "manifests/manifest.h"
#include "src/json_number.h"

namespace fleet {

namespace {

size_t Collect(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

// Collects the Link header of an answer (the next page of a tree).
size_t CollectLink(char* data, size_t size, size_t n, void* user) {
  std::string line(data, size * n);
  std::string lower = line.substr(0, 5);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower == "link:") *static_cast<std::string*>(user) = line.substr(5);
  return size * n;
}

std::string PercentEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

class CurlHub : public HubApi {
 public:
  CurlHub(std::string endpoint, std::string token, std::string token_env, int timeout_s)
      : endpoint_(std::move(endpoint)),
        token_(std::move(token)),
        token_env_(std::move(token_env)),
        timeout_s_(timeout_s) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  std::string Endpoint() const override { return endpoint_; }
  std::string DownloadToken() const override { return token_; }

  Result<HubListing> ListFiles(const std::string& repo, const std::string& revision) override {
    const std::string key = repo + "@" + revision;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = asked_.find(key); it != asked_.end()) return it->second;
    }
    Result<HubListing> r = Ask(repo, revision);
    // No answer is not remembered: the next ask (apply's, a watch round's)
    // tries again.
    if (!r.ok() && r.status().unreachable()) return r;
    std::lock_guard<std::mutex> lock(mu_);
    asked_.emplace(key, r);
    return r;
  }

 private:
  Result<HubListing> Ask(const std::string& repo, const std::string& revision) {
    const std::string where = "the Hub at " + endpoint_ + ": " + repo + "@" + revision;
    HubListing listing;
    std::string url = endpoint_ + HubTreePath(repo, revision);
    for (int page = 0; !url.empty(); ++page) {
      if (page >= 1000) return Result<HubListing>::Error(where + ": more than 1000 pages");
      std::string body, link;
      long code = 0;
      Status got = Get(url, &body, &link, &code);
      if (!got.ok()) return Result<HubListing>(Status::Unreachable(where + ": " + got.message()));
      Result<std::vector<HubFile>> files =
          ReadHubTreePage(code, body, where, token_env_, !token_.empty());
      if (!files.ok()) return files.status();
      for (const HubFile& f : *files) listing.files.push_back(f);
      url = NextPageLink(link);
    }
    std::sort(listing.files.begin(), listing.files.end(),
              [](const HubFile& a, const HubFile& b) { return a.path < b.path; });
    return listing;
  }

  Status Get(const std::string& url, std::string* body, std::string* link, long* code) {
    CURL* curl = curl_easy_init();
    if (!curl) return Status::Error("curl_easy_init failed");
    // The header is built in memory only; curl never logs it (no VERBOSE).
    curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
    std::string auth;
    if (!token_.empty()) {
      auth = "Authorization: Bearer " + token_;
      headers = curl_slist_append(headers, auth.c_str());
    }
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(timeout_s_));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    // Redirects stay on the same scheme and never carry the token elsewhere
    // (curl drops Authorization on a redirect to another host).
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, CollectLink);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, link);
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK) return Status::Error(std::string("no answer: ") + curl_easy_strerror(rc));
    if (*code >= 500)
      return Status::Error("HTTP " + std::to_string(*code) + " (the Hub is not answering now)");
    return Status::OK();
  }

  std::string endpoint_;
  std::string token_;
  std::string token_env_;
  int timeout_s_;
  std::mutex mu_;
  std::map<std::string, Result<HubListing>> asked_;
};

}  // namespace

uint64_t HubListing::Bytes() const {
  uint64_t n = 0;
  for (const HubFile& f : files) n += f.size;
  return n;
}

std::string HubEndpointFromEnv() {
  const char* e = std::getenv("HF_ENDPOINT");
  std::string endpoint = e && *e ? e : "https://huggingface.co";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

std::unique_ptr<HubApi> MakeHubApi(const std::string& endpoint, const std::string& token,
                                   const std::string& token_env, int timeout_s) {
  return std::make_unique<CurlHub>(endpoint, token, token_env, timeout_s);
}

std::unique_ptr<HubApi> MakeHubApiFor(const Manifest& m) {
  // The token lives in the environment only; it is handed to the client
  // and never printed, logged or saved.
  const char* token = m.hub.token_env.empty() ? nullptr : std::getenv(m.hub.token_env.c_str());
  return MakeHubApi(HubEndpointFromEnv(), token ? token : "", m.hub.token_env);
}

std::string HubTreePath(const std::string& repo, const std::string& revision) {
  std::string r;
  for (char c : repo) r += c == '/' ? "/" : PercentEncode(std::string(1, c));
  return "/api/models/" + r + "/tree/" + PercentEncode(revision) + "?recursive=true";
}

Result<std::vector<HubFile>> ReadHubTreePage(long code, const std::string& body,
                                             const std::string& where, const std::string& token_env,
                                             bool sent_token) {
  using R = Result<std::vector<HubFile>>;
  const std::string var = token_env.empty() ? "the variable hub.token_env names" : token_env;
  if ((code == 401 || code == 403) && !sent_token)
    return R::Error(
        where + ": HTTP " + std::to_string(code) +
        ": the repo is gated or private and fleet sent no token (" +
        (token_env.empty() ? "set hub: {token_env: HF_TOKEN} in fleet.yaml and export" : "export") +
        " the Hub token in " + (token_env.empty() ? "HF_TOKEN" : token_env) + ")");
  if (code == 401 || code == 403)
    return R::Error(where + ": HTTP " + std::to_string(code) + ": the token in " + var +
                    " was refused or has no access to this repo (accept its terms on the "
                    "Hub, or use a token that may read it)");
  if (code == 404)
    return R(Status::NotFound(where + ": HTTP 404: no such repo or revision on the Hub" +
                              (sent_token ? "" : " (or a private repo: fleet sent no token)")));
  if (code < 200 || code >= 300) return R::Error(where + ": HTTP " + std::to_string(code));
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    return R::Error(where + ": the answer is not a JSON list of files");
  std::vector<HubFile> files;
  for (const nlohmann::json& e : j) {
    if (!e.is_object()) return R::Error(where + ": an entry of the answer is not an object");
    if (e.value("type", "") != "file") continue;
    HubFile f;
    auto path = e.find("path");
    if (path == e.end() || !path->is_string() || path->get<std::string>().empty())
      return R::Error(where + ": a file without a path");
    f.path = path->get<std::string>();
    std::optional<uint64_t> size;
    auto lfs = e.find("lfs");
    if (lfs != e.end() && lfs->is_object()) {
      if (auto s = lfs->find("size"); s != lfs->end()) size = NonNegativeInteger(*s);
      if (auto o = lfs->find("oid"); o != lfs->end() && o->is_string())
        f.blob = o->get<std::string>();
    }
    if (!size)
      if (auto s = e.find("size"); s != e.end()) size = NonNegativeInteger(*s);
    if (!size) return R::Error(where + ": " + f.path + " has no size");
    f.size = *size;
    if (f.blob.empty())
      if (auto o = e.find("oid"); o != e.end() && o->is_string()) f.blob = o->get<std::string>();
    files.push_back(std::move(f));
  }
  return files;
}

std::string NextPageLink(const std::string& link_header) {
  // <https://host/api/...&cursor=x>; rel="next", <...>; rel="prev"
  size_t pos = 0;
  while ((pos = link_header.find('<', pos)) != std::string::npos) {
    const size_t end = link_header.find('>', pos);
    if (end == std::string::npos) return "";
    const size_t next = link_header.find('<', end);
    const std::string params =
        link_header.substr(end + 1, next == std::string::npos ? std::string::npos : next - end - 1);
    if (params.find("rel=\"next\"") != std::string::npos ||
        params.find("rel=next") != std::string::npos)
      return link_header.substr(pos + 1, end - pos - 1);
    pos = end;
  }
  return "";
}

}  // namespace fleet
