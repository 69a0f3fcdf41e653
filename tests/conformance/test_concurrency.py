"""Several clients at once.

Covers: concurrent writers to different files, to the same file at distinct
offsets and with O_APPEND (no record lost or torn), O_CREAT|O_EXCL races
(each name created exactly once), hard-link churn leaving the right nlink,
and readdir passes while another process creates and deletes entries: within
one pass no entry that was left alone is missing or repeated.
"""
import multiprocessing
import os
import time

from .helpers import parallel, read_file, write_file

WORKERS = 4
BLOCK = 4096


def _pattern(worker, index, size=BLOCK):
    head = f"w{worker}-b{index}|".encode()
    return (head * (size // len(head) + 1))[:size]


def _write_own_file(path, worker, blocks):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        for i in range(blocks):
            os.write(fd, _pattern(worker, i, 16 * BLOCK))
    finally:
        os.close(fd)


def test_writers_to_different_files(fs_dir):
    blocks = 128  # 8 MiB each
    paths = [os.path.join(fs_dir, f"own{w}") for w in range(WORKERS)]
    parallel(_write_own_file, [(p, w, blocks) for w, p in enumerate(paths)])
    for w, path in enumerate(paths):
        expected = b"".join(_pattern(w, i, 16 * BLOCK) for i in range(blocks))
        assert read_file(path) == expected, path


def _write_interleaved(path, worker, rounds):
    fd = os.open(path, os.O_WRONLY)
    try:
        for r in range(rounds):
            index = r * WORKERS + worker
            os.pwrite(fd, _pattern(worker, index), index * BLOCK)
    finally:
        os.close(fd)


def test_writers_to_one_file_at_distinct_offsets(fs_dir):
    path = os.path.join(fs_dir, "shared")
    write_file(path)
    rounds = 512
    parallel(_write_interleaved, [(path, w, rounds) for w in range(WORKERS)])
    data = read_file(path)
    assert len(data) == rounds * WORKERS * BLOCK
    for index in range(rounds * WORKERS):
        block = data[index * BLOCK:(index + 1) * BLOCK]
        assert block == _pattern(index % WORKERS, index), f"block {index}"


def _append_records(path, worker, count):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        for i in range(count):
            os.write(fd, f"<{worker}:{i:05d}:{'x' * 80}>\n".encode())
    finally:
        os.close(fd)


def test_concurrent_o_append_keeps_every_record(fs_dir):
    path = os.path.join(fs_dir, "log")
    write_file(path)
    count = 1000
    parallel(_append_records, [(path, w, count) for w in range(WORKERS)])
    lines = read_file(path).split(b"\n")
    assert lines[-1] == b""
    records = lines[:-1]
    assert len(records) == WORKERS * count
    expected = {f"<{w}:{i:05d}:{'x' * 80}>".encode() for w in range(WORKERS) for i in range(count)}
    assert set(records) == expected
    for w in range(WORKERS):  # each writer's records stay in its own order
        mine = [r for r in records if r.startswith(f"<{w}:".encode())]
        assert mine == sorted(mine)


def _exclusive_creates(directory, names):
    won = []
    for name in names:
        try:
            os.close(os.open(os.path.join(directory, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            won.append(name)
        except FileExistsError:
            pass
    return won


def test_o_excl_race_creates_each_name_once(fs_dir):
    names = [f"n{i:04d}" for i in range(1000)]
    orders = [names if w % 2 else names[::-1] for w in range(WORKERS)]
    wins = parallel(_exclusive_creates, [(fs_dir, order) for order in orders])
    all_wins = [n for won in wins for n in won]
    assert sorted(all_wins) == names, "a name was created twice or never"
    assert sorted(os.listdir(fs_dir)) == names


def _link_churn(target, directory, worker, count):
    for i in range(count):
        os.link(target, os.path.join(directory, f"l{worker}-{i}"))
    for i in range(0, count, 2):
        os.unlink(os.path.join(directory, f"l{worker}-{i}"))


def test_hard_link_churn_nlink(fs_dir):
    target = os.path.join(fs_dir, "target")
    write_file(target, b"t")
    count = 400
    parallel(_link_churn, [(target, fs_dir, w, count) for w in range(WORKERS)])
    assert os.stat(target).st_nlink == 1 + WORKERS * count // 2
    assert len(os.listdir(fs_dir)) == 1 + WORKERS * count // 2


def _churn(directory, stop, started):
    i = 0
    started.set()
    while not stop.is_set():
        path = os.path.join(directory, f"churn{i % 300:03d}")
        try:
            if i % 600 < 300:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        i += 1


def test_readdir_during_creates_and_deletes(fs_dir):
    stable = {f"stable{i:04d}" for i in range(1500)}
    for name in stable:
        os.mknod(os.path.join(fs_dir, name))
    ctx = multiprocessing.get_context("fork")
    stop, started = ctx.Event(), ctx.Event()
    churner = ctx.Process(target=_churn, args=(fs_dir, stop, started))
    churner.start()
    try:
        assert started.wait(20)
        time.sleep(0.05)
        for npass in range(30):
            listed = [e.name for e in os.scandir(fs_dir)]
            seen_stable = [n for n in listed if n.startswith("stable")]
            assert len(seen_stable) == len(stable), f"pass {npass}: stable entry missed/repeated"
            assert set(seen_stable) == stable, f"pass {npass}"
            assert all(n.startswith(("stable", "churn")) for n in listed)
    finally:
        stop.set()
        churner.join(20)
        if churner.is_alive():
            churner.kill()
            churner.join()
    assert churner.exitcode == 0
    assert {n for n in os.listdir(fs_dir) if n.startswith("stable")} == stable


def _scan_repeatedly(directory, passes):
    bad = []
    for _ in range(passes):
        names = os.listdir(directory)
        if len(names) != len(set(names)):
            bad.append(len(names))
    return bad, len(names)


def test_parallel_readdir_of_a_static_directory(fs_dir):
    for i in range(3000):
        os.mknod(os.path.join(fs_dir, f"e{i}"))
    results = parallel(_scan_repeatedly, [(fs_dir, 20)] * WORKERS)
    assert results == [([], 3000)] * WORKERS
