// `nmt serve`'s HTTP layer (cpp-httplib): routes, error answers, metrics and
// a graceful stop. The translation itself is TranslationService's, the
// batching policy the Batcher's; this file only moves bytes between them.
#pragma once

#include <cstdint>
#include <string>

#include "serve/access.h"
#include "serve/batcher.h"
#include "serve/request.h"

namespace nmt::serve {

class TranslationService;
class Metrics;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (printed, and written to port_file)
  std::string port_file;             // if set: the bound port is written here once listening
  int64_t max_body_bytes = 1 << 20;  // 413 beyond
  int64_t connection_threads = 256;  // connections served at once (each waits for its batch)
  BatchPolicy batching;
  RequestLimits limits;
  AccessPolicy access;  // who may call (serve/access.h)
};

// Serves until SIGINT or SIGTERM, then stops accepting connections, answers
// every request already read (queued work is finished) and returns 0.
// Throws InputError when it cannot listen on host:port.
int run_server(TranslationService& service, Metrics& metrics, const ServerOptions& options);

}  // namespace nmt::serve
