#!/usr/bin/env python3
"""Home Assistant REST API stand-in: one power switch per fleet-sim node.

Started by `fleet-sim start ... --power`; python3 standard library only.

  GET  /api/                         {"message": "API running."}
  GET  /api/states                   every switch
  GET  /api/states/switch.NAME       {"entity_id": "switch.NAME", "state": "on"|"off", ...}
  POST /api/services/switch/turn_on  {"entity_id": "switch.NAME"}  -> fleet-sim node-start
  POST /api/services/switch/turn_off {"entity_id": "switch.NAME"}  -> fleet-sim node-stop
  POST /api/services/switch/toggle   {"entity_id": "switch.NAME"}

"on" means the node's sshd runs. Every request needs `Authorization: Bearer
TOKEN` (TOKEN from DIR/ha_token), else 401; an unknown entity is 404. Service
calls answer, as HA does, the list of states that changed.
Test hooks: DIR/ha_fail_401 makes every request answer 401; DIR/ha_delay
(seconds, e.g. 2.5) delays every answer. Per switch, DIR/nodes/NAME/switch
holds how the relay misbehaves: `stuck` (service calls answer 200 and change
nothing; the state reads "on": the relay never opens, whatever the node's OS
does) or `unavailable` (the state reads "unavailable", as HA says of a device
it cannot reach; service calls answer 200 and change nothing) or `ignore_on`
(turn_on answers 200 and changes nothing; the state reads the truth, "off").
`fleet-sim switch DIR NAME stuck|unavailable|ignore_on|ok` writes it.
The node's own fault, DIR/nodes/NAME/boot-fault: `hang` (the relay closes and
the state reads "on", but the OS hangs in boot: sshd never starts, until the
power is cut by turn_off; a turn_on meanwhile changes nothing, the relay being
on already). `fleet-sim boot-fault DIR NAME hang|ok` writes it.
A boot takes time, as on the lab's boxes (minutes from power to SSH): with
DIR/nodes/NAME/boot-ms, turn_on closes the relay at once (the state reads
"on") and the node's sshd starts that many ms later. Every service call is
one line "switch.NAME turn_on|turn_off|toggle" in ha.log (tests count them).
Writes DIR/ha.port and DIR/ha.pid once it listens; logs to DIR/ha.log.
With --tls-cert and --tls-key it speaks https instead (a second instance
beside fleet-sim's own: it writes DIR/ha_tls.port and DIR/ha_tls.pid).
"""

import argparse
import datetime
import hmac
import json
import os
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 64 * 1024


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def read_kv(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, v = line.split("=", 1)
                out[k] = v
    return out


def write_atomic(path, text):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Fleet:
    """The simulated nodes behind the switches."""

    def __init__(self, sim_dir, sim_cmd):
        self.dir = sim_dir
        self.sim_cmd = sim_cmd
        env = read_kv(os.path.join(sim_dir, "sim.env"))
        self.names = env["names"].split()
        self.uids = {
            n: read_kv(os.path.join(sim_dir, "nodes", n, "node.env"))["uid"]
            for n in self.names
        }
        self.locks = {n: threading.Lock() for n in self.names}
        self.booting = {n: False for n in self.names}  # relay on, OS not up yet
        self.hung = {n: False for n in self.names}  # relay on, OS hung in boot (no sshd)
        started = now_iso()
        self.changed = {n: started for n in self.names}
        self.log_lock = threading.Lock()

    def entity(self, name):
        return f"switch.{name}"

    def name_of(self, entity_id):
        if isinstance(entity_id, str) and entity_id.startswith("switch."):
            name = entity_id[len("switch."):]
            if name in self.locks:
                return name
        return None

    def is_on(self, name):
        """Same test as `fleet-sim node-status`: the pid file names a live sshd of the node user."""
        try:
            with open(os.path.join(self.dir, "nodes", name, "sshd", "sshd.pid")) as f:
                pid = int(f.read().split()[0])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"sshd" not in f.read():
                    return False
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        return line.split()[1] == self.uids[name]
        except (OSError, ValueError, IndexError):
            return False
        return False

    def fault(self, name):
        """The relay's fault from DIR/nodes/NAME/switch: "stuck", "unavailable" or ""."""
        try:
            with open(os.path.join(self.dir, "nodes", name, "switch")) as f:
                fault = f.read().strip()
        except OSError:
            return ""
        return fault if fault in ("stuck", "unavailable", "ignore_on") else ""

    def state(self, name):
        fault = self.fault(name)
        if fault == "stuck":
            reads = "on"
        elif fault == "unavailable":
            reads = "unavailable"
        else:
            reads = "on" if self.booting[name] or self.hung[name] or self.is_on(name) else "off"
        return {
            "entity_id": self.entity(name),
            "state": reads,
            "attributes": {"friendly_name": name},
            "last_changed": self.changed[name],
            "last_updated": self.changed[name],
            "context": {"id": f"fleet-sim-{name}", "parent_id": None, "user_id": None},
        }

    def note_cut_while_halting(self, name):
        """A switch turned off while the node's OS still halts (its `systemctl
        poweroff` stand-in wrote root/sim/halt-until): a cut the real box would
        take mid-shutdown. Recorded in nodes/NAME/cuts-while-halting."""
        path = os.path.join(self.dir, "nodes", name, "root", "sim", "halt-until")
        try:
            with open(path) as f:
                until_ms = int(f.read().strip())
            os.unlink(path)
        except (OSError, ValueError):
            return
        early_ms = until_ms - int(time.time() * 1000)
        if early_ms > 0:
            line = f"{now_iso()} switched off {early_ms} ms before its halt ended\n"
            with open(os.path.join(self.dir, "nodes", name, "cuts-while-halting"), "a") as f:
                f.write(line)

    def switch(self, name, on):
        """Switch a node; returns (changed, error message or None)."""
        with self.locks[name]:
            fault = self.fault(name)
            if fault and (fault != "ignore_on" or on):
                self.log(f"switch.{name} is {fault}: turn_{'on' if on else 'off'} changes nothing")
                return False, None
            if self.booting[name]:
                return False, None  # the relay is on; the OS boots
            if self.hung[name]:
                if on:
                    return False, None  # the relay is on; the OS hangs
                self.hung[name] = False  # the power cut ends the hang
                self.changed[name] = now_iso()
                return True, None
            if not on:
                self.note_cut_while_halting(name)
            if self.is_on(name) == on:
                return False, None
            if on and self.boot_fault(name) == "hang" and self.boot_ms(name) == 0:
                self.hang(name)
                return True, None
            if on and self.boot_ms(name) > 0:
                self.booting[name] = True
                self.changed[name] = now_iso()
                threading.Thread(target=self.boot, args=(name,), daemon=True).start()
                return True, None
            verb = "node-start" if on else "node-stop"
            try:
                p = subprocess.run(
                    [self.sim_cmd, verb, self.dir, name],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            except subprocess.TimeoutExpired:
                return False, f"{verb} {name} timed out"
            if p.returncode != 0:
                return False, f"{verb} {name} failed: {p.stderr.strip()[-500:]}"
            self.changed[name] = now_iso()
            return True, None

    def boot_ms(self, name):
        try:
            with open(os.path.join(self.dir, "nodes", name, "boot-ms")) as f:
                return max(0, int(f.read().strip() or 0))
        except (OSError, ValueError):
            return 0

    def boot_fault(self, name):
        """The node's boot fault from DIR/nodes/NAME/boot-fault: "hang" or ""."""
        try:
            with open(os.path.join(self.dir, "nodes", name, "boot-fault")) as f:
                fault = f.read().strip()
        except OSError:
            return ""
        return fault if fault == "hang" else ""

    def hang(self, name):
        """The relay is on, the OS hangs in boot: no sshd until the power is cut."""
        self.hung[name] = True
        self.changed[name] = now_iso()
        self.log(f"{name} hangs in boot (boot-fault hang): the relay is on, sshd never starts")

    def boot(self, name):
        """The OS booting after the relay closed: sshd comes boot-ms later."""
        time.sleep(self.boot_ms(name) / 1000)
        with self.locks[name]:
            if self.boot_fault(name) == "hang":
                self.booting[name] = False
                self.hang(name)
                return
            p = subprocess.run([self.sim_cmd, "node-start", self.dir, name],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=120)
            self.booting[name] = False
            if p.returncode != 0:
                self.log(f"error: node-start {name} failed: {p.stderr.strip()[-500:]}")

    def log(self, line):
        with self.log_lock:
            with open(os.path.join(self.dir, "ha.log"), "a") as f:
                f.write(f"{now_iso()} {line}\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fleet-sim-ha/1"
    fleet: Fleet = None  # set in main
    token: str = ""

    # ---- plumbing
    def log_message(self, fmt, *args):  # quiet: one line per request, in ha.log
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.fleet.log(f"{self.client_address[0]} {self.command} {self.path} {code}")

    def read_body(self):
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_BODY:
            self.close_connection = True
            return None
        return self.rfile.read(n) if n else b""

    def hooks(self):
        delay = os.path.join(self.fleet.dir, "ha_delay")
        try:
            with open(delay) as f:
                time.sleep(min(float(f.read().strip() or 0), 600))
        except (OSError, ValueError):
            pass

    def authorized(self):
        if os.path.exists(os.path.join(self.fleet.dir, "ha_fail_401")):
            return False
        got = self.headers.get("Authorization", "")
        want = f"Bearer {self.token}"
        return hmac.compare_digest(got.encode(), want.encode())

    def begin(self):
        """Common request prologue; returns the body (POST) or None when answered."""
        body = self.read_body() if self.command == "POST" else b""
        if body is None:
            self.send_json(413, {"message": "Request body too large or bad Content-Length."})
            return None
        self.hooks()
        if not self.authorized():
            self.send_json(401, {"message": "401: Unauthorized"})
            return None
        return body

    # ---- API
    def do_GET(self):
        if self.begin() is None:
            return
        path = self.path.split("?", 1)[0]
        if path in ("/api", "/api/"):
            self.send_json(200, {"message": "API running."})
        elif path == "/api/states":
            self.send_json(200, [self.fleet.state(n) for n in self.fleet.names])
        elif path.startswith("/api/states/"):
            name = self.fleet.name_of(path[len("/api/states/"):])
            if name is None:
                self.send_json(404, {"message": "Entity not found."})
            else:
                self.send_json(200, self.fleet.state(name))
        else:
            self.send_json(404, {"message": "Not found."})

    def do_POST(self):
        body = self.begin()
        if body is None:
            return
        path = self.path.split("?", 1)[0]
        prefix = "/api/services/switch/"
        if not path.startswith(prefix):
            self.send_json(404, {"message": "Not found."})
            return
        service = path[len(prefix):]
        if service not in ("turn_on", "turn_off", "toggle"):
            self.send_json(400, {"message": f"Service switch.{service} not found."})
            return
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            self.send_json(400, {"message": "Data should be valid JSON."})
            return
        ids = data.get("entity_id") if isinstance(data, dict) else None
        if isinstance(ids, str):
            ids = [i.strip() for i in ids.split(",")]
        if not ids or not isinstance(ids, list):
            self.send_json(400, {"message": "entity_id missing."})
            return
        names = [self.fleet.name_of(i) for i in ids]
        if None in names:
            bad = [i for i, n in zip(ids, names) if n is None]
            self.send_json(404, {"message": f"Entity not found: {', '.join(map(str, bad))}"})
            return
        changed, errors = [], []
        for name in names:
            self.fleet.log(f"switch.{name} {service}")
            on = {"turn_on": True, "turn_off": False}.get(service)
            if on is None:
                on = not self.fleet.is_on(name)
            did, err = self.fleet.switch(name, on)
            if err:
                errors.append(err)
                self.fleet.log(f"error: {err}")
            elif did:
                changed.append(self.fleet.state(name))
        if errors:
            self.send_json(500, {"message": "; ".join(errors)})
        else:
            self.send_json(200, changed)

    def do_HEAD(self):
        self.do_GET()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="the fleet-sim DIR")
    ap.add_argument("--sim", required=True, help="path of tests/sim/fleet-sim")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--tls-cert", help="PEM certificate (chain): serve https")
    ap.add_argument("--tls-key", help="PEM key of --tls-cert")
    args = ap.parse_args()

    sim_dir = os.path.abspath(args.dir)
    with open(os.path.join(sim_dir, "ha_token")) as f:
        token = f.read().strip()
    if not token:
        sys.exit("ha_switch_server: empty token in ha_token")
    Handler.fleet = Fleet(sim_dir, args.sim)
    Handler.token = token
    httpd = Server((args.host, args.port), Handler)
    port = httpd.server_address[1]
    name, scheme = "ha", "http"
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        name, scheme = "ha_tls", "https"
    write_atomic(os.path.join(sim_dir, f"{name}.pid"), f"{os.getpid()}\n")
    write_atomic(os.path.join(sim_dir, f"{name}.port"), f"{port}\n")
    Handler.fleet.log(f"listening on {scheme}://{args.host}:{port} (pid {os.getpid()})")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
