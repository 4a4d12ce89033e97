# SPDX-License-Identifier: GPL-2.0
# Drives tests/overload_test.sh's attacks on a running daemon and prints one
# "name value" line per figure:
#   slowloris PORT CONTROL_SOCK SECONDS
#       32 TCP and 16 control clients trickle a request at ~1 byte/s (each
#       reconnects when dropped) while /metrics and "stat" are asked every
#       0.3 s: the slowest answer of each, and how many failed.
#   burst PORT CONTROL_SOCK NOTIFY_LOG PID
#       32 concurrent GET /stack_map.json (each retried after a 503's
#       Retry-After, as a client should) while /metrics and "stat" are asked
#       every 0.2 s: the slowest answer of each, the longest gap between
#       watchdog pings in NOTIFY_LOG, the burst's time, VmHWM after.
import json, socket, sys, threading, time, urllib.error, urllib.request

def metrics(port):
    t = time.time()
    try:
        ok = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).status == 200
    except OSError:
        ok = False
    return time.time() - t, ok

def stat(sock):
    t = time.time()
    data = b""
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(sock)
        s.sendall(b"stat\n")
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
    except OSError:
        pass
    return time.time() - t, data.startswith(b"ok\nentries:")

class Prober(threading.Thread):
    """Asks /metrics and stat every `period` until stopped."""
    def __init__(self, port, sock, period):
        super().__init__(daemon=True)
        self.port, self.sock, self.period = port, sock, period
        self.worst = {"metrics": 0.0, "stat": 0.0}
        self.failed = {"metrics": 0, "stat": 0}
        self.asked = 0
        self.stop = threading.Event()
    def run(self):
        while not self.stop.is_set():
            for name, fn, arg in (("metrics", metrics, self.port), ("stat", stat, self.sock)):
                took, ok = fn(arg)
                self.worst[name] = max(self.worst[name], took)
                self.failed[name] += 0 if ok else 1
            self.asked += 1
            self.stop.wait(self.period)
    def report(self):
        for name in ("metrics", "stat"):
            print("%s_worst_s %.3f" % (name, self.worst[name]))
            print("%s_failed %d" % (name, self.failed[name]))
        print("probes %d" % self.asked)

def trickler(connect, head, stop):
    """Sends `head` one byte a second, from a new connection whenever dropped."""
    while not stop.is_set():
        try:
            s = connect()
            for ch in head:
                if stop.wait(1.0):
                    break
                s.send(bytes([ch]))
        except OSError:
            stop.wait(0.05)

def slowloris(port, sock, seconds):
    stop = threading.Event()
    def tcp():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        return s
    def unix():
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        return s
    threads = [threading.Thread(target=trickler, args=(tcp, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", stop), daemon=True) for _ in range(32)]
    threads += [threading.Thread(target=trickler, args=(unix, b"stat stat stat stat\n", stop), daemon=True) for _ in range(16)]
    for t in threads:
        t.start()
    time.sleep(2)  # every slot taken
    p = Prober(port, sock, 0.3)
    p.start()
    time.sleep(seconds)
    p.stop.set()
    p.join()
    stop.set()
    p.report()

def burst(port, sock, notify_log, pid):
    p = Prober(port, sock, 0.2)
    p.start()
    bodies, codes = [], []
    retried = [0]
    lock = threading.Lock()
    def get():
        for _ in range(100):
            try:
                body = urllib.request.urlopen("http://127.0.0.1:%d/stack_map.json" % port, timeout=300).read()
                with lock:  # parsed after the burst: a parse here holds the probes' GIL
                    bodies.append(body)
                    codes.append(200)
                return
            except urllib.error.HTTPError as e:
                if e.code != 503 or not e.headers.get("Retry-After"):
                    with lock:
                        codes.append(e.code)
                    return
                with lock:
                    retried[0] += 1
                time.sleep(float(e.headers["Retry-After"]))
            except Exception as e:
                with lock:
                    codes.append(str(e)[:40])
                return
    t0 = time.time()
    getters = [threading.Thread(target=get) for _ in range(32)]
    for g in getters:
        g.start()
    for g in getters:
        g.join()
    t1 = time.time()
    time.sleep(1)
    p.stop.set()
    p.join()
    p.report()
    print("burst_s %.2f" % (t1 - t0))
    print("burst_ok %d" % codes.count(200))
    print("burst_errors %s" % ",".join(str(c) for c in codes if c != 200))
    print("retried_after_503 %d" % retried[0])
    print("stacks %d" % (len(json.loads(bodies[-1])["stacks"]) if bodies else 0))
    pings = [float(l.split()[0]) for l in open(notify_log) if "WATCHDOG=1" in l]
    inside = [x for x in pings if t0 - 2 <= x <= t1 + 1]
    gaps = [b - a for a, b in zip(inside, inside[1:])]
    print("watchdog_pings %d" % len(inside))
    print("watchdog_gap_s %.2f" % max(gaps + [t1 + 1 - (inside[-1] if inside else t0 - 2)]))
    for line in open("/proc/%s/status" % pid):
        if line.startswith("VmHWM:"):
            print("vmhwm_kb %s" % line.split()[1])

if __name__ == "__main__":
    if sys.argv[1] == "slowloris":
        slowloris(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    elif sys.argv[1] == "burst":
        burst(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    elif sys.argv[1] == "notify":  # notify SOCKET LOG: logs each datagram with its time
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(sys.argv[2])
        with open(sys.argv[3], "a", buffering=1) as log:
            while True:
                msg = s.recv(4096).decode(errors="replace").replace("\n", " ")
                log.write("%.3f %s\n" % (time.time(), msg))
