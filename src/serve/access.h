// Who may call `nmt serve`: the checks every request passes before it is
// routed (serve/http_server.cpp calls them; no HTTP library here, so the
// rules are unit-tested on their own).
//
// - Host must name this service: an IP literal, `localhost`, or a name given
//   with --allow-host. A page whose attacker-controlled DNS name resolves to
//   127.0.0.1 (DNS rebinding) sends its own name as Host, and is refused:
//   a name proves nothing unless the operator declared it.
// - Origin, which browsers send with cross-origin requests (and with every
//   POST): allowed when it is this service itself (http://HOST, with Host
//   checked above) or one --allow-origin names; any other web page is refused,
//   so a site the user visits cannot queue work on a local service.
// - With keys (--api-key-file), the API routes need `Authorization: Bearer
//   KEY`; /healthz and the explorer's static files stay open.
// - CORS (the Fetch standard), so that a page of an --allow-origin origin can
//   read the answers: its requests' answers name it in
//   Access-Control-Allow-Origin, and its preflights (OPTIONS with
//   Access-Control-Request-Method, sent before a JSON POST or one with
//   Authorization) are answered 204 with the route's methods and the
//   headers a page may send, before the key check: a browser sends no
//   Authorization with a preflight, and the request that follows it still
//   needs the key. Every answer carries `Vary: Origin`.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nmt::serve {

struct AccessPolicy {
  std::vector<std::string> allow_hosts;    // host names beyond IP literals and localhost (case-insensitive)
  std::vector<std::string> allow_origins;  // origins beyond the service's own, e.g. "https://example.org"
  std::vector<std::string> api_keys;       // bearer keys; empty: none asked for
};

// Why a request is refused: its HTTP status and a one-line message.
struct Refusal {
  int status;
  std::string message;
};

// The host part of a Host header ("[::1]:8080" -> "::1", "Example:80" ->
// "example"), lowercased; empty when the header is malformed.
std::string host_name(const std::string& host_header);
// Whether `name` (host_name's output) is an IPv4 or IPv6 literal.
bool is_ip_literal(const std::string& name);

// An --allow-origin value as a browser writes its page's Origin header, so
// that the two compare equal: scheme and host lowercased, the scheme's
// default port (80, 443) and a lone trailing "/" dropped
// ("HTTP://Example.test:80/" -> "http://example.test"). InputError naming
// the flag for anything an Origin header never holds: another scheme, a
// path, a query, user info, a port out of range, an empty or non-ASCII host.
std::string normalize_origin(const std::string& given);

// Each returns nothing when the request may go on. `host_header` and
// `origin` are the headers' values ("" when absent; has_origin tells an
// absent Origin from an empty one).
std::optional<Refusal> check_host(const std::string& host_header, const AccessPolicy& policy);
std::optional<Refusal> check_origin(bool has_origin, const std::string& origin, const std::string& host_header,
                                    const AccessPolicy& policy);
std::optional<Refusal> check_api_key(const std::string& authorization, const AccessPolicy& policy);
// A POST to `path` must say its body is JSON ("application/json", any
// parameters): a form or text/plain body is what another site's page can
// send without the browser asking first (no CORS preflight). 415 otherwise.
std::optional<Refusal> check_json_body(const std::string& content_type, const std::string& path);

using Headers = std::vector<std::pair<std::string, std::string>>;

// The CORS headers of an answer to a request with this Origin (has_origin:
// whether it had one): Access-Control-Allow-Origin naming an origin that
// --allow-origin lists, and the answer headers a page may read
// (Retry-After, Server-Timing). Nothing for other origins: check_origin
// has refused those, and the service's own pages need no CORS. Vary: Origin
// is the caller's, on every answer.
Headers cors_headers(bool has_origin, const std::string& origin, const AccessPolicy& policy);

// A CORS preflight (OPTIONS with Access-Control-Request-Method) of a page
// --allow-origin lists, for a route answering `methods` ("POST"): the
// headers of its 204 answer (the route's methods, Content-Type and
// Authorization allowed, cached for 10 minutes), cors_headers' included.
// Empty when it is no preflight of a listed origin.
Headers preflight_headers(bool has_origin, const std::string& origin, bool has_request_method,
                          const std::string& methods, const AccessPolicy& policy);

// Keys from a file, one a line (blank lines and lines starting with # are
// skipped). InputError naming the file when it cannot be read or holds none,
// or a key is shorter than 16 characters.
std::vector<std::string> read_api_keys(const std::string& path);

// Whether listening on `host` can be reached from other machines (anything
// but a loopback address or localhost).
bool reachable_beyond_loopback(const std::string& host);

}  // namespace nmt::serve
