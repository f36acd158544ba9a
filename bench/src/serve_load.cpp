// serve_load: a bounded, closed-loop load generator for `nmt serve` on loopback.
//
// C clients, one thread and one keep-alive connection each, send one sentence
// per request (cycling through LINES, each client starting at its own offset)
// and wait for the answer before sending the next, until N requests have been
// answered in total. Prints one JSON object: sentences/s, latency percentiles
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
// Usage: serve_load --port P --lines FILE --concurrency C --requests N [--expect FILE]
//   --expect: the offline translations, line for line; answers that differ count as failures.
#include <httplib.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int port = 0;
  std::string lines;
  std::string expect;
  int concurrency = 0;
  long requests = 0;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "serve_load: %s\n", what.c_str());
  std::fprintf(stderr,
               "usage: serve_load --port P --lines FILE --concurrency C --requests N [--expect FILE]\n");
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
  std::mutex mutex;
  std::vector<double> latencies_s;  // answered with 200 (and equal to --expect when given)
  std::vector<double> translate_ms;
  std::map<std::string, long> statuses;
  std::vector<std::string> failures;
};

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const std::vector<std::string> lines = read_lines(args.lines);
  const std::vector<std::string> expect = args.expect.empty() ? std::vector<std::string>{} : read_lines(args.expect);
  if (!expect.empty() && expect.size() < lines.size()) usage_error(args.expect + ": fewer lines than --lines");

  std::atomic<long> issued{0};
  Results results;
  const auto start = Clock::now();
  auto client = [&](int k) {
    httplib::Client http("127.0.0.1", args.port);
    http.set_keep_alive(true);
    http.set_read_timeout(120, 0);
    http.set_tcp_nodelay(true);
    for (long n; (n = issued.fetch_add(1)) < args.requests;) {
      const size_t i = static_cast<size_t>((static_cast<long>(k) * 997 + n) % static_cast<long>(lines.size()));
      const std::string body = nlohmann::json{{"text", {lines[i]}}}.dump();
      const auto t0 = Clock::now();
      auto response = http.Post("/v1/translate", body, "application/json");
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      std::string status;
      std::string failure;
      double translate = std::nan("");
      if (!response) {
        status = httplib::to_string(response.error());
        // When it failed, and after how long: a connection refused at once
        // and a reply cut off mid-wait are different faults.
        char when[96];
        std::snprintf(when, sizeof when, " after %.0f ms, %.2f s into the run", dt * 1000.0,
                      std::chrono::duration<double>(t0 - start).count());
        failure = "line " + std::to_string(i + 1) + ": " + status + when;
      } else {
        status = std::to_string(response->status);
        translate = server_translate_ms(response->get_header_value("Server-Timing"));
        if (response->status != 200) {
          failure = "line " + std::to_string(i + 1) + ": " + status;
        } else if (!expect.empty()) {
          const auto answer = nlohmann::json::parse(response->body, nullptr, false);
          const bool same = !answer.is_discarded() && answer.contains("translations") &&
                            answer["translations"].is_array() && !answer["translations"].empty() &&
                            answer["translations"][0] == expect[i];
          if (!same) failure = "line " + std::to_string(i + 1) + ": answer differs from the offline translation";
        }
      }
      std::lock_guard<std::mutex> lock(results.mutex);
      ++results.statuses[status];
      if (!std::isnan(translate)) results.translate_ms.push_back(translate);
      if (failure.empty()) results.latencies_s.push_back(dt);
      else results.failures.push_back(failure);
    }
  };

  std::vector<std::thread> threads;
  for (int k = 0; k < args.concurrency; ++k) threads.emplace_back(client, k);
  for (auto& t : threads) t.join();
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
