# SPDX-License-Identifier: GPL-2.0
"""An OTLP/HTTP receiver that misbehaves on cue, for tests/otlp_push_test.sh.

Answers its first requests as SCRIPT says, one word each, then 200 to all:
  503     Service Unavailable
  429:S   Too Many Requests with Retry-After: S
  400     Bad Request
  hang    reads the request, never answers (the client's timeout ends it)
  reset   reads the head, then closes with a TCP reset
Each request it reads is logged to LOG as "TIME_S WORD PATH CONTENT_TYPE BYTES",
and its body saved as OUT_DIR/N.pb (N from 0, in the order they came).
Usage: receiver.py PORT LOG OUT_DIR SCRIPT...
"""
import socket
import struct
import sys
import threading
import time

port, log_path, out_dir, script = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
log = open(log_path, "a", buffering=1)
hung = []  # connections kept open, unanswered


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    length = int(headers.get("content-length", "0"))
    return lines[0], headers, body, length


def read_body(conn, body, length):
    while len(body) < length:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        body += chunk
    return body


def answer(conn, status, extra=""):
    reason = {200: "OK", 400: "Bad Request", 429: "Too Many Requests",
              503: "Service Unavailable"}[status]
    conn.sendall(f"HTTP/1.1 {status} {reason}\r\n{extra}Content-Length: 0\r\n"
                 "Connection: close\r\n\r\n".encode())


def serve(conn, n, word):
    req = read_request(conn)
    if req is None:
        conn.close()
        return
    line, headers, body, length = req
    if word != "reset":
        body = read_body(conn, body, length)
        open(f"{out_dir}/{n}.pb", "wb").write(body)
    log.write(f"{time.monotonic():.3f} {word} {line.split()[1]} "
              f"{headers.get('content-type', '-')} {length}\n")
    if word == "reset":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        return
    if word == "hang":
        hung.append(conn)
        return
    if word.startswith("429"):
        answer(conn, 429, f"Retry-After: {word.split(':')[1]}\r\n")
    elif word in ("503", "400"):
        answer(conn, int(word))
    else:
        answer(conn, 200)
    conn.close()


srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(16)
n = 0
while True:
    conn, _ = srv.accept()
    word = script[n] if n < len(script) else "200"
    threading.Thread(target=serve, args=(conn, n, word), daemon=True).start()
    n += 1
