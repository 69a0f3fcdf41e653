#!/usr/bin/env python3
"""Metadata A/B for the threads= default: create + stat + unlink of N files
per client, with 1 and with 2 client processes, on an already mounted
directory. Prints ops/s. Used for docs/TUNABLES.md:

    for rep in 1 2 3; do for th in 1 2; do
      target/release/memfs -o size=2G,threads=$th /tmp/thr
      echo -n "threads=$th: "; python3 scripts/threads-ab.py /tmp/thr; umount /tmp/thr
    done; done
"""
import multiprocessing as mp
import os
import sys
import time

N = 15000


def work(root, tag):
    d = os.path.join(root, tag)
    os.mkdir(d)
    for i in range(N):
        os.close(os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    for i in range(N):
        os.stat(f"{d}/f{i}")
    for i in range(N):
        os.unlink(f"{d}/f{i}")


def main(root):
    for clients in (1, 2):
        start = time.perf_counter()
        procs = [mp.Process(target=work, args=(root, f"p{clients}-{k}")) for k in range(clients)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - start
        print(f"clients={clients} {clients * N * 3 / elapsed:.0f} ops/s", end="  ")
    print()


if __name__ == "__main__":
    main(sys.argv[1])
