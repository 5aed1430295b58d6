#!/usr/bin/env python3
"""A file system that hangs, for the tests: a stand-in for a network store
whose server went away (a hard NFS mount behind a dropped link). Speaks the
kernel's FUSE protocol on /dev/fuse itself (python3 standard library, no
libfuse): it answers the kernel's INIT, so the mount succeeds, and then
never reads another request. Every stat, statfs (df), readdir (find, a
glob) and open under the mount point blocks in the kernel, as on a dead
NFS server; a fatal signal (timeout's TERM, KILL) still ends the blocked
process, as NFS's killable waits allow. (A request the daemon had read
but not answered would leave its caller unkillable in D state: so none
is read.)

  hang_fs.py MOUNTPOINT      # as root; mounts, then serves until killed

Run it inside the node's mount namespace (nsenter -t PID -m) so that the
mount is the node's. Killing it (or its mount namespace ending) aborts the
connection: whatever still waits gets ENOTCONN. Writes MOUNTPOINT's mount
to stdout ("mounted MOUNTPOINT") once the kernel's INIT is answered.
"""
import ctypes
import os
import signal
import struct
import sys

FUSE_INIT = 26
IN_HEADER = struct.Struct("<IIQQIIII")  # len, opcode, unique, nodeid, uid, gid, pid, padding
OUT_HEADER = struct.Struct("<IiQ")  # len, error, unique
# fuse_init_out (7.31): major, minor, max_readahead, flags, max_background,
# congestion_threshold, max_write, time_gran, max_pages, map_alignment,
# flags2, unused[7]
INIT_OUT = struct.Struct("<IIIIHHIIHHI7I")


def main(argv):
    if len(argv) != 2:
        print("usage: hang_fs.py MOUNTPOINT", file=sys.stderr)
        return 2
    mountpoint = argv[1]
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % fd
    if libc.mount(b"fleet-hang", mountpoint.encode(), b"fuse.fleet-hang", 0, opts.encode()) != 0:
        err = ctypes.get_errno()
        print("hang_fs: mount %s: %s" % (mountpoint, os.strerror(err)), file=sys.stderr)
        return 1
    while True:
        req = os.read(fd, 1 << 20)  # the kernel's first request is its INIT
        if len(req) < IN_HEADER.size:
            continue
        opcode, unique = IN_HEADER.unpack_from(req)[1:3]
        if opcode == FUSE_INIT:
            break
    minor, max_readahead = struct.unpack_from("<IIII", req, IN_HEADER.size)[1:3]
    body = INIT_OUT.pack(7, min(minor, 31), max_readahead, 0, 16, 12, 1 << 17, 1, 32, 0, 0,
                         *([0] * 7))
    os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(body), 0, unique) + body)
    print("mounted %s" % mountpoint, flush=True)
    while True:
        signal.pause()  # holds the connection; reads nothing more

if __name__ == "__main__":
    sys.exit(main(sys.argv))
