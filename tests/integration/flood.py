"""Clients of fleet watch's metrics port for watch_flood_test.sh.

  flood.py hold PORT N SECONDS  opens N connections (non-blocking: those
                                the listener has not accepted wait in its
                                kernel queue) and holds them, then closes all
  flood.py slow PORT N SECONDS  N clients that trickle a request line a byte
                                a second (slowloris), for SECONDS
Standard library only."""
import resource
import socket
import sys
import time


def raise_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))


def hold(port, n, seconds):
    raise_limit(n)
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
    print("holding", len(socks), flush=True)
    time.sleep(seconds)
    for s in socks:
        s.close()


def slow(port, n, seconds):
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    request = b"GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Pad: " + b"a" * 4000
    end = time.time() + seconds
    i = 0
    print("trickling", len(socks), flush=True)
    while time.time() < end and i < len(request):
        for s in socks:
            try:
                s.send(request[i:i + 1])
            except OSError:
                pass
        i += 1
        time.sleep(1)
    for s in socks:
        s.close()


if __name__ == "__main__":
    mode, port, n, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    {"hold": hold, "slow": slow}[mode](port, n, seconds)
