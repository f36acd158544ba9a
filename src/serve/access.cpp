#include "serve/access.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "util/errors.h"

namespace nmt::serve {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return lower(n) == name; });
}

// Compares in time that depends on the lengths only, not on where the first
// difference is: a key cannot be guessed a character at a time.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& longer = a.size() >= b.size() ? a : b;
  for (size_t i = 0; i < longer.size(); ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

std::string host_name(const std::string& host_header) {
  std::string h = lower(host_header);
  if (h.empty()) return "";
  std::string name;
  if (h[0] == '[') {  // [IPv6]:port
    const size_t close = h.find(']');
    if (close == std::string::npos) return "";
    name = h.substr(1, close - 1);
    const std::string rest = h.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || rest.size() == 1)) return "";
  } else {
    const size_t colon = h.find(':');
    name = h.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string port = h.substr(colon + 1);
      if (port.empty() || !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }))
        return "";
    }
  }
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is localhost
  return name;
}

std::string normalize_origin(const std::string& given) {
  const auto refuse = [&](const std::string& why) -> std::string {
    throw InputError("--allow-origin: '" + given + "' " + why +
                     " (an origin is scheme://host[:port], e.g. https://example.org, as a browser sends it)");
  };
  const std::string o = lower(given);
  const size_t sep = o.find("://");
  const std::string scheme = o.substr(0, sep);
  if (sep == std::string::npos || (scheme != "http" && scheme != "https"))
    return refuse("does not start with http:// or https://");
  std::string rest = o.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();  // "https://example.org/" is the origin itself
  if (rest.find_first_of("/?#") != std::string::npos) return refuse("has a path, query or fragment");
  if (rest.find('@') != std::string::npos) return refuse("has user info");
  std::string host = rest, port;
  bool has_port = false;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) return refuse("has an unclosed [");
    host = rest.substr(0, close + 1);
    const std::string after = rest.substr(close + 1);
    if (!after.empty() && after[0] != ':') return refuse("has text after its ]");
    if (!after.empty()) port = after.substr(1), has_port = true;
    unsigned char buf[16];
    if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) != 1)
      return refuse("has no IPv6 address between its [ ]");
  } else {
    const size_t colon = rest.find(':');
    if (colon != std::string::npos) host = rest.substr(0, colon), port = rest.substr(colon + 1), has_port = true;
    if (host.empty()) return refuse("has no host");
    if (!std::all_of(host.begin(), host.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '-'; }))
      return refuse("has a host that is not ASCII letters, digits, dots and hyphens (write a non-ASCII name in "
                    "its xn-- form)");
  }
  if (has_port) {
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return refuse("has a port that is not 1..65535");
    port = std::to_string(std::stoi(port));  // "08080" is 8080
  }
  const bool default_port = (scheme == "http" && port == "80") || (scheme == "https" && port == "443");
  return scheme + "://" + host + (port.empty() || default_port ? "" : ":" + port);
}

bool is_ip_literal(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

std::optional<Refusal> check_host(const std::string& host_header, const AccessPolicy& policy) {
  if (host_header.empty()) return Refusal{400, "Host: missing (HTTP/1.1 requires it)"};
  const std::string name = host_name(host_header);
  if (name.empty()) return Refusal{400, "Host: '" + host_header + "' is not a host[:port]"};
  if (is_ip_literal(name) || name == "localhost" || listed(policy.allow_hosts, name)) return std::nullopt;
  return Refusal{403, "Host: '" + name + "' is not a name of this service (an IP address, localhost, or a name " +
                          "given with --allow-host)"};
}

std::optional<Refusal> check_origin(bool has_origin, const std::string& origin, const std::string& host_header,
                                    const AccessPolicy& policy) {
  if (!has_origin) return std::nullopt;  // not a browser's cross-origin request
  const std::string o = lower(origin);
  const std::string host = lower(host_header);
  // The service's own pages (Host was checked first), directly or behind a
  // TLS proxy that keeps the Host.
  if (!host.empty() && (o == "http://" + host || o == "https://" + host)) return std::nullopt;
  if (listed(policy.allow_origins, o)) return std::nullopt;
  return Refusal{403, "Origin: '" + origin + "' may not call this service (a page of the service itself, or an " +
                          "origin given with --allow-origin)"};
}

std::optional<Refusal> check_api_key(const std::string& authorization, const AccessPolicy& policy) {
  if (policy.api_keys.empty()) return std::nullopt;
  constexpr char kScheme[] = "bearer ";
  constexpr size_t kSchemeLength = sizeof(kScheme) - 1;
  if (authorization.size() <= kSchemeLength || lower(authorization.substr(0, kSchemeLength)) != kScheme)
    return Refusal{401, "Authorization: this service needs 'Bearer KEY' (a key of its --api-key-file)"};
  const std::string key = authorization.substr(kSchemeLength);
  bool ok = false;
  for (const std::string& k : policy.api_keys) ok |= same_secret(k, key);  // no early exit
  if (!ok) return Refusal{401, "Authorization: the key is not one of this service's"};
  return std::nullopt;
}

std::optional<Refusal> check_json_body(const std::string& content_type, const std::string& path) {
  std::string type = content_type.substr(0, content_type.find(';'));
  type.erase(type.find_last_not_of(" \t") + 1);
  if (lower(type) == "application/json") return std::nullopt;
  return Refusal{415, "Content-Type: '" + content_type + "'; POST " + path + " takes application/json"};
}

Headers cors_headers(bool has_origin, const std::string& origin, const AccessPolicy& policy) {
  if (!has_origin || !listed(policy.allow_origins, lower(origin))) return {};
  // The origin as the page sent it: the browser compares it byte for byte.
  return {{"Access-Control-Allow-Origin", origin}, {"Access-Control-Expose-Headers", "Retry-After, Server-Timing"}};
}

Headers preflight_headers(bool has_origin, const std::string& origin, bool has_request_method,
                          const std::string& methods, const AccessPolicy& policy) {
  Headers h = cors_headers(has_origin, origin, policy);
  if (h.empty() || !has_request_method) return {};
  h.push_back({"Access-Control-Allow-Methods", methods});
  h.push_back({"Access-Control-Allow-Headers", "Content-Type, Authorization"});
  h.push_back({"Access-Control-Max-Age", "600"});
  return h;
}

std::vector<std::string> read_api_keys(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--api-key-file: cannot read " + path);
  std::vector<std::string> keys;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    if (line.size() < 16)
      throw InputError(path + ":" + std::to_string(number) + ": an API key of " + std::to_string(line.size()) +
                       " characters; use at least 16 (e.g. openssl rand -hex 32)");
    keys.push_back(line);
  }
  if (keys.empty()) throw InputError("--api-key-file: " + path + " holds no key");
  return keys;
}

bool reachable_beyond_loopback(const std::string& host) {
  const std::string h = lower(host);
  if (h == "localhost" || h == "::1" || h == "[::1]") return false;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) != 127;
  return true;
}

}  // namespace nmt::serve
