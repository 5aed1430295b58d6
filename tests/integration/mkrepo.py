#!/usr/bin/env python3
"""Writes a manifests repo (fleet.yaml) for a running simulated fleet.

Reads the sim's sim.json (nodes, ports, users, keys) and emits contract-v1
YAML, with per-test variations given as flags.
"""
import argparse
import json
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", required=True, help="fleet-sim directory")
    ap.add_argument("--out", required=True, help="repo directory to write")
    ap.add_argument("--unlock", default="", help="nodes with display_ram: unlocked")
    ap.add_argument("--hostname", action="append", default=[],
                    help="NODE=NAME: expect another hostname")
    ap.add_argument("--power", action="store_true", help="declare switches")
    ap.add_argument("--power-off", default="", help="nodes declared power: off")
    ap.add_argument("--on-demand", default="",
                    help="nodes declared power: on_demand (boot_timeout 30s)")
    ap.add_argument("--ha-url", default="", help="override the controller URL")
    ap.add_argument("--only", default="", help="only these nodes")
    ap.add_argument("--fabric", action="append", default=[],
                    help="NODE=YAML: a node's fabric: block, e.g. dgx1={address: 10.77.0.11}")
    ap.add_argument("--container-cli", action="append", default=[],
                    help="NODE=CLI: declare another container_cli than the node's engine")
    ap.add_argument("--image", action="append", default=[],
                    help='NAME=JSON: an images: entry, e.g. b12x={"ref": "r@sha256:...", '
                         '"source": "peers", "nodes": ["dgx1"]}')
    ap.add_argument("--store", action="append", default=[],
                    help='NAME=JSON: a stores: entry, e.g. nas={"path": "/srv/nas", "nodes": ["dgx1"]}')
    ap.add_argument("--model", action="append", default=[],
                    help='NAME=JSON: a models: entry, e.g. m={"repo": "org/m", "revision": "<40 hex>", '
                         '"source": "node:dgx1", "nodes": ["dgx2"]}')
    ap.add_argument("--deployment", action="append", default=[],
                    help='NAME=JSON: a deployments: entry, e.g. serve={"recipe": "recipes/s.toml", '
                         '"nodes": ["dgx2"], "image": "bb", "port": 30000}')
    ap.add_argument("--state", default="",
                    help='a state: block as JSON, e.g. {"backend": "postgres", "schema": "fleet"}')
    ap.add_argument("--hub", default="",
                    help='a hub: block as JSON, e.g. {"token_env": "HF_TOKEN"}')
    args = ap.parse_args()

    sim = json.load(open(os.path.join(args.sim, "sim.json")))
    unlock = set(filter(None, args.unlock.split(",")))
    off = set(filter(None, args.power_off.split(",")))
    on_demand = set(filter(None, args.on_demand.split(",")))
    only = set(filter(None, args.only.split(",")))
    fabric = dict(f.split("=", 1) for f in args.fabric)
    hostnames = dict(h.split("=", 1) for h in args.hostname)
    clis = dict(c.split("=", 1) for c in args.container_cli)

    lines = ["version: 1", "fleet: sim"]
    if args.state:
        json.loads(args.state)  # JSON is YAML flow syntax: written as given
        lines.append("state: " + args.state)
    lines.append("ssh: {identity: %s, known_hosts: %s}" % (json.dumps(sim["identity"]),
                                                            json.dumps(sim["known_hosts"])))
    if args.power:
        ha = sim["ha"]
        lines.append("power: {kind: home-assistant, url: %s, token_env: %s}" %
                     (json.dumps(args.ha_url or ha["url"]), ha["token_env"]))
    if args.hub:
        json.loads(args.hub)
        lines.append("hub: " + args.hub)
    lines.append("nodes:")
    for n in sim["nodes"]:
        name = n["name"]
        if only and name not in only:
            continue
        lines += [
            "  %s:" % name,
            "    address: %s" % n.get("address", "127.0.0.1"),
            "    ssh: {user: %s, port: %d}" % (n["user"], n["port"]),
            "    hostname: %s" % hostnames.get(name, name),
            "    container_cli: %s" % clis.get(name, n.get("engine", "podman")),
            "    display_ram: %s" % ("unlocked" if name in unlock else "default"),
            "    paths: {hf_cache: /srv/hf/hub, sysfs: /srv/sys, dev: /srv/dev}",
        ]
        if name in fabric:
            lines.append("    fabric: %s" % fabric[name])
        if args.power:
            # halt_wait: the simulated OS halts within 1 s of its poweroff
            # (fleet-sim), a real one takes longer (default 30 s).
            if name in on_demand:
                lines.append("    power: {switch: switch.%s, state: on_demand, halt_wait: 2s, "
                             "boot_timeout: 30s, watts: 240}" % name)
            else:
                lines.append("    power: {switch: switch.%s, state: %s, halt_wait: 2s}" %
                             (name, "off" if name in off else "on"))
    if args.image:
        lines.append("images:")
        for spec in args.image:
            name, value = spec.split("=", 1)
            json.loads(value)  # JSON is YAML flow syntax: written as given
            lines.append("  %s: %s" % (name, value))
    for section, entries in (("stores", args.store), ("models", args.model),
                             ("deployments", args.deployment)):
        if entries:
            lines.append(section + ":")
            for spec in entries:
                name, value = spec.split("=", 1)
                json.loads(value)  # JSON is YAML flow syntax: written as given
                lines.append("  %s: %s" % (name, value))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "fleet.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
