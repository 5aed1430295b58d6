#!/usr/bin/env python3
"""A client of a gateway: asks MODEL a question RATE times a second until
STOPFILE exists, each request on a connection of its own, and writes
"ok=N failed=M" and each failure to OUT. A request fails unless it answers
200 with the right number and names the model asked for."""
import http.client
import json
import os
import sys
import threading
import time

host, port, model, rate, stopfile, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5], sys.argv[6]
lock = threading.Lock()
ok, failures = 0, []


def ask(n):
    global ok
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "What is 127*89?"}]})
    try:
        conn = http.client.HTTPConnection(host, port, timeout=20)
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        conn.close()
        reply = json.loads(text) if r.status == 200 else None
        if reply and reply.get("model") == model and "11303" in reply["choices"][0]["message"]["content"]:
            with lock:
                ok += 1
            return
        why = f"HTTP {r.status}: {text[:200]}"
    except Exception as e:  # a refused or cut connection is a failed request
        why = repr(e)
    with lock:
        failures.append(f"request {n} at {time.strftime('%T')}: {why}")


threads, n = [], 0
while not os.path.exists(stopfile):
    t = threading.Thread(target=ask, args=(n,))
    t.start()
    threads.append(t)
    n += 1
    time.sleep(1 / rate)
for t in threads:
    t.join()
with open(out, "w") as f:
    f.write(f"ok={ok} failed={len(failures)}\n")
    for line in failures:
        f.write(line + "\n")
