#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# A TCP relay that damages one byte: listens on 127.0.0.1:LISTEN, joins
# every connection to 127.0.0.1:TARGET, and flips the low bit of the
# byte at offset AT of the first connection's client-to-target stream
# (or, with "back", of its target-to-client stream), once. Everything
# else passes unchanged, so the damage is what a bad link or a meddler
# on the path would do to one segment. auth.sh puts it between tern_blk
# and tern_target. Prints "listening" when ready and "flipped" when it
# has done it.
#
# Usage: tamper_proxy.py LISTEN TARGET AT [back]

import socket
import sys
import threading

listen_port, target_port, flip_at = (int(a) for a in sys.argv[1:4])
flip_back = sys.argv[4:] == ["back"]
flip_lock = threading.Lock()
flip_pending = [True]


def pump(src, dst, offset_of_first):
    """Copy src to dst; damage the byte at flip_at if offset_of_first."""
    seen = 0
    try:
        while True:
            buf = src.recv(65536)
            if not buf:
                break
            if offset_of_first and seen <= flip_at < seen + len(buf):
                with flip_lock:
                    if flip_pending[0]:
                        flip_pending[0] = False
                        buf = bytearray(buf)
                        buf[flip_at - seen] ^= 1
                        print("flipped", flush=True)
            seen += len(buf)
            dst.sendall(buf)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", listen_port))
    lsock.listen(16)
    print("listening", flush=True)
    first = True
    while True:
        client, _ = lsock.accept()
        target = socket.create_connection(("127.0.0.1", target_port))
        threading.Thread(target=pump,
                         args=(client, target, first and not flip_back),
                         daemon=True).start()
        threading.Thread(target=pump,
                         args=(target, client, first and flip_back),
                         daemon=True).start()
        first = False


main()
