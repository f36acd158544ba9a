#!/usr/bin/env python3
"""Clients that hold `nmt serve`'s connections, for bench/bench_serve.sh:
IDLE connections that send nothing and SLOW ones that send their request
headers one byte a second, from other loopback addresses than the measured
clients (at most 250 a source address, 127.2.x.y and 127.3.x.y). Whatever the
server closes is opened again at once, as a determined client would, so the
load stays. Runs until SIGTERM or SIGINT, then prints one JSON object: the
connections asked for and how many the server closed (how many it holds at
a time, the caller counts with ss).

Usage: serve_hold.py PORT IDLE SLOW
"""
import json
import resource
import selectors
import signal
import socket
import sys
import time

port, idle_n, slow_n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
header = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: " + b"s" * 4000 + b"\r\n\r\n"
sel = selectors.DefaultSelector()
conns = {}  # (kind, index) -> [socket, bytes sent]
closed_by_server = 0
stop = False


def on_signal(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)


def source(kind, i):
    return f"127.{2 if kind == 'idle' else 3}.{i // 250}.{1 + i % 250}"


def open_one(key):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.bind((source(*key), 0))
    s.connect_ex(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_READ, key)
    conns[key] = [s, 0]


def reopen(key):
    s = conns[key][0]
    sel.unregister(s)
    s.close()
    open_one(key)


start = time.time()
for i in range(idle_n):
    open_one(("idle", i))
for i in range(slow_n):
    open_one(("slow", i))
next_tick = time.time() + 1
while not stop:
    for key, _ in sel.select(timeout=max(0.0, next_tick - time.time())):
        s = conns[key.data][0]
        try:
            gone = s.recv(65536) == b""
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if gone:
            closed_by_server += 1
            reopen(key.data)
    if time.time() >= next_tick:
        next_tick += 1
        for i in range(slow_n):  # a byte a second
            c = conns[("slow", i)]
            try:
                c[0].send(header[c[1]:c[1] + 1])
                c[1] = (c[1] + 1) % len(header)
            except (BlockingIOError, OSError):
                pass
print(json.dumps({"idle": idle_n, "slow": slow_n, "closed_by_server": closed_by_server,
                  "seconds": round(time.time() - start, 1)}))
