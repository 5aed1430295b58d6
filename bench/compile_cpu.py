#!/usr/bin/env python3
# The CPU a clean build's objects cost: compiles each named object of a build
# folder (its command from compile_commands.json, ccache dropped, at nice 19)
# and prints the compiler's user+sys seconds, which a shared machine's load
# does not inflate as it does ninja's job seconds (docs/testing.md, "The build").
#   python3 bench/compile_cpu.py BUILDDIR OBJ...
import json, os, resource, subprocess, sys, shlex, time
d = sys.argv[1]
cc = {e['output']: e for e in json.load(open(os.path.join(d, 'compile_commands.json')))}
tot = 0.0
for o in sys.argv[2:]:
    e = cc[o]
    cmd = e['command']
    args = shlex.split(cmd)
    if os.path.basename(args[0]) == 'ccache': args = args[1:]
    os.makedirs(os.path.join(d, os.path.dirname(o)), exist_ok=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p = subprocess.run(['nice', '-n', '19'] + args, cwd=e['directory'], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    tot += cpu
    print(f'{cpu:7.2f} CPU-s {time.time()-t0:7.1f} s wall rc={p.returncode} {o}', flush=True)
    if p.returncode: print(p.stderr[-3000:], flush=True)
print(f'total {tot:.1f} CPU-s over {len(sys.argv)-2} objects; load {open("/proc/loadavg").read().split()[:3]}')
