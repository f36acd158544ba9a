#include "serve/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

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

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_json(status, message), kJson);
}

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
std::string route_label(const std::string& path) {
  return route_methods().count(path) ? path : "other";
}

// {"translations": [...], "attention": [...], "cut": [...]} (attention only
// when asked, cut only when a text was longer than the model reads: the
// indices of those texts, translated from their first max_positions tokens);
// the attention maps arrive as JSON text from the batch and are spliced in.
std::string translate_answer(const Sentences& result, bool attention, const std::vector<size_t>& cut) {
  nlohmann::json translations = nlohmann::json::array();
  for (const SentenceResult& s : result) translations.push_back(s.translation);
  std::string out = "{\"translations\":" + translations.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (attention) {
    out += ",\"attention\":[";
    for (size_t i = 0; i < result.size(); ++i) out += (i ? "," : "") + result[i].attention_json;
    out += "]";
  }
  if (!cut.empty()) out += ",\"cut\":" + nlohmann::json(cut).dump();
  return out + "}";
}

// What every answer carries, and who may call (serve/access.h), before any
// route runs.
void guard(httplib::Server& server, const AccessPolicy& access) {
  // On every answer: no MIME sniffing, no referrer leaking the page's
  // address, and the explorer allowed only its own files (no inline code, no
  // framing by another site).
  server.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                              {"Referrer-Policy", "no-referrer"},
                              {"Content-Security-Policy",
                               "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'"}});
  server.set_pre_routing_handler([&access](const httplib::Request& req, httplib::Response& res) {
    std::optional<Refusal> refused = check_host(req.get_header_value("Host"), access);
    if (!refused)
      refused = check_origin(req.has_header("Origin"), req.get_header_value("Origin"), req.get_header_value("Host"),
                             access);
    if (!refused && needs_key(req.path)) {
      refused = check_api_key(req.get_header_value("Authorization"), access);
      if (refused) res.set_header("WWW-Authenticate", "Bearer");
    }
    if (!refused) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, refused->status, refused->message);
    return httplib::Server::HandlerResponse::Handled;
  });
}

// Everything no route answers: 405 on a known path with another method, 404
// elsewhere, httplib's own errors in our JSON shape; and every answer counted.
void answer_the_rest(httplib::Server& server, Metrics& metrics) {
  const auto fallback = [](const httplib::Request& req, httplib::Response& res) {
    const auto it = route_methods().find(req.path);
    if (it == route_methods().end()) return send_error(res, 404, "no such path: " + req.path);
    res.set_header("Allow", it->second);
    send_error(res, 405, req.method + " " + req.path + ": method not allowed (allowed: " + it->second + ")");
  };
  server.Get(".*", fallback);
  server.Post(".*", fallback);
  server.Put(".*", fallback);
  server.Patch(".*", fallback);
  server.Delete(".*", fallback);
  server.Options(".*", fallback);
  // Errors httplib answers itself (413 for a body over the limit, 400 for a
  // malformed request line) get the same JSON shape as ours.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "malformed HTTP request (status " + std::to_string(res.status) + ")";
    if (res.status == 413)
      message = "body: larger than the limit (--max-body-bytes)";
    else if (req.method == "POST" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
      message = "body: a POST needs a Content-Length (or chunked encoding) and a JSON body";
    send_error(res, res.status, message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_logger([&metrics](const httplib::Request& req, const httplib::Response& res) {
    metrics.request(route_label(req.path), res.status);
  });
}

}  // namespace

// One function for the server's whole lifetime (about 130 lines): its routes
// capture the batcher, the draining flag and the listening socket, which
// live here; the parts that need none of them are guard() and
// answer_the_rest().
int run_server(TranslationService& service, Metrics& metrics, const ServerOptions& options) {
  Batcher batcher(
      options.batching, [&](const std::vector<const Job*>& jobs) { return service.run_batch(jobs); },
      [&] { return service.make_stream(); });
  httplib::Server server;
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> failures{0};  // numbers the 500s, so that a log line can be found
  guard(server, options.access);
  server.new_task_queue = [threads = options.connection_threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  server.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  // Headers and body leave in separate writes: with Nagle's algorithm the
  // body would wait for the client's delayed ACK (40 ms on Linux).
  server.set_tcp_nodelay(true);
  server.set_keep_alive_timeout(5);
  server.set_read_timeout(10);

  server.Post(kTranslatePath, [&](const httplib::Request& req, httplib::Response& res) {
    const auto start = Clock::now();
    try {
      if (draining) {
        res.set_header("Retry-After", "1");
        throw RequestError(503, "the service is shutting down");
      }
      if (const auto refused = check_json_body(req.get_header_value("Content-Type"), kTranslatePath))
        throw RequestError(refused->status, refused->message);
      const TranslateRequest request = parse_translate_request(req.body, options.limits);
      Job job = service.make_job(request);
      const std::vector<size_t> cut = job.cut;
      std::future<JobResult> done = batcher.submit(std::move(job));
      if (!done.valid()) {
        res.set_header("Retry-After", "1");
        if (draining) throw RequestError(503, "the service is shutting down");
        throw RequestError(503, "the queue is full (" + std::to_string(options.batching.max_queue) +
                                    " sentences waiting); retry later");
      }
      const JobResult result = done.get();
      res.set_content(translate_answer(result.sentences, request.attention, cut), kJson);
      // Where the time went (W3C Server-Timing): waiting for a batch, and the
      // batch's translation; the rest of a client's latency is HTTP.
      res.set_header("Server-Timing", "queue;dur=" + std::to_string(1000 * result.queue_seconds) +
                                          ", translate;dur=" + std::to_string(1000 * result.batch_seconds));
      metrics.latency(std::chrono::duration<double>(Clock::now() - start).count());
    } catch (const RequestError& e) {
      send_error(res, e.status(), e.what());
    } catch (const std::exception& e) {
      // The detail goes to the log only: it can name files and internals.
      const uint64_t id = ++failures;
      spdlog::error("translate: request {} failed: {}", id, e.what());
      send_error(res, 500, "translation failed (request " + std::to_string(id) + "; the service's log has the detail)");
    }
  });
  server.Get("/v1/info", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(service.info_json(), kJson);
  });
  server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
    if (draining) {
      res.status = 503;
      res.set_content("{\"status\":\"stopping\"}", kJson);
    } else {
      res.set_content("{\"status\":\"ok\"}", kJson);
    }
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(batcher.queued()), "text/plain; version=0.0.4; charset=utf-8");
  });
  for (const WebAsset& a : web_assets())
    server.Get(a.path, [&a](const httplib::Request&, httplib::Response& res) {
      res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.content_type.c_str());
      res.set_header("Cache-Control", "no-cache");
    });
  answer_the_rest(server, metrics);

  // httplib's default also sets SO_REUSEPORT, which lets a second server bind
  // the same port and silently take half the connections: address reuse
  // (restarting while old connections linger) only.
  socket_t listening = INVALID_SOCKET;
  server.set_socket_options([&listening](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
    listening = sock;  // the last one tried is the one bound
  });
  const int port = options.port == 0 ? server.bind_to_any_port(options.host)
                                     : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0)
    throw InputError("serve: cannot listen on " + options.host + ":" + std::to_string(options.port) +
                     " (address in use, or not an address of this machine)");
  // Debian's libcpp-httplib is built with a listen backlog of 5: when more
  // clients than that connect at once (128 at the start of a load test),
  // the kernel drops their handshakes and some requests fail after the
  // 1-second SYN retry. A second listen() on the socket raises the backlog.
  if (listening != INVALID_SOCKET) ::listen(listening, SOMAXCONN);
  // httplib closes a kept-alive connection after 5 requests by default, so
  // busy clients reconnect every fifth request; nginx's default is 1000.
  server.set_keep_alive_max_count(1000);
  spdlog::info("batching: {} worker(s), {}, at most {} source tokens a batch, {} ms delay, {} sentences queued",
               options.batching.workers,
               options.batching.continuous ? "greedy requests continuously (beam ones in whole batches)"
                                           : "whole batches",
               options.batching.max_batch_tokens, options.batching.max_delay_ms, options.batching.max_queue);
  spdlog::info("listening on http://{}:{} (POST {}, GET /healthz, /metrics, / for the attention explorer)",
               options.host, port, kTranslatePath);
  if (reachable_beyond_loopback(options.host) && options.access.api_keys.empty())
    spdlog::warn("serve: listening on {}, which other machines can reach, and no --api-key-file: anyone who can "
                 "connect may translate (put TLS and a key in front: README, \"The service on a network\")",
                 options.host);
  if (!options.port_file.empty()) write_file_atomic(options.port_file, std::to_string(port) + "\n");

  // SIGINT/SIGTERM: refuse new work, close the listening socket; listen_after_bind
  // then returns once every connection thread has answered its request.
  install_interrupt_handlers("the requests already read");
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done && !interrupted()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done) return;
    spdlog::info("stopping: no new connections; {} sentences queued", batcher.queued());
    draining = true;
    server.stop();
  });
  const bool listened = server.listen_after_bind();
  done = true;
  watcher.join();
  batcher.stop();
  if (!listened && !draining) throw std::runtime_error("serve: the listening socket failed");
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace nmt::serve
