"""Runs one op sequence on two fresh mounts side by side and compares them.

Owns: the comparison loop (after every op: the op's outcome, the state and
timestamp relations of every touched path and its ancestors, open fds,
statfs; a full tree walk every few ops and at the end), the Mismatch report
with replay commands, and the minimizer that shrinks a failing sequence.

Side A is the reference (tmpfs); side B is the file system under test.
"""
import collections
import contextlib
import os
import re
import stat
import tempfile
import time

import mounts

from . import gen, observe, settings
from .execute import Side

# FUSE sends RELEASE (after close) and FORGET (after the kernel drops an
# inode) asynchronously, so space freed by them shows up in statfs a moment
# later than on tmpfs. statfs is polled this long before it counts as different.
STATFS_SETTLE_SECONDS = 5.0
CLOCK_REALTIME_COARSE = 5  # from linux/time.h; Python's time module lacks the name
MIN_SECONDS_PER_FAILURE = 45  # minimizer budget per failing sequence (see also settings.min_budget)
_MAX_VALUE_CHARS = 400
_REPEATS = re.compile(r"(.{1,2}?)\1{11,}")


def _compact(text):
    """Shorten long repetitions (255-byte names, 4095-byte targets): 'nnnn...' -> '(n)*255'."""
    return _REPEATS.sub(lambda m: f"({m.group(1)})*{len(m.group(0)) // len(m.group(1))}", text)


def _short(value):
    text = _compact(repr(value))
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS] + f"... ({len(text)} chars)"


def _wait_for_coarse_clock(past_ns):
    """Wait until the kernel's coarse clock is later than past_ns.

    tmpfs (multigrain timestamps, Linux 6.13+) may stamp a change with the
    coarse clock, and some changes copy another inode's new time (unlink sets
    the directory's times from the child's ctime): within the same 4 ms tick
    the directory's times can then stay equal although it changed. Once the
    coarse clock has passed every touched inode's ctime, every real change is
    visible as a changed timestamp, so "did it change" is deterministic.
    """
    while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= past_ns:
        time.sleep(0.0005)


class Mismatch:
    """The first difference found in a sequence."""

    def __init__(self, seed, options, n_ops, keep, op, what, diffs, outcomes, labels):
        self.seed, self.options, self.n_ops, self.keep = seed, options, n_ops, keep
        self.op, self.what, self.diffs, self.outcomes, self.labels = op, what, diffs, outcomes, labels

    def describe(self):
        a, b = self.labels
        where = str(self.op) if self.op else "end of sequence"
        lines = [f"  at {where}", f"  what differs: {self.what}"]
        lines += [f"    {_compact(key)}: {a}={_short(va)} {b}={_short(vb)}" for key, va, vb in self.diffs[:12]]
        if len(self.diffs) > 12:
            lines.append(f"    ... {len(self.diffs) - 12} more")
        if self.outcomes:
            lines.append(f"  op outcome: {a}={_short(self.outcomes[0])} {b}={_short(self.outcomes[1])}")
        return "\n".join(lines)

    def report(self):
        a, b = self.labels
        if self.keep is not None:
            last = self.op.index if self.op else self.n_ops
            replay = settings.replay_command(self.seed, self.n_ops, [i for i in self.keep if i <= last])
        else:
            replay = settings.replay_command(self.seed, self.op.index + 1 if self.op else self.n_ops)
        return "\n".join([
            f"{b} differs from {a}: seed={self.seed} (mount options {self.options}), "
            f"op index {self.op.index if self.op else 'end'} of {self.n_ops}",
            self.describe(),
            f"replay: {replay}",
        ])


class Result:
    def __init__(self, mismatch, outcomes, executed):
        self.mismatch = mismatch
        self.outcomes = outcomes  # Counter of (kind, outcome) on side A
        self.executed = executed


def _slots(op):
    """The fd slots the op uses (fcopy: destination and source)."""
    return [op.args[k] for k in ("slot", "src_slot") if k in op.args]


def _touched(op, slot_paths):
    """Paths whose state the op may change: its path args, the slots' paths, all ancestors."""
    paths = op.paths()
    paths += [slot_paths[slot] for slot in _slots(op) if slot in slot_paths]
    out = {""}
    for p in paths:
        parts = _norm(p).split("/")
        out.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(out)


def _norm(path):
    return "/".join(x for x in path.split("/") if x not in ("", "."))


def _atime_key(op, outcome):
    """The one identity whose atime the op just set explicitly, else None.

    atime is otherwise not compared: reads served from the kernel page cache
    never reach a FUSE server, so its atime cannot follow tmpfs's relatime
    updates; an atime just set by utimens (a value or UTIME_NOW) is exact on both.
    """
    if op.args.get("atime", "UTIME_OMIT") == "UTIME_OMIT" or outcome[0] != "ok":
        return None
    if op.kind == "utimens":
        return ("stat" if op.args["follow"] else "lstat", _norm(op.args["path"]))
    if op.kind == "futimens":
        return ("fd", op.args["slot"])
    return None


# I/O on a FIFO is done by the kernel's pipe code. On tmpfs it updates the
# FIFO's mtime/ctime (pipe_write -> file_update_time); on FUSE the inode is
# S_NOCMTIME and the server never sees the I/O, so memfs cannot do the same.
# Whether such an op changed the FIFO's timestamps is therefore not compared.
FIFO_IO_KINDS = {"write", "fwrite", "read", "fread"}


# docs/SEMANTICS.md: truncate(path, 0) of a file that is already empty (and
# holds no pages) leaves tmpfs's times alone, but memfs sets them: FUSE
# delivers it exactly like open(O_TRUNC), which must set them. Whether such
# an op changed the times is therefore not compared, and afterwards side B
# gets side A's atime/mtime back (_resync_times), or the difference would
# show again later as "mtime equals an explicit utimens value" of the same
# inode under another name, through an fd, or after a rename.
# truncate follows symlinks, so the target is what must be empty.
def _is_empty_truncate(op, side):
    if op.kind != "truncate" or op.args.get("size") != 0:
        return False
    try:
        st = os.stat(side.abs(op.args["path"]))
    except OSError:
        return False
    return st.st_size == 0 and st.st_blocks == 0


# docs/SEMANTICS.md: a fallocate that fails, called without CAP_FSETID on a
# set-id file, leaves tmpfs's set-id bits alone, but on memfs they are gone:
# the kernel's FUSE clears them (a SETATTR, which also sets ctime) before it
# sends FALLOCATE. When exactly that happened, the op's time relations are
# not compared and side B gets side A's mode back.
def _failed_fallocate_kept_setid(op, outs, sides):
    if op.kind not in ("fallocate", "ffallocate") or outs[0][0] != "err":
        return False
    return _give_back_setid(op, sides)


def _give_back_setid(op, sides):
    """If side B's target lacks set-id bits side A's has, and differs in
    nothing else, give them back (chmod B to A's mode) and say so."""
    a, b = (_target(s, op) for s in sides)
    if a is None or b is None:
        return False
    try:
        mode_a, mode_b = os.stat(a).st_mode, os.stat(b).st_mode
    except OSError:
        return False
    setid = stat.S_ISUID | stat.S_ISGID
    if mode_a == mode_b or (mode_a & ~setid) != (mode_b & ~setid) or mode_b & setid & ~mode_a:
        return False
    os.chmod(b, stat.S_IMODE(mode_a))
    return True


# docs/SEMANTICS.md: chown(f, -1, -1) by someone who does not own a set-id
# file is EPERM on tmpfs (clearing the bits is a mode change) but succeeds on
# memfs and clears them: the kernel's FUSE sends the very same request before
# a write or fallocate by any writer, which must succeed. When exactly that
# happened, the outcome counts as tmpfs's, side B gets side A's mode back,
# and the op's time relations are not compared.
def _nonowner_chown_noop(op, outs, sides):
    if op.kind not in ("chown", "fchown") or not op.user:
        return False
    if op.args.get("uid") != -1 or op.args.get("gid") != -1:
        return False
    if outs[0] != ("err", "EPERM") or outs[1][0] != "ok" or not _give_back_setid(op, sides):
        return False
    outs[1] = outs[0]
    return True


def _target(side, op):
    """What the op reads/writes/truncates on side: its slot's fd, else its path."""
    return side.slots.get(op.args["slot"]) if "slot" in op.args else side.abs(op.args["path"])


def _resync_times(op, sides, fifo_only=False):
    """After a time difference the harness does not compare (an empty truncate,
    I/O on a FIFO): copy side A's atime/mtime to side B's file, so that the
    same difference does not show again at a later op."""
    a, b = (_target(s, op) for s in sides)
    if a is None or b is None:
        return
    try:
        st = os.stat(a)
        if not fifo_only or stat.S_ISFIFO(st.st_mode):
            os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError:
        pass  # nothing there (the op failed the same way on both sides): nothing to resync


def _relation(pre, post, with_atime, fifo_io, times_unspecified=False):
    """Timestamp relations between two identities of one path (never absolute times)."""
    if pre is None or post is None:
        return None
    same = pre[0] == post[0]
    if (fifo_io and pre[4]) or times_unspecified:
        return {"same_inode": same}
    rel = {"same_inode": same, "mtime_is": observe.time_class(post[1])}
    if same:
        rel.update(mtime_changed=pre[1] != post[1], ctime_changed=pre[2] != post[2])
    if with_atime:
        rel["atime_is"] = observe.time_class(post[3])
    return rel


class _Run:
    def __init__(self, seed, options, n_ops, keep, sides, perturb, walk_every):
        self.seed, self.options, self.n_ops, self.keep = seed, options, n_ops, keep
        self.sides, self.perturb, self.walk_every = sides, perturb, walk_every
        self.labels = [s.name for s in sides]
        self.slot_paths = {}
        self.outcomes = collections.Counter()

    def mismatch(self, op, what, diffs, outcomes=None):
        return Mismatch(self.seed, self.options, self.n_ops, self.keep, op, what, diffs, outcomes,
                        self.labels)

    def identities(self, side, touched, op):
        ids = {}
        for p in touched:
            ids[("lstat", p)] = observe.identity(side.abs(p))
            ids[("stat", p)] = observe.identity(side.abs(p), follow=True)
        for slot in _slots(op):
            fd = side.slots.get(slot)
            if fd is not None:
                ids[("fd", slot)] = observe.fd_identity(fd)
        return ids

    def fd_state(self, side, slot):
        fd = side.slots.get(slot)
        if fd is None:
            return None
        try:
            offset = os.lseek(fd, 0, os.SEEK_CUR)
        except OSError as e:
            offset = observe.err_name(e)
        return {"fstat": observe.norm_stat(os.fstat(fd)), "offset": offset}

    def compare(self, op, what, fetch):
        """Mismatch if fetch(side) differs between the sides, else None."""
        a, b = (fetch(s) for s in self.sides)
        diffs = observe.diff(a, b)
        return self.mismatch(op, what, diffs) if diffs else None

    def settled_statfs(self, op):
        deadline = time.monotonic() + STATFS_SETTLE_SECONDS
        while True:
            found = self.compare(op, "statfs", lambda s: observe.statfs(s.root))
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.01)

    def step(self, pos, op):
        touched = _touched(op, self.slot_paths)
        empty_truncate = _is_empty_truncate(op, self.sides[0])
        pre = [self.identities(s, touched, op) for s in self.sides]
        _wait_for_coarse_clock(max((i[2] for ids in pre for i in ids.values() if i), default=0))
        outs, post = [], []
        for i, side in enumerate(self.sides):
            out = side.apply(op)
            if self.perturb:
                out = self.perturb(pos, op, i, side, out)
            outs.append(out)
            post.append(self.identities(side, touched, op))
        setid_resynced = (_nonowner_chown_noop(op, outs, self.sides)
                          or _failed_fallocate_kept_setid(op, outs, self.sides))
        if op.kind in ("open", "tmpfile", "flink") and outs[0][0] == "ok":
            # The slot's file is now found there (for an O_TMPFILE: its
            # directory, until flink names it; any name of it shows its state).
            self.slot_paths[op.args["slot"]] = op.args["path"]
        self.outcomes[(op.kind, outs[0][-1] if outs[0][0] == "err" else outs[0][0])] += 1
        if outs[0] != outs[1]:
            return self.mismatch(op, "outcome", [("outcome", outs[0], outs[1])], outs)
        checks = [("state of touched paths", lambda s: {p: observe.snapshot(s.abs(p)) for p in touched})]
        if _slots(op):
            checks.append(("open fd", lambda s: {slot: self.fd_state(s, slot) for slot in _slots(op)}))
        atime_key = _atime_key(op, outs[0])
        fifo_io = op.kind in FIFO_IO_KINDS
        relations = [{f"{k[0]}({k[1]!r})": _relation(p[k], q.get(k), k == atime_key, fifo_io,
                                                     (empty_truncate and k[1] == op.args.get("path"))
                                                     or setid_resynced)
                      for k in p}
                     for p, q in zip(pre, post)]
        checks.append(("timestamp relations (touched paths)", lambda s: relations[self.sides.index(s)]))
        if empty_truncate or fifo_io:
            _resync_times(op, self.sides, fifo_only=fifo_io)
        if (pos + 1) % self.walk_every == 0:
            checks.append(("full tree walk", lambda s: observe.tree(s.root)))
        for what, fetch in checks:
            found = self.compare(op, what, fetch)
            if found:
                found.outcomes = outs
                return found
        return self.settled_statfs(op)

    def finish(self):
        return (self.compare(None, "full tree walk", lambda s: observe.tree(s.root))
                or self.settled_statfs(None))


@contextlib.contextmanager
def fresh_mount(kind, options):
    """Like mounts.mounted, but also unmounts when mounting itself raised after
    the mount went live (e.g. memfs mounted but did not return in time)."""
    path = tempfile.mkdtemp(prefix=f"diff-{kind}-")
    try:
        os.chmod(path, 0o755)
        try:
            mounts.mount(kind, path, options)
        except Exception as e:
            raise RuntimeError(f"could not mount {kind} -o {options} on {path}: {e!r}") from e
        yield path
    finally:
        mounts.umount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


def run_sequence(seed, n_ops, kinds=("tmpfs", "memfs"), options=None, keep=None,
                 perturb=None, walk_every=None):
    """Run seed's sequence (or the ops at indices `keep`) on fresh mounts; returns Result."""
    options = options or settings.options(seed)
    walk_every = walk_every or settings.walk_every()
    ops = gen.generate(seed, n_ops)
    if keep is not None:
        ops = [ops[i] for i in keep if i < n_ops]
    labels = list(kinds) if kinds[0] != kinds[1] else [f"{kinds[0]}(A)", f"{kinds[1]}(B)"]
    with contextlib.ExitStack() as stack:
        roots = [stack.enter_context(fresh_mount(kind, options)) for kind in kinds]
        sides = [Side(label, root) for label, root in zip(labels, roots)]
        run = _Run(seed, options, n_ops, keep, sides, perturb, walk_every)
        old_umask = os.umask(0o022)
        try:
            for pos, op in enumerate(ops):
                found = run.step(pos, op)
                if found:
                    return Result(found, run.outcomes, pos + 1)
            return Result(run.finish(), run.outcomes, len(ops))
        finally:
            for side in sides:
                side.close_all()
            os.umask(old_umask)


def minimize(mismatch, kinds, budget_seconds, perturb=None):
    """Shrink the failing sequence by dropping chunks of ops while some mismatch remains.

    Returns (kept indices, Mismatch of the shrunk run, runs, seconds), or None if
    even the unshrunk prefix did not fail again (a flaky difference).
    """
    start = time.monotonic()
    seed, n_ops, options = mismatch.seed, mismatch.n_ops, mismatch.options
    last = mismatch.op.index if mismatch.op else n_ops - 1

    def fails(indices):
        return run_sequence(seed, n_ops, kinds, options, keep=indices, perturb=perturb,
                            walk_every=1).mismatch

    kept = list(range(last + 1))
    found = fails(kept)
    runs = 1
    if not found:
        return None
    chunk = max(1, len(kept) // 2)
    while chunk >= 1 and time.monotonic() - start < budget_seconds:
        i = 0
        while i < len(kept) and time.monotonic() - start < budget_seconds:
            trial = kept[:i] + kept[i + chunk:]
            runs += 1
            smaller = fails(trial) if trial else None
            if smaller:
                kept, found = trial, smaller
            else:
                i += chunk
        chunk //= 2
    return kept, found, runs, time.monotonic() - start


_min_budget = {"left": None}


def check(seed, n_ops, kinds=("tmpfs", "memfs"), keep=None):
    """Run one sequence; returns None or a full failure report (minimized within budget)."""
    result = run_sequence(seed, n_ops, kinds, keep=keep)
    if not result.mismatch:
        return None
    report = result.mismatch.report()
    if _min_budget["left"] is None:
        _min_budget["left"] = settings.min_budget()
    budget = min(_min_budget["left"], MIN_SECONDS_PER_FAILURE)
    if budget <= 0 or keep is not None:
        return report + "\n(not minimized: " + ("replaying a kept subset)" if keep else "session budget used up)")
    shrunk = minimize(result.mismatch, kinds, budget)
    if shrunk is None:
        _min_budget["left"] -= budget
        return report + "\nNOT REPRODUCED on a second run: the difference is timing dependent"
    kept, found, runs, seconds = shrunk
    _min_budget["left"] -= seconds
    ops = gen.generate(seed, n_ops)
    lines = [report, f"minimized to {len(kept)} ops ({runs} runs, {seconds:.1f} s):"]
    lines += [f"    {ops[i]}" for i in kept]
    lines += ["  first difference of the minimized run:", found.describe(),
              f"replay minimized: {settings.replay_command(seed, n_ops, kept)}"]
    return "\n".join(lines)
