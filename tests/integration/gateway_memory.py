#!/usr/bin/env python3
"""Holds N connections to a gateway, each a chat request of SIZE bytes
whose body is sent but for its last byte (HAProxy holds what came, waiting
for the rest before it can read the model), then prints the summed RSS of
the PIDs given, before and while held, in KiB, and closes them.
SIZE 0: connections that sent nothing (idle clients).
usage: gateway_memory.py HOST PORT N SIZE KEY PID..."""
import socket
import sys
import time


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def main():
    host, port, n, size, key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    pids = sys.argv[6:]
    before = rss_kib(pids)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\nAuthorization: Bearer {key}\r\n\r\n").encode()
    chunk = b"x" * 65536
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port))
        if size > 0:
            s.sendall(head)
            left = size - 1
            while left > 0:
                k = min(left, len(chunk))
                s.sendall(chunk[:k])
                left -= k
        socks.append(s)
    time.sleep(2)
    held = rss_kib(pids)
    print(f"connections={n} request_bytes={size} rss_before_kib={before} rss_held_kib={held}")
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
