#include "serve/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstdarg>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "serve/metrics.h"
#include "serve/translation_service.h"
#include "serve/web_assets.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/interrupt.h"

namespace nmt::serve {

namespace {

constexpr char kJson[] = "application/json";
constexpr char kTranslatePath[] = "/v1/translate";

// Routes that need the API key when the service has keys: everything but
// /healthz and the explorer's static files (which hold no data).
bool needs_key(const std::string& path) { return path.rfind("/v1/", 0) == 0 || path == "/metrics"; }

// The routes and the methods each answers, for 404 versus 405 (with Allow).
const std::map<std::string, std::string>& route_methods() {
  static const std::map<std::string, std::string> routes = [] {
    std::map<std::string, std::string> r{{kTranslatePath, "POST"},
                                         {"/v1/info", "GET, HEAD"},
                                         {"/healthz", "GET, HEAD"},
                                         {"/metrics", "GET, HEAD"}};
    for (const WebAsset& a : web_assets()) r[a.path] = "GET, HEAD";
    return r;
  }();
  return routes;
}

// A metrics label for the path: a known route, or "other" (so that random
// paths cannot grow the label set).
std::string route_label(const std::string& path) { return route_methods().count(path) ? path : "other"; }

// {"translations": [...], "attention": [...], "cut": [...], "length_limited":
// [...], "placeholders_lost": [...]} (attention only when asked, cut only when
// a text was longer than the model reads: the indices of those texts,
// translated from their first max_positions tokens; length_limited only when
// a text's translation, or a line's of it, stopped at the length limit before
// ending: their indices; placeholders_lost only when a text's translation
// lacks placeholders of the text: their indices); the attention maps arrive
// as JSON text from the batch and are spliced in.
std::string translate_answer(const Sentences& result, bool attention, const std::vector<size_t>& cut,
                             const std::vector<size_t>& length_limited, const std::vector<size_t>& placeholders_lost) {
  nlohmann::json translations = nlohmann::json::array();
  for (const SentenceResult& s : result) translations.push_back(s.translation);
  std::string out = "{\"translations\":" + translations.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (attention) {
    out += ",\"attention\":[";
    for (size_t i = 0; i < result.size(); ++i) out += (i ? "," : "") + result[i].attention_json;
    out += "]";
  }
  if (!cut.empty()) out += ",\"cut\":" + nlohmann::json(cut).dump();
  if (!length_limited.empty()) out += ",\"length_limited\":" + nlohmann::json(length_limited).dump();
  if (!placeholders_lost.empty()) out += ",\"placeholders_lost\":" + nlohmann::json(placeholders_lost).dump();
  return out + "}";
}

// An answer, before it becomes an MHD response.
struct Reply {
  int status = 200;
  std::string body;
  std::string type = kJson;
  std::vector<std::pair<std::string, std::string>> headers;
  const WebAsset* asset = nullptr;  // a static file: its bytes instead of body
  bool close = false;               // Connection: close
};

Reply error_reply(int status, const std::string& message) {
  Reply r;
  r.status = status;
  r.body = error_json(status, message);
  if (status == 503) r.headers.push_back({"Retry-After", "1"});  // every 503 here passes
  return r;
}

// A request refused because the bodies being read at once would pass the
// service's budget (HttpServer::reserve): when it announces its length, or
// as a chunked body grows past it.
constexpr const char* kBodiesBusy = "the service is reading too many request bodies at once; retry later";

// The Content-Length a request declares, if any.
std::optional<unsigned long long> declared_length(MHD_Connection* c) {
  const char* length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (!length) return std::nullopt;
  return std::strtoull(length, nullptr, 10);
}

// gzip at level 1 (fast: a 600 KB attention answer in a few ms, about a
// fifth of its size); empty when it does not pay.
std::string gzip(const char* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&z, size), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z.avail_in = static_cast<uInt>(size);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END && out.size() < size ? out : std::string();
}

// Whether an Accept-Encoding header takes gzip ("gzip", "*", not "gzip;q=0").
bool accepts_gzip(const char* accept_encoding) {
  if (!accept_encoding) return false;
  std::string a(accept_encoding);
  for (char& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  a.erase(std::remove(a.begin(), a.end(), ' '), a.end());
  for (size_t at = 0; at < a.size();) {
    const size_t end = std::min(a.find(',', at), a.size());
    const std::string item = a.substr(at, end - at);
    const size_t semi = item.find(';');
    const std::string coding = item.substr(0, semi);
    if (coding == "gzip" || coding == "*") {
      const size_t q = item.find("q=", semi == std::string::npos ? item.size() : semi);
      return q == std::string::npos || std::strtod(item.c_str() + q + 2, nullptr) > 0;
    }
    at = end + 1;
  }
  return false;
}

std::string client_address(const sockaddr* a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (!a) return text;
  if (a->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, text, sizeof(text));
  else if (a->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, text, sizeof(text));
  return text;
}

// The listening socket, made here rather than by the library: address reuse
// (restarting while old connections linger) without SO_REUSEPORT, which
// would let a second server silently take half the connections, and the
// system's full listen backlog. Port 0: any free port.
int listen_socket(const std::string& host, int port, int* bound_port) {
  const std::string where = "serve: cannot listen on " + host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    throw InputError(where + " (not an address of this machine)");
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
  for (const addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      sockaddr_storage s{};
      socklen_t n = sizeof(s);
      getsockname(fd, reinterpret_cast<sockaddr*>(&s), &n);
      *bound_port = ntohs(s.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&s)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&s)->sin_port);
      return fd;
    }
    ::close(fd);
  }
  throw InputError(where + " (address in use, or not an address of this machine)");
}

// Open files: raised to the hard limit, since every connection is one; the
// connections the limit allows.
int64_t raise_open_file_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur == RLIM_INFINITY ? (int64_t{1} << 30) : static_cast<int64_t>(r.rlim_cur);
}

// One TCP connection (MHD's socket context): who it is from, and the
// deadline it is under.
struct Peer {
  enum class Phase { kHeaders, kBody, kAnswering };
  std::string address;
  int fd = -1;
  Phase phase = Phase::kHeaders;
  Clock::time_point since = Clock::now();
  bool over_limit = false;  // opened beyond a connection limit: its first request gets 503
  bool shut = false;        // past its deadline: shut down, MHD closes it
};

// One request (MHD's per-request context), shared with the batch that
// answers it.
struct Exchange {
  std::string path, method;
  Clock::time_point start = Clock::now();
  std::string body;
  bool too_large = false;
  bool over_budget = false;  // the bodies being read at once would pass the service's budget
  int64_t reserved = 0;      // bytes of the body budget this request holds
  bool submitted = false;
  std::optional<Reply> early;  // decided from the headers alone, sent once the request is complete
  std::optional<Reply> refusal;  // a 413 decided from the headers, sent once its body is read and dropped
  bool attention = false;
  size_t texts = 0;           // texts in the request
  std::vector<size_t> owner;  // owner[k]: the text of line k (line breaks split a text)
  std::vector<size_t> cut;
  std::future<JobResult> result;
  MHD_Connection* connection = nullptr;
  std::mutex mutex;
  bool done = false, suspended = false;  // under mutex
};

class HttpServer {
 public:
  HttpServer(TranslationService& service, Metrics& metrics, const ServerOptions& options)
      : service_(service),
        metrics_(metrics),
        options_(options),
        batcher_(
            options.batching, [this](const std::vector<const Job*>& jobs) { return service_.run_batch(jobs); },
            [this] { return service_.make_stream(); }) {}

  int run();

 private:
  // MHD's callbacks.
  static MHD_Result on_request(void* self, MHD_Connection* c, const char* url, const char* method, const char*,
                               const char* upload, size_t* upload_size, void** context) {
    return static_cast<HttpServer*>(self)->request(c, url, method, upload, upload_size, context);
  }
  static void on_completed(void* self, MHD_Connection* c, void** context, MHD_RequestTerminationCode) {
    static_cast<HttpServer*>(self)->completed(c, context);
  }
  static void on_connection(void* self, MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode what) {
    static_cast<HttpServer*>(self)->connection(c, socket_context, what);
  }
  static void on_log(void*, const char* format, va_list args) {
    char text[512];
    std::vsnprintf(text, sizeof(text), format, args);
    std::string line(text);
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    spdlog::debug("http: {}", line);
  }

  MHD_Result request(MHD_Connection* c, const char* url, const char* method, const char* upload, size_t* upload_size,
                     void** context);
  void completed(MHD_Connection* c, void** context);
  void connection(MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode what);

  // The answer to a request whose headers just arrived, if it needs no body.
  // length: the request's declared Content-Length (declared_length), read once by the caller.
  std::optional<Reply> first_look(MHD_Connection* c, const std::string& path, const std::string& method, Peer* peer,
                                  std::optional<unsigned long long> length);
  // The body is in: translate (or answer at once).
  std::optional<Reply> translate(const std::shared_ptr<Exchange>& ex);
  Reply translated(Exchange& ex);
  MHD_Result send(MHD_Connection* c, const Exchange& ex, Reply reply);
  Peer* peer_of(MHD_Connection* c) const;
  void set_phase(Peer* peer, Peer::Phase phase);
  // Shuts down connections past their deadline; MHD then closes them.
  void sweep();

  TranslationService& service_;
  Metrics& metrics_;
  const ServerOptions& options_;
  Batcher batcher_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> failures_{0};  // numbers the 500s, so that a log line can be found
  std::atomic<int64_t> exchanges_{0};  // requests begun and not completed
  // Request bodies held at once, in bytes, and their bound: a connection costs
  // no thread, so without it many slow uploads could fill memory.
  std::atomic<int64_t> buffered_{0};
  int64_t body_budget_ = 0;
  bool reserve(Exchange& ex, int64_t bytes);
  // The largest declared body over --max-body-bytes that is read (and
  // dropped) before its 413, so that a client still sending sees the answer:
  // 16 times the limit, at least 16 MiB (dropping costs no memory; the idle
  // timeout still ends a client that stops sending).
  int64_t linger_bytes() const { return std::max<int64_t>(int64_t{16} << 20, 16 * options_.max_body_bytes); }

  mutable std::mutex peers_mutex_;
  std::unordered_set<Peer*> peers_;
  std::unordered_map<std::string, int64_t> per_address_;
};

bool HttpServer::reserve(Exchange& ex, int64_t bytes) {
  if (buffered_.fetch_add(bytes) + bytes > body_budget_) {
    buffered_ -= bytes;
    return false;
  }
  ex.reserved += bytes;
  return true;
}

Peer* HttpServer::peer_of(MHD_Connection* c) const {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? static_cast<Peer*>(info->socket_context) : nullptr;
}

void HttpServer::set_phase(Peer* peer, Peer::Phase phase) {
  if (!peer) return;
  std::lock_guard<std::mutex> lock(peers_mutex_);
  peer->phase = phase;
  peer->since = Clock::now();
}

void HttpServer::connection(MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode what) {
  if (what == MHD_CONNECTION_NOTIFY_STARTED) {
    auto peer = std::make_unique<Peer>();
    if (const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS))
      peer->address = client_address(info->client_addr);
    if (const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)) peer->fd = info->connect_fd;
    std::lock_guard<std::mutex> lock(peers_mutex_);
    const int64_t from_here = ++per_address_[peer->address];
    peer->over_limit = from_here > options_.connections.max_per_client ||
                       static_cast<int64_t>(peers_.size()) >= options_.connections.max_connections;
    peers_.insert(peer.get());
    *socket_context = peer.release();
    return;
  }
  auto* peer = static_cast<Peer*>(*socket_context);
  if (!peer) return;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    peers_.erase(peer);
    if (--per_address_[peer->address] <= 0) per_address_.erase(peer->address);
  }
  delete peer;
  *socket_context = nullptr;
}

void HttpServer::sweep() {
  const auto now = Clock::now();
  const auto& limits = options_.connections;
  std::lock_guard<std::mutex> lock(peers_mutex_);
  for (Peer* p : peers_) {
    if (p->shut || p->phase == Peer::Phase::kAnswering) continue;
    std::chrono::seconds allowed(p->phase == Peer::Phase::kBody ? limits.body_seconds : limits.header_seconds);
    if (p->over_limit) allowed = std::min(allowed, std::chrono::seconds(2));
    // Stopping: a request not yet read in full is not waited for.
    if (draining_) allowed = std::chrono::seconds(0);
    if (now - p->since < allowed) continue;
    // The descriptor stays MHD's: shutdown() only makes its next read see
    // the end, and MHD closes the connection (no descriptor reuse race).
    ::shutdown(p->fd, SHUT_RDWR);
    p->shut = true;
    spdlog::debug("http: closed a connection from {}: its {} took over {} s", p->address,
                  p->phase == Peer::Phase::kBody ? "body" : "headers", allowed.count());
  }
}

std::optional<Reply> HttpServer::first_look(MHD_Connection* c, const std::string& path, const std::string& method,
                                            Peer* peer, std::optional<unsigned long long> length) {
  const auto header = [c](const char* name) -> const char* {
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  };
  const auto text = [&](const char* name) { const char* v = header(name); return std::string(v ? v : ""); };
  if (peer && peer->over_limit) {
    Reply r = error_reply(503, "too many connections (at most " + std::to_string(options_.connections.max_per_client) +
                                   " from one address, " + std::to_string(options_.connections.max_connections) +
                                   " in all); retry later");
    r.close = true;
    return r;
  }
  // Who may call (serve/access.h), before any route.
  std::optional<Refusal> refused = check_host(text(MHD_HTTP_HEADER_HOST), options_.access);
  if (!refused) refused = check_origin(header("Origin") != nullptr, text("Origin"), text(MHD_HTTP_HEADER_HOST), options_.access);
  if (!refused && method == "OPTIONS") {
    // Which methods a route takes; for a listed origin's preflight, the
    // CORS answer (before the key check: a preflight carries no key).
    const auto route = route_methods().find(path);
    if (route == route_methods().end()) return error_reply(404, "no such path: " + path);
    Reply r;
    r.status = 204;
    r.type.clear();  // no body
    r.headers = preflight_headers(header("Origin") != nullptr, text("Origin"),
                                  header("Access-Control-Request-Method") != nullptr, route->second, options_.access);
    r.headers.push_back({"Allow", route->second + ", OPTIONS"});
    return r;
  }
  bool ask_key = false;
  if (!refused && needs_key(path)) {
    refused = check_api_key(text(MHD_HTTP_HEADER_AUTHORIZATION), options_.access);
    ask_key = refused.has_value();
  }
  if (refused) {
    Reply r = error_reply(refused->status, refused->message);
    if (ask_key) r.headers.push_back({"WWW-Authenticate", "Bearer"});
    return r;
  }
  const auto route = route_methods().find(path);
  if (route == route_methods().end()) return error_reply(404, "no such path: " + path);
  const bool get = method == "GET" || method == "HEAD";
  const bool allowed = route->second == "POST" ? method == "POST" : get;
  if (!allowed) {
    Reply r = error_reply(405, method + " " + path + ": method not allowed (allowed: " + route->second + ")");
    r.headers.push_back({"Allow", route->second});
    return r;
  }
  if (path == kTranslatePath) {
    if (draining_) return error_reply(503, "the service is shutting down");
    if (const auto bad = check_json_body(text(MHD_HTTP_HEADER_CONTENT_TYPE), kTranslatePath))
      return error_reply(bad->status, bad->message);
    if (!length && !header(MHD_HTTP_HEADER_TRANSFER_ENCODING))
      return error_reply(411, "body: a POST needs a Content-Length (or chunked encoding) and a JSON body");
    if (length && *length > static_cast<unsigned long long>(options_.max_body_bytes))
      return error_reply(413, "body: " + text(MHD_HTTP_HEADER_CONTENT_LENGTH) + " bytes, larger than the limit of " +
                                  std::to_string(options_.max_body_bytes) + " (--max-body-bytes)");
    return std::nullopt;  // read the body
  }
  Reply r;
  if (path == "/v1/info") {
    r.body = service_.info_json();
  } else if (path == "/healthz") {
    r.status = draining_ ? 503 : 200;
    r.body = draining_ ? "{\"status\":\"stopping\"}" : "{\"status\":\"ok\"}";
  } else if (path == "/metrics") {
    r.body = metrics_.render(batcher_.queued());
    r.type = "text/plain; version=0.0.4; charset=utf-8";
  } else {
    for (const WebAsset& a : web_assets())
      if (a.path == path) r.asset = &a, r.type = a.content_type;
    r.headers.push_back({"Cache-Control", "no-cache"});
  }
  return r;
}

std::optional<Reply> HttpServer::translate(const std::shared_ptr<Exchange>& ex) {
  try {
    if (ex->too_large)
      throw RequestError(413, "body: larger than the limit of " + std::to_string(options_.max_body_bytes) +
                                  " bytes (--max-body-bytes)");
    if (ex->over_budget) throw RequestError(503, kBodiesBusy);
    if (draining_) throw RequestError(503, "the service is shutting down");
    TranslateRequest request = parse_translate_request(ex->body, options_.limits);
    ex->texts = request.text.size();
    request.text = split_lines(request, options_.limits, &ex->owner);
    Job job = service_.make_job(request);
    ex->attention = request.attention;
    for (size_t line : job.cut)  // the texts cut, by their index
      if (ex->cut.empty() || ex->cut.back() != ex->owner[line]) ex->cut.push_back(ex->owner[line]);
    // The batch wakes this connection once its answer is ready; until then
    // the connection is suspended and holds no thread.
    std::weak_ptr<Exchange> weak = ex;
    job.on_done = [weak] {
      const std::shared_ptr<Exchange> e = weak.lock();
      if (!e) return;
      std::lock_guard<std::mutex> lock(e->mutex);
      e->done = true;
      if (e->suspended) MHD_resume_connection(e->connection);
    };
    ex->result = batcher_.submit(std::move(job));
    if (!ex->result.valid()) {
      if (draining_) throw RequestError(503, "the service is shutting down");
      throw RequestError(503, "the queue is full (" + std::to_string(options_.batching.max_queue) +
                                  " sentences waiting); retry later");
    }
    std::lock_guard<std::mutex> lock(ex->mutex);
    if (ex->done) return translated(*ex);
    MHD_suspend_connection(ex->connection);
    ex->suspended = true;
    return std::nullopt;
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  }
}

Reply HttpServer::translated(Exchange& ex) {
  try {
    JobResult result = ex.result.get();
    std::vector<size_t> limited, lost;  // the texts, by index (a line of a text counts for the text)
    std::string missing;                // what the translations lost, for the log
    for (size_t k = 0; k < result.sentences.size(); ++k) {
      const size_t text = ex.texts != result.sentences.size() ? ex.owner[k] : k;
      const SentenceResult& s = result.sentences[k];
      if (s.length_limited && (limited.empty() || limited.back() != text)) limited.push_back(text);
      if (!s.placeholders_lost.empty() && (lost.empty() || lost.back() != text)) lost.push_back(text);
      for (const std::string& p : s.placeholders_lost) missing += (missing.empty() ? "" : ", ") + p;
    }
    // Once a request: a program given such a translation breaks.
    if (!lost.empty())
      spdlog::warn("serve: a request's translations lost placeholders of their texts ({} of {} texts: {}){}",
                   lost.size(), ex.texts, missing,
                   service_.protects_placeholders()
                       ? ""
                       : "; this model does not protect placeholders (tokenizer.protect_placeholders: false)");
    if (ex.texts != result.sentences.size()) {  // texts with line breaks: their lines' translations joined
      std::vector<std::string> lines;
      for (const SentenceResult& s : result.sentences) lines.push_back(s.translation);
      const std::vector<std::string> joined = join_lines(lines, ex.owner, ex.texts);
      result.sentences.assign(ex.texts, SentenceResult{});
      for (size_t i = 0; i < ex.texts; ++i) result.sentences[i].translation = joined[i];
    }
    Reply r;
    r.body = translate_answer(result.sentences, ex.attention, ex.cut, limited, lost);
    // Where the time went (W3C Server-Timing): waiting for a batch, and the
    // batch's translation; the rest of a client's latency is HTTP.
    // (fmt, not std::to_string: that goes through printf, a tenth of the
    // HTTP threads' user time at concurrency 32.)
    r.headers.push_back({"Server-Timing", fmt::format("queue;dur={:.3f}, translate;dur={:.3f}",
                                                      1000 * result.queue_seconds, 1000 * result.batch_seconds)});
    metrics_.latency(std::chrono::duration<double>(Clock::now() - ex.start).count());
    return r;
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  } catch (const std::exception& e) {
    // The detail goes to the log only: it can name files and internals.
    const uint64_t id = ++failures_;
    spdlog::error("translate: request {} failed: {}", id, e.what());
    return error_reply(500, "translation failed (request " + std::to_string(id) + "; the service's log has the detail)");
  }
}

MHD_Result HttpServer::send(MHD_Connection* c, const Exchange& ex, Reply reply) {
  const char* data = reply.asset ? reinterpret_cast<const char*>(reply.asset->data) : reply.body.data();
  size_t size = reply.asset ? reply.asset->size : reply.body.size();
  std::string packed;
  // Answers differ by Origin (Access-Control-Allow-Origin, or a 403): a
  // cache must not hand one origin's answer to another.
  std::string vary = "Origin";
  const char* origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
  for (auto& h : cors_headers(origin != nullptr, origin ? origin : "", options_.access))
    if (std::none_of(reply.headers.begin(), reply.headers.end(), [&](const auto& have) { return have.first == h.first; }))
      reply.headers.push_back(std::move(h));
  if (size >= static_cast<size_t>(options_.connections.compress_min_bytes)) {
    vary += ", Accept-Encoding";
    if (accepts_gzip(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING)) &&
        !(packed = gzip(data, size)).empty()) {
      data = packed.data(), size = packed.size();
      reply.headers.push_back({"Content-Encoding", "gzip"});
    }
  }
  MHD_Response* response = MHD_create_response_from_buffer(size, const_cast<char*>(data), MHD_RESPMEM_MUST_COPY);
  if (!response) return MHD_NO;
  if (!reply.type.empty()) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.type.c_str());
  // On every answer: no MIME sniffing, no referrer leaking the page's
  // address, and the explorer allowed only its own files (no inline code,
  // no framing by another site).
  MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(response, "Content-Security-Policy",
                          "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
                          "frame-ancestors 'none'");
  MHD_add_response_header(response, "Vary", vary.c_str());
  for (const auto& [name, value] : reply.headers) MHD_add_response_header(response, name.c_str(), value.c_str());
  if (reply.close || draining_) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  const MHD_Result queued = MHD_queue_response(c, static_cast<unsigned int>(reply.status), response);
  MHD_destroy_response(response);
  metrics_.request(route_label(ex.path), reply.status);
  return queued;
}

MHD_Result HttpServer::request(MHD_Connection* c, const char* url, const char* method, const char* upload,
                               size_t* upload_size, void** context) {
  auto** slot = reinterpret_cast<std::shared_ptr<Exchange>**>(context);
  if (!*slot) {  // the headers are in
    auto ex = std::make_shared<Exchange>();
    ex->path = url;
    ex->method = method;
    ex->connection = c;
    *slot = new std::shared_ptr<Exchange>(ex);
    ++exchanges_;
    Peer* peer = peer_of(c);
    set_phase(peer, Peer::Phase::kBody);
    const std::optional<unsigned long long> length = declared_length(c);
    if (std::optional<Reply> early = first_look(c, ex->path, ex->method, peer, length)) {
      const bool body_follows = (length && *length > 0) ||
                                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
      // A client that writes its whole body before it reads the answer
      // (Python's http.client, requests) meets a connection closed in the
      // middle of its send, and a broken pipe instead of the 413: a body
      // over the limit but within linger_bytes() is read and dropped first,
      // and the 413 answers it whole (nginx's lingering close). A larger one,
      // or one whose client asked "Expect: 100-continue" (it waits for the
      // answer before it sends), is refused at once.
      const bool expects_continue = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) != nullptr;
      if (early->status == 413 && length && *length <= static_cast<uint64_t>(linger_bytes()) && !expects_continue) {
        ex->too_large = true;  // its pieces are dropped as they come (below)
        ex->refusal = std::move(early);
        return MHD_YES;
      }
      if (body_follows) {
        // Refused before its body: the body is not read, and the connection
        // closes after the answer (no "100 Continue" is sent either).
        early->close = true;
        set_phase(peer, Peer::Phase::kAnswering);
        return send(c, *ex, std::move(*early));
      }
      // Answered on the next call, once MHD holds the request as complete:
      // an answer queued now would end a kept-alive connection.
      ex->early = std::move(early);
      return MHD_YES;
    }
    if (length && !reserve(*ex, static_cast<int64_t>(*length))) {  // at most --max-body-bytes (first_look)
      Reply busy = error_reply(503, kBodiesBusy);
      busy.close = true;
      set_phase(peer, Peer::Phase::kAnswering);
      return send(c, *ex, std::move(busy));
    }
    return MHD_YES;  // the body follows (MHD answers "Expect: 100-continue")
  }
  const std::shared_ptr<Exchange> ex = **slot;
  if (ex->early) {
    set_phase(peer_of(c), Peer::Phase::kAnswering);
    Reply reply = std::move(*ex->early);
    ex->early.reset();
    return send(c, *ex, std::move(reply));
  }
  if (*upload_size > 0) {  // a piece of the body
    const int64_t size = static_cast<int64_t>(ex->body.size() + *upload_size);
    if (ex->too_large || ex->over_budget) {
      // already refused: the rest is read and dropped
    } else if (size > options_.max_body_bytes) {
      ex->too_large = true;
    } else if (size > ex->reserved && !reserve(*ex, size - ex->reserved)) {  // a chunked body growing
      ex->over_budget = true;
    }
    if (ex->too_large || ex->over_budget) {
      ex->body.clear();
      ex->body.shrink_to_fit();
    } else {
      ex->body.append(upload, *upload_size);
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (!ex->submitted) {  // the whole body is in
    ex->submitted = true;
    set_phase(peer_of(c), Peer::Phase::kAnswering);
    if (ex->refusal) {
      Reply refusal = std::move(*ex->refusal);
      ex->refusal.reset();
      refusal.close = true;
      return send(c, *ex, std::move(refusal));
    }
    std::optional<Reply> reply = translate(ex);
    return reply ? send(c, *ex, std::move(*reply)) : MHD_YES;
  }
  // Resumed: the batch has answered.
  return send(c, *ex, translated(*ex));
}

void HttpServer::completed(MHD_Connection* c, void** context) {
  auto* slot = static_cast<std::shared_ptr<Exchange>*>(*context);
  if (!slot) return;
  buffered_ -= (*slot)->reserved;
  delete slot;
  *context = nullptr;
  --exchanges_;
  set_phase(peer_of(c), Peer::Phase::kHeaders);  // a kept-alive connection now waits for its next request
}

int HttpServer::run() {
  const ConnectionLimits& limits = options_.connections;
  // A connection is an open file; a few more than the limit are taken, so
  // that they can be told 503 rather than dropped.
  const int64_t margin = std::max<int64_t>(64, limits.max_connections / 8);
  const int64_t files = raise_open_file_limit();
  int64_t hard_cap = limits.max_connections + margin;
  if (hard_cap + 64 > files) {
    hard_cap = std::max<int64_t>(16, files - 64);
    spdlog::warn("serve: the open-file limit is {} (ulimit -n): at most {} connections at once, not --max-connections {} "
                 "+ {} to answer 503; raise it (ulimit -n, or LimitNOFILE= in a systemd unit)",
                 files, hard_cap, limits.max_connections, margin);
  }
  // As many bodies of the largest size at once as the old thread-per-connection
  // layer read (256), and never less than 64 MiB.
  body_budget_ = std::max<int64_t>(int64_t{64} << 20, 256 * options_.max_body_bytes);
  // SIGINT/SIGTERM: refuse new work and new connections, finish what was
  // read, answer it, then stop. Caught from before the first connection:
  // the port file says the service is up, and a signal sent the moment it
  // appears must stop it cleanly, not kill it (exit 0, not -15).
  install_interrupt_handlers("finishing the requests already read",
                             "still finishing the requests already read; Ctrl-C once more aborts");
  int port = 0;
  const int listening = listen_socket(options_.host, options_.port, &port);

  // The epoll threads start as SCHED_BATCH (threads inherit the policy of the
  // thread that creates them; this one goes back to its own after). Such a
  // thread, woken by a request or an answer, does not preempt a worker in
  // the middle of a decoding step: it runs on an idle core at once, else
  // when the worker's time slice ends, and then handles every connection
  // ready by then. Under load that is one switch for many requests instead
  // of one or two each (the workers were preempted ~1,200 times a second at
  // concurrency 32 on 2 cores, ~500 after), which cost throughput; with a
  // core idle (little load) nothing waits.
  int policy = SCHED_OTHER;
  sched_param param{};
  const bool policy_known = pthread_getschedparam(pthread_self(), &policy, &param) == 0;
  const sched_param batch{};
  const bool batched =
      policy_known && policy == SCHED_OTHER && pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch) == 0;
  MHD_Daemon* daemon = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, nullptr, nullptr,
      &HttpServer::on_request, this,
      MHD_OPTION_EXTERNAL_LOGGER, &HttpServer::on_log, this,
      MHD_OPTION_LISTEN_SOCKET, listening,
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned int>(limits.http_threads),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned int>(hard_cap),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned int>(limits.idle_seconds),
      MHD_OPTION_NOTIFY_COMPLETED, &HttpServer::on_completed, this,
      MHD_OPTION_NOTIFY_CONNECTION, &HttpServer::on_connection, this,
      MHD_OPTION_END);
  if (batched) pthread_setschedparam(pthread_self(), policy, &param);
  if (!daemon) {
    ::close(listening);
    throw std::runtime_error("serve: the HTTP layer (libmicrohttpd) did not start");
  }
  // The delay only where it applies: continuous batching starts a request at once.
  spdlog::info("batching: {} worker(s), {}, at most {} source tokens a batch, {} sentences queued",
               options_.batching.workers,
               options_.batching.continuous
                   ? std::string("requests continuously (greedy and beam in one running batch; a request starts at "
                                 "once and joins between two decoding steps)")
                   : fmt::format("whole batches (the oldest waiting request waits up to {} ms for others)",
                                 options_.batching.max_delay_ms),
               options_.batching.max_batch_tokens, options_.batching.max_queue);
  spdlog::info("connections: at most {} ({} from one address), headers within {} s, bodies within {} s, idle {} s, "
               "{} epoll thread(s)",
               limits.max_connections, limits.max_per_client, limits.header_seconds, limits.body_seconds,
               limits.idle_seconds, limits.http_threads);
  spdlog::info("listening on http://{}:{} (POST {}, GET /healthz, /metrics, / for the attention explorer)",
               options_.host, port, kTranslatePath);
  if (reachable_beyond_loopback(options_.host) && options_.access.api_keys.empty())
    spdlog::warn("serve: listening on {}, which other machines can reach, and no --api-key-file: anyone who can "
                 "connect may translate (put TLS and a key in front: docs/serve.md, \"The service on a network\")",
                 options_.host);
  if (!options_.port_file.empty()) write_file_atomic(options_.port_file, std::to_string(port) + "\n");

  auto last_sweep = Clock::now();
  while (!interrupted()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (Clock::now() - last_sweep >= std::chrono::milliseconds(250)) sweep(), last_sweep = Clock::now();
  }
  spdlog::info("stopping: no new connections; {} sentences queued", batcher_.queued());
  draining_ = true;
  const MHD_socket quiet = MHD_quiesce_daemon(daemon);
  if (quiet != MHD_INVALID_SOCKET) ::close(quiet);
  batcher_.stop();  // every queued job answered: their connections resume
  // Connections still sending a request are closed (sweep); answers being
  // written go out.
  const auto give_up = Clock::now() + std::chrono::seconds(limits.body_seconds + 2);
  while (exchanges_ > 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    sweep();
  }
  MHD_stop_daemon(daemon);
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace

int run_server(TranslationService& service, Metrics& metrics, const ServerOptions& options) {
  HttpServer server(service, metrics, options);
  return server.run();
}

}  // namespace nmt::serve
