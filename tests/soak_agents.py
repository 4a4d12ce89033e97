# SPDX-License-Identifier: GPL-2.0
# The processes of tests/soak_test.sh, one per mode, each writing its figures
# as "key value" lines to OUT when it ends (SIGTERM ends notify and checker).
#   soak_agents.py notify SOCKET OUT          sd_notify's listener: watchdog gaps
#   soak_agents.py checker URL CTL PID OUT    /metrics and stat every 0.5 s, RSS, fds
#   soak_agents.py slow HOST:PORT CTL N M SECONDS   N TCP and M control clients trickling
#   soak_agents.py badname SECONDS            a process named b"\xff-x" allocating
import ctypes
import os
import select
import signal
import socket
import sys
import time

stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def write(out, figures):
    with open(out, "w") as f:
        for k, v in figures.items():
            f.write(f"{k} {v}\n")


def notify(path, out):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    pings, ready, max_gap, last = 0, 0, 0.0, None
    while not stop:
        try:
            msg = s.recv(4096).decode("utf-8", "replace")
        except (socket.timeout, InterruptedError):
            continue
        now = time.monotonic()
        if "READY=1" in msg.split("\n"):
            ready += 1
        if "WATCHDOG=1" in msg.split("\n"):
            pings += 1
            if last is not None:
                max_gap = max(max_gap, now - last)
            last = now
    # The time since the last ping counts too: a loop stalled at the end.
    if last is not None:
        max_gap = max(max_gap, time.monotonic() - last)
    write(out, {"watchdog_pings": pings, "ready": ready, "max_watchdog_gap_s": f"{max_gap:.2f}"})


def http_get(hostport, path, timeout):
    host, port = hostport.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as c:
        c.settimeout(timeout)
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    return data


def ctl(path, line, timeout):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(timeout)
        c.connect(path)
        c.sendall(line.encode() + b"\n")
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    return data


def proc_figures(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def checker(hostport, ctl_path, pid, out):
    """A well-behaved client: one /metrics and one stat every 0.5 s, each
    timed from connect to the end of its reply (a failure counts as slow)."""
    fig = {"metrics_n": 0, "metrics_bad": 0, "metrics_max_s": 0.0, "stat_n": 0, "stat_bad": 0,
           "stat_max_s": 0.0, "peak_rss_kb": 0, "peak_fds": 0}
    samples = []  # (time, events_total) from /metrics
    errors = set()
    first_rss = None
    while not stop:
        t0 = time.monotonic()
        try:
            body = http_get(hostport, "/metrics", 5)
            ok = body.startswith(b"HTTP/1.1 200")
            if not ok:
                errors.add("metrics: " + body[:40].decode("ascii", "replace").strip())
            for line in body.split(b"\n"):
                if line.startswith(b"stackmapd_events_total "):
                    samples.append((t0, float(line.split()[1])))
        except OSError as e:
            ok = False
            errors.add(f"metrics: {e}")
        dt = time.monotonic() - t0
        fig["metrics_n"] += 1
        fig["metrics_bad"] += not ok or dt >= 1.0
        fig["metrics_max_s"] = max(fig["metrics_max_s"], dt if ok else 99.0)
        t1 = time.monotonic()
        try:
            reply = ctl(ctl_path, "stat", 5)
            ok = reply.startswith(b"ok\nentries:")
            if not ok:
                errors.add("stat: " + reply[:40].decode("ascii", "replace").strip())
        except OSError as e:
            ok = False
            errors.add(f"stat: {e}")
        dt = time.monotonic() - t1
        fig["stat_n"] += 1
        fig["stat_bad"] += not ok or dt >= 1.0
        fig["stat_max_s"] = max(fig["stat_max_s"], dt if ok else 99.0)
        try:
            rss, fds = proc_figures(pid)
        except OSError:
            break
        first_rss = first_rss or rss
        fig["peak_rss_kb"] = max(fig["peak_rss_kb"], rss)
        fig["peak_fds"] = max(fig["peak_fds"], fds)
        fig["last_rss_kb"] = rss
        time.sleep(max(0.0, 0.5 - (time.monotonic() - t0)))
    fig["first_rss_kb"] = first_rss or 0
    # Events keep counting: every 5 s window of the run saw the total grow.
    stalls, rate = 0, 0.0
    for i, (t, n) in enumerate(samples):
        later = [m for u, m in samples[i:] if u >= t + 5.0]
        if later and later[0] <= n:
            stalls += 1
    if len(samples) > 1 and samples[-1][0] > samples[0][0]:
        rate = (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])
    fig["event_windows_stalled"] = stalls
    fig["events_per_s"] = f"{rate:.0f}"
    fig["errors"] = "|".join(sorted(errors)).replace(" ", "_").replace("\n", "_") or "none"
    fig["metrics_max_s"] = f"{fig['metrics_max_s']:.3f}"
    fig["stat_max_s"] = f"{fig['stat_max_s']:.3f}"
    write(out, fig)


def slow(hostport, ctl_path, n_tcp, n_ctl, seconds):
    """Slowloris: each client sends a request's first byte, then one more a
    second, never ending its head; a client the daemon drops reconnects."""
    host, port = hostport.rsplit(":", 1)
    head = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 4096
    line = b"stat" + b"x" * 4096

    def connect(kind):
        try:
            if kind == "tcp":
                c = socket.create_connection((host, int(port)), timeout=2)
            else:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(2)
                c.connect(ctl_path)
            c.setblocking(False)
            return [c, kind, 0]
        except OSError:
            return None

    clients = [connect("tcp") for _ in range(n_tcp)] + [connect("ctl") for _ in range(n_ctl)]
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop:
        for i, cl in enumerate(clients):
            if cl is None:
                clients[i] = connect("tcp" if i < n_tcp else "ctl")
                continue
            c, kind, at = cl
            data = head if kind == "tcp" else line
            try:
                # Whatever the daemon sends (a 408, an error line) is read and
                # dropped; a closed socket is replaced next turn.
                if select.select([c], [], [], 0)[0] and not c.recv(4096):
                    raise OSError
                c.send(data[at % len(data):at % len(data) + 1])
                cl[2] = at + 1
            except OSError:
                c.close()
                clients[i] = None
        time.sleep(1.0)
    for cl in clients:
        if cl:
            cl[0].close()


def badname(seconds):
    """PR_SET_NAME to bytes that are not UTF-8, then kernel allocations
    under that name."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(15, ctypes.c_char_p(b"\xff-x"), 0, 0, 0) != 0:  # PR_SET_NAME
        sys.exit("prctl failed")
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop:
        for _ in range(200):
            os.close(os.open("/dev/null", os.O_RDONLY))
        time.sleep(0.01)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "notify":
        notify(*args)
    elif mode == "checker":
        checker(args[0], args[1], int(args[2]), args[3])
    elif mode == "slow":
        slow(args[0], args[1], int(args[2]), int(args[3]), float(args[4]))
    elif mode == "badname":
        badname(float(args[0]))
    else:
        sys.exit(f"unknown mode {mode}")
