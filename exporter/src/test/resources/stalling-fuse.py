#!/usr/bin/env python3
"""A filesystem a tenant serves and freezes: /etc/ld.so.preload is a regular file whose reads
never return.

Speaks the kernel's FUSE protocol on /dev/fuse directly (no libfuse here). Run as root inside a
private mount namespace (`unshare -m --propagation private python3 stalling-fuse.py MNT`): the mount
goes away with this process, and the pending reads end (ENOTCONN) when it is killed. Prints
"ready" once mounted, then "stalled" for every read it leaves unanswered.
"""
import ctypes
import os
import struct
import sys

LOOKUP, FORGET, GETATTR, OPEN, READ, RELEASE, FLUSH, INIT = 1, 2, 3, 14, 15, 18, 25, 26
OPENDIR, RELEASEDIR, INTERRUPT, DESTROY, BATCH_FORGET = 27, 29, 36, 38, 42
ENOENT, ENOSYS = 2, 38
ROOT, ETC, PRELOAD = 1, 2, 3
CONTENT = b"/usr/local/vgpu/libvgpu.so\n"


def attr(node):
    if node == PRELOAD:
        mode, size, nlink = 0o100644, len(CONTENT), 1
    else:
        mode, size, nlink = 0o040755, 0, 2
    # fuse_attr: ino size blocks atime mtime ctime, atimensec mtimensec ctimensec mode nlink uid
    # gid rdev blksize flags
    return struct.pack("<6Q10I", node, size, 1, 0, 0, 0, 0, 0, 0, mode, nlink, 0, 0, 0, 4096, 0)


def main():
    mnt = sys.argv[1]
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % fd
    if libc.mount(b"stallfs", mnt.encode(), b"fuse", 0, opts.encode()) != 0:
        sys.exit("mount: " + os.strerror(ctypes.get_errno()))
    print("ready", flush=True)

    def reply(unique, error=0, body=b""):
        os.write(fd, struct.pack("<IiQ", 16 + len(body), -error, unique) + body)

    while True:
        try:
            req = os.read(fd, 1 << 20)
        except OSError:
            return  # unmounted
        _, opcode, unique, node = struct.unpack_from("<IIQQ", req)
        payload = req[40:]
        if opcode == INIT:
            major, minor, readahead = struct.unpack_from("<III", payload)
            # fuse_init_out: major minor max_readahead flags max_background congestion_threshold
            # max_write time_gran max_pages map_alignment flags2, unused
            reply(unique, 0, struct.pack("<IIIIHHIIHHI7I", 7, 31, readahead, 0, 16, 12,
                                         65536, 1, 0, 0, 0, *([0] * 7)))
        elif opcode == LOOKUP:
            name = payload.split(b"\0", 1)[0]
            child = {(ROOT, b"etc"): ETC, (ETC, b"ld.so.preload"): PRELOAD}.get((node, name))
            if child is None:
                reply(unique, ENOENT)
            else:
                reply(unique, 0, struct.pack("<4Q2I", child, 0, 3600, 3600, 0, 0) + attr(child))
        elif opcode == GETATTR:
            reply(unique, 0, struct.pack("<QII", 3600, 0, 0) + attr(node))
        elif opcode in (OPEN, OPENDIR):
            reply(unique, 0, struct.pack("<QII", 0, 0, 0))
        elif opcode == READ and node == PRELOAD:
            print("stalled", flush=True)  # never answered: the reader waits for ever
        elif opcode in (RELEASE, RELEASEDIR, FLUSH):
            reply(unique)
        elif opcode in (FORGET, BATCH_FORGET, INTERRUPT):
            pass  # no reply expected (an interrupted read stays unanswered too)
        elif opcode == DESTROY:
            reply(unique)
            return
        else:
            reply(unique, ENOSYS)


if __name__ == "__main__":
    main()
