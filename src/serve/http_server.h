// `nmt serve`'s HTTP layer: connections multiplexed on epoll by GNU
// libmicrohttpd (its internal epoll threads; docs/serve.md, "Connections",
// says why this library), routes, error answers, deadlines, connection
// limits, compression, metrics and a graceful stop. The translation itself is
// TranslationService's, the batching policy the Batcher's; a request waiting
// for its batch is suspended, holding no thread, and resumed by the batch.
#pragma once

#include <cstdint>
#include <string>

#include "serve/access.h"
#include "serve/batcher.h"
#include "serve/request.h"

namespace nmt::serve {

class TranslationService;
class Metrics;

struct ConnectionLimits {
  int64_t max_connections = 16384;   // open at once in all; 503 (Retry-After) beyond
  int64_t max_per_client = 256;      // open at once from one client address; 503 beyond
  int64_t header_seconds = 10;       // a request's headers complete this long after the connection
                                     // opened or its previous answer went out, else closed
  int64_t body_seconds = 30;         // its body complete this long after its headers, else closed
  int64_t idle_seconds = 5;          // a connection with nothing sent or received this long is closed
  int64_t http_threads = 2;          // epoll threads moving bytes (no model work)
  int64_t compress_min_bytes = 16384;  // answers at least this large go gzip'ed to clients that accept it
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (printed, and written to port_file)
  std::string port_file;             // if set: the bound port is written here once listening
  int64_t max_body_bytes = 1 << 20;  // 413 beyond
  ConnectionLimits connections;
  BatchPolicy batching;
  RequestLimits limits;
  AccessPolicy access;  // who may call (serve/access.h)
};

// Serves until SIGINT or SIGTERM, then stops accepting connections, answers
// every request already read (queued work is finished) and returns 0.
// Throws InputError when it cannot listen on host:port.
int run_server(TranslationService& service, Metrics& metrics, const ServerOptions& options);

}  // namespace nmt::serve
