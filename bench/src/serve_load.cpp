// serve_load: a bounded, closed-loop load generator for `nmt serve` on loopback.
//
// C clients, one keep-alive connection each, send one sentence per request
// (cycling through LINES, each client starting at its own offset) and wait for
// the answer before sending the next, until N requests have been answered in
// total. One thread serves every client on epoll, as wrk does: answers that
// arrive together wake the client once, not one thread each (with a thread
// per client, every answer woke a thread that preempted the server on a
// small machine). Prints one JSON object: sentences/s, latency percentiles
// (ms), the percentiles of the server's own translation time of each request's
// batch (its Server-Timing header), status counts, failures, and the CPU time
// this program itself used.
//
// Why C++ and not a script: on a small machine the load generator shares the
// cores with the server it measures. A Python client spends a sizeable share
// of a core per few hundred requests/s (JSON, http.client, the GIL), which the
// server then lacks; this one costs a few percent of that (the "client_cpu_s"
// field says how much).
//
// Usage: serve_load --port P --lines FILE --concurrency C --requests N [--expect FILE] [--beam K]
//   --beam: every request asks for beam K ("beam": K; 1 is greedy); default: the service's own.
//   --expect: the offline translations, line for line; answers that differ count as failures.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int port = 0;
  std::string lines;
  std::string expect;
  int concurrency = 0;
  long requests = 0;
  long beam = 0;  // 0: not sent (the service's default)
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "serve_load: %s\n", what.c_str());
  std::fprintf(stderr,
               "usage: serve_load --port P --lines FILE --concurrency C --requests N [--expect FILE] [--beam K]\n");
  std::exit(2);
}

long positive(const std::string& flag, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1) usage_error(flag + ": '" + text + "' is not a positive integer");
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage_error(flag + ": needs a value");
    const char* value = argv[++i];
    if (flag == "--port") a.port = static_cast<int>(positive(flag, value));
    else if (flag == "--lines") a.lines = value;
    else if (flag == "--expect") a.expect = value;
    else if (flag == "--concurrency") a.concurrency = static_cast<int>(positive(flag, value));
    else if (flag == "--requests") a.requests = positive(flag, value);
    else if (flag == "--beam") a.beam = positive(flag, value);
    else usage_error("unknown option " + flag);
  }
  if (a.port == 0 || a.lines.empty() || a.concurrency == 0 || a.requests == 0)
    usage_error("--port, --lines, --concurrency and --requests are required");
  return a;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) usage_error(path + ": cannot open");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.empty()) usage_error(path + ": no lines");
  return lines;
}

// Nearest-rank percentile of sorted values, as serve_load.py computed it.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return std::nan("");
  const double k = std::round(p / 100.0 * static_cast<double>(sorted.size() - 1));
  return sorted[static_cast<size_t>(std::clamp(k, 0.0, static_cast<double>(sorted.size() - 1)))];
}

double round1(double v) { return std::round(v * 10.0) / 10.0; }

// "translate;dur=12.3, queue;dur=0.4" -> 12.3 (or NaN when absent).
double server_translate_ms(const std::string& header) {
  size_t at = 0;
  while (at < header.size()) {
    size_t end = header.find(',', at);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(at, end - at);
    part.erase(0, part.find_first_not_of(' '));
    const std::string key = "translate;dur=";
    if (part.compare(0, key.size(), key) == 0) return std::atof(part.c_str() + key.size());
    at = end + 1;
  }
  return std::nan("");
}

struct Results {
  std::vector<double> latencies_s;  // answered with 200 (and equal to --expect when given)
  std::vector<double> translate_ms;
  std::map<std::string, long> statuses;
  std::vector<std::string> failures;
};

// One client: a keep-alive connection and the request it waits on.
struct Client {
  int fd = -1;
  bool connected = false;
  const std::string* out = nullptr;  // the request's bytes
  size_t sent = 0;                   // of *out
  std::string in;      // the answer's bytes so far
  size_t line = 0;     // the line it asked for
  Clock::time_point t0;
  bool waiting = false;  // a request is in flight
};

// The parts of an HTTP/1.1 answer this program reads.
struct Answer {
  int status = 0;
  size_t length = 0;  // header and body bytes
  std::string body;
  std::string server_timing;
  bool close = false;  // Connection: close
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A complete answer at the start of `in`: true and `a` filled; false while
// more bytes are needed; throws on an answer it cannot read.
bool parse_answer(const std::string& in, Answer& a) {
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  const std::string head = in.substr(0, head_end);
  if (head.compare(0, 9, "HTTP/1.1 ") != 0 || head.size() < 12) throw std::runtime_error("not an HTTP/1.1 answer");
  a.status = std::atoi(head.c_str() + 9);
  bool has_length = false;
  size_t body_length = 0;
  for (size_t at = head.find("\r\n"); at != std::string::npos;) {
    const size_t next = head.find("\r\n", at + 2);
    const std::string field = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
    at = next;
    const size_t colon = field.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = lower(field.substr(0, colon));
    std::string value = field.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (name == "content-length") has_length = true, body_length = std::strtoul(value.c_str(), nullptr, 10);
    else if (name == "server-timing") a.server_timing = value;
    else if (name == "connection") a.close = lower(value) == "close";
    else if (name == "transfer-encoding") throw std::runtime_error("chunked answer (serve_load reads Content-Length)");
  }
  if (!has_length) throw std::runtime_error("answer without Content-Length");
  if (in.size() < head_end + 4 + body_length) return false;
  a.body = in.substr(head_end + 4, body_length);
  a.length = head_end + 4 + body_length;
  return true;
}

// A non-blocking TCP connection to 127.0.0.1:port under way (-1 on failure).
int open_connection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const std::vector<std::string> lines = read_lines(args.lines);
  const std::vector<std::string> expect = args.expect.empty() ? std::vector<std::string>{} : read_lines(args.expect);
  if (!expect.empty() && expect.size() < lines.size()) usage_error(args.expect + ": fewer lines than --lines");

  Results results;
  const int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) usage_error("epoll_create1 failed");
  std::vector<Client> clients(static_cast<size_t>(args.concurrency));
  long issued = 0, finished = 0;
  const auto start = Clock::now();

  const auto record = [&](Client& c, const std::string& status, const std::string& failure, double translate) {
    const double dt = std::chrono::duration<double>(Clock::now() - c.t0).count();
    ++results.statuses[status];
    if (!std::isnan(translate)) results.translate_ms.push_back(translate);
    if (failure.empty()) {
      results.latencies_s.push_back(dt);
    } else {
      // When it failed, and after how long: a connection refused at once and
      // a reply cut off mid-wait are different faults.
      char when[96];
      std::snprintf(when, sizeof when, " after %.0f ms, %.2f s into the run", dt * 1000.0,
                    std::chrono::duration<double>(c.t0 - start).count());
      results.failures.push_back("line " + std::to_string(c.line + 1) + ": " + failure + when);
    }
    c.waiting = false;
    ++finished;
  };
  const auto drop = [&](Client& c) {
    if (c.fd >= 0) close(c.fd);  // also leaves the epoll set
    c.fd = -1, c.connected = false, c.in.clear();
  };
  // Every line's request, made once (the generator shares the server's cores).
  std::vector<std::string> requests;
  for (const std::string& line : lines) {
    nlohmann::json request{{"text", {line}}};
    if (args.beam > 0) request["beam"] = args.beam;
    const std::string body = request.dump();
    requests.push_back("POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(args.port) +
                       "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body);
  }
  // Client k's next request, if any is left, on its connection (opened again
  // when it was closed).
  const auto send_next = [&](size_t k) {
    Client& c = clients[k];
    if (issued >= args.requests) return;
    const long n = issued++;
    c.line = static_cast<size_t>((static_cast<long>(k) * 997 + n) % static_cast<long>(lines.size()));
    c.out = &requests[c.line];
    c.sent = 0, c.waiting = true, c.t0 = Clock::now();
    if (c.fd < 0) {
      c.fd = open_connection(args.port);
      if (c.fd < 0) return record(c, "connect", "cannot open a socket", std::nan(""));
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;  // edge-triggered: reads drain the socket
      ev.data.u64 = k;
      epoll_ctl(epoll, EPOLL_CTL_ADD, c.fd, &ev);
      return;  // written once connected (EPOLLOUT)
    }
    const ssize_t w = send(c.fd, c.out->data(), c.out->size(), MSG_NOSIGNAL);
    if (w > 0) c.sent = static_cast<size_t>(w);
    // The rest, or an error, shows up as an event.
  };
  const auto fail = [&](size_t k, const std::string& status, const std::string& failure) {
    Client& c = clients[k];
    drop(c);
    if (c.waiting) record(c, status, failure, std::nan(""));
  };

  for (size_t k = 0; k < clients.size(); ++k) send_next(k);
  std::vector<epoll_event> events(clients.size());
  char buffer[65536];
  while (finished < issued || issued < args.requests) {
    // Requests whose connection could not even be opened finished at once:
    // give their clients the next one.
    for (size_t k = 0; k < clients.size(); ++k)
      if (!clients[k].waiting) send_next(k);
    const int ready = epoll_wait(epoll, events.data(), static_cast<int>(events.size()), 1000);
    for (int e = 0; e < ready; ++e) {
      const size_t k = events[static_cast<size_t>(e)].data.u64;
      const uint32_t what = events[static_cast<size_t>(e)].events;
      Client& c = clients[k];
      if (c.fd < 0) continue;
      if (!c.connected && (what & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int error = 0;
        socklen_t len = sizeof error;
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &len);
        if (error != 0) {
          fail(k, "connect", std::string("connect: ") + std::strerror(error));
          continue;
        }
        c.connected = true;
      }
      if (c.connected && c.waiting && c.sent < c.out->size() && (what & EPOLLOUT)) {
        const ssize_t w = send(c.fd, c.out->data() + c.sent, c.out->size() - c.sent, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN) {
          fail(k, "write", std::string("write: ") + std::strerror(errno));
          continue;
        }
        if (w > 0) c.sent += static_cast<size_t>(w);
      }
      if (!(what & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) continue;
      bool closed = false;
      for (;;) {
        const ssize_t r = recv(c.fd, buffer, sizeof buffer, 0);
        if (r > 0) c.in.append(buffer, static_cast<size_t>(r));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0 || (r < 0 && errno != EAGAIN)) closed = true;
        if (r <= 0) break;
      }
      Answer a;
      bool complete = false;
      try {
        complete = c.waiting && parse_answer(c.in, a);
      } catch (const std::exception& error) {
        fail(k, "read", error.what());
        continue;
      }
      if (!complete) {
        if (closed) fail(k, "read", "connection closed before the answer ended");
        continue;
      }
      c.in.erase(0, a.length);
      std::string failure;
      if (a.status != 200) {
        failure = std::to_string(a.status);
      } else if (!expect.empty()) {
        const auto answer = nlohmann::json::parse(a.body, nullptr, false);
        const bool same = !answer.is_discarded() && answer.contains("translations") &&
                          answer["translations"].is_array() && !answer["translations"].empty() &&
                          answer["translations"][0] == expect[c.line];
        if (!same) failure = "answer differs from the offline translation";
      }
      record(c, std::to_string(a.status), failure, server_translate_ms(a.server_timing));
      if (closed || a.close) drop(c);
      send_next(k);
    }
  }
  close(epoll);
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;

  std::sort(results.latencies_s.begin(), results.latencies_s.end());
  std::sort(results.translate_ms.begin(), results.translate_ms.end());
  const auto& lat = results.latencies_s;
  double mean = 0;
  for (double v : lat) mean += v;
  if (!lat.empty()) mean /= static_cast<double>(lat.size());
  // NaN is not JSON: a level where nothing succeeded prints null.
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(round1(v)); };
  nlohmann::json out = {
      {"concurrency", args.concurrency},
      {"requests", args.requests},
      {"seconds", std::round(wall * 1000.0) / 1000.0},
      {"sentences_per_s", std::round(static_cast<double>(lat.size()) / wall * 100.0) / 100.0},
      {"p50_ms", number(1000 * percentile(lat, 50))},
      {"p95_ms", number(1000 * percentile(lat, 95))},
      {"p99_ms", number(1000 * percentile(lat, 99))},
      {"mean_ms", lat.empty() ? nlohmann::json(nullptr) : number(1000 * mean)},
      {"translate_p50_ms", number(percentile(results.translate_ms, 50))},
      {"translate_p99_ms", number(percentile(results.translate_ms, 99))},
      {"statuses", results.statuses},
      {"failures", results.failures.size()},
      {"first_failures", std::vector<std::string>(results.failures.begin(),
                                                  results.failures.begin() +
                                                      std::min<size_t>(3, results.failures.size()))},
      {"client_cpu_s", std::round(cpu * 100.0) / 100.0},
  };
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
