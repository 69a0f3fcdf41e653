/* The RedHawk RAM-disk paper's file write/read program (seed 004): a file in
 * the mount, opened with O_DIRECT, N x (lseek to 0 + write of one buffer)
 * timed, then N x (lseek to 0 + read), each loop timed with CLOCK_MONOTONIC;
 * and its "CPU write/read memory" program, which makes memory traffic.
 *
 * usage: numa_rw rw SIZE ITERATIONS PROCS DIR[@CPUS] [DIR[@CPUS] ...]
 *        numa_rw hog MIB [CPUS]
 *
 * rw: PROCS processes at once; process i works on DIR/numa_rw.<i> of the
 * (i mod number of DIRs)-th DIR and, given @CPUS (a kernel cpulist such as
 * 0-3,8), runs on those CPUs only. Each pins itself, then allocates its
 * buffer (aligned to 4096, pseudo-random bytes, so first-touch places it on
 * its own node), writes its file once untimed, and waits for the others; the
 * write loops all start together, then the read loops, and the data read
 * back is compared. A file system that refuses O_DIRECT with EINVAL (at open
 * or at the first write) is used without it, and the answer says so.
 * Prints one JSON line: "write_ms" and "read_ms" (ms per lseek + write /
 * lseek + read call, mean over the processes), "write_ms_max" and
 * "read_ms_max" (the slowest process), "o_direct" (1, or 0 with a "note").
 *
 * hog: touches a MIB MiB buffer (on CPUS, if given), prints "ready", then
 * reads and writes one word of every cache line of it, over and over, until
 * killed: memory traffic that mostly misses the CPU caches.
 */
#include "common.h"
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define ALIGN 4096
#define LINE 64

struct answer {  /* one process's timings, sent through a pipe (< PIPE_BUF) */
	double write_s, read_s;
	int o_direct;
};

/* CPUS (a cpulist, "0-3,8") into set; returns 0, or -1 if it is not one. */
static int parse_cpus(const char *list, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*list) {
		char *end;
		long lo = strtol(list, &end, 10), hi = lo;
		if (end == list || lo < 0) return -1;
		if (*end == '-') {
			list = end + 1;
			hi = strtol(list, &end, 10);
			if (end == list || hi < lo) return -1;
		}
		if (hi >= CPU_SETSIZE) return -1;
		for (long c = lo; c <= hi; c++) CPU_SET(c, set);
		if (*end == ',') end++;
		else if (*end) return -1;
		list = end;
	}
	return 0;
}

static void pin(const char *cpus)
{
	cpu_set_t set;
	if (!cpus) return;
	if (parse_cpus(cpus, &set) < 0) { errno = EINVAL; die("cpu list '%s'", cpus); }
	CHECK(sched_setaffinity(0, sizeof set, &set), "sched_setaffinity %s", cpus);
}

static char *buffer(size_t n)
{
	void *p;
	if (posix_memalign(&p, ALIGN, n)) { errno = ENOMEM; die("buffer of %zu bytes", n); }
	uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		((unsigned char *)p)[i] = (unsigned char)(x | 1);
	}
	return p;
}

static void one_write(int fd, const char *buf, size_t n)
{
	ssize_t w = write(fd, buf, n);
	if (w < 0) die("write");
	if ((size_t)w != n) { errno = EIO; die("short write: %zd of %zu bytes", w, n); }
}

/* Create path and write buf to it, with O_DIRECT where the file system takes
 * it; returns the open descriptor, *o_direct says which. */
static int create(const char *path, const char *buf, size_t n, int *o_direct)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	*o_direct = fd >= 0;
	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd, "create %s", path);
	ssize_t w = write(fd, buf, n);
	if (w < 0 && errno == EINVAL && *o_direct) {
		*o_direct = 0;
		CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT), "fcntl ~O_DIRECT");
		w = write(fd, buf, n);
	}
	if (w < 0) die("write %s", path);
	if ((size_t)w != n) { errno = EIO; die("short write: %zd of %zu bytes", w, n); }
	return fd;
}

static void wait_go(int ready, int go)
{
	char c = 0;
	if (write(ready, &c, 1) != 1) die("barrier: ready");
	if (read(go, &c, 1) != 1) die("barrier: go");
}

/* One process of rw: never returns. */
static void worker(int i, const char *spec, size_t size, long iters, int ready, int go[2],
		   int result)
{
	char dir[4096], path[4200];
	const char *at = strchr(spec, '@');
	size_t len = at ? (size_t)(at - spec) : strlen(spec);
	if (len >= sizeof dir) { errno = ENAMETOOLONG; die("%s", spec); }
	memcpy(dir, spec, len);
	dir[len] = 0;
	pin(at ? at + 1 : NULL);
	snprintf(path, sizeof path, "%s/numa_rw.%d", dir, i);

	char *data = buffer(size), *back = buffer(size);
	struct answer a;
	int fd = create(path, data, size, &a.o_direct);

	wait_go(ready, go[0]);
	double t0 = now();
	for (long k = 0; k < iters; k++) {
		CHECK(lseek(fd, 0, SEEK_SET), "lseek");
		one_write(fd, data, size);
	}
	a.write_s = now() - t0;

	wait_go(ready, go[1]);
	t0 = now();
	for (long k = 0; k < iters; k++) {
		CHECK(lseek(fd, 0, SEEK_SET), "lseek");
		ssize_t r = read(fd, back, size);
		if (r < 0) die("read");
		if ((size_t)r != size) { errno = EIO; die("short read: %zd of %zu bytes", r, size); }
	}
	a.read_s = now() - t0;

	CHECK(close(fd), "close");
	if (memcmp(data, back, size)) { errno = EIO; die("%s: data read back differs", path); }
	if (write(result, &a, sizeof a) != (ssize_t)sizeof a) die("result pipe");
	exit(0);
}

/* A process that ends before the last barrier has failed: end them all. */
static void check_children(const pid_t *pids, int procs)
{
	int status;
	pid_t pid = waitpid(-1, &status, WNOHANG);
	if (pid <= 0) return;
	for (int i = 0; i < procs; i++)
		if (pids[i] != pid) kill(pids[i], SIGKILL);
	errno = ECHILD;
	die("process %d ended before the others were done (status %d)", (int)pid, status);
}

/* Wait until all procs are at the barrier, then let them all go. */
static void release(int ready, int go, const pid_t *pids, int procs)
{
	char c = 0;
	for (int got = 0; got < procs;) {
		struct pollfd pf = { .fd = ready, .events = POLLIN };
		int r = poll(&pf, 1, 100);
		CHECK(r, "poll");
		if (r == 0) { check_children(pids, procs); continue; }
		if (read(ready, &c, 1) != 1) die("barrier: ready");
		got++;
	}
	for (int i = 0; i < procs; i++)
		if (write(go, &c, 1) != 1) die("barrier: go");
}

static int rw(size_t size, long iters, int procs, char **specs, int nspecs)
{
	int ready[2], go[2][2], result[2];
	CHECK(pipe(ready), "pipe");
	CHECK(pipe(go[0]), "pipe");
	CHECK(pipe(go[1]), "pipe");
	CHECK(pipe(result), "pipe");
	pid_t *pids = calloc(procs, sizeof *pids);
	if (!pids) die("calloc");
	fflush(stdout);
	for (int i = 0; i < procs; i++) {
		pid_t pid = pids[i] = fork();
		CHECK(pid, "fork");
		if (pid == 0) {
			int gos[2] = { go[0][0], go[1][0] };
			worker(i, specs[i % nspecs], size, iters, ready[1], gos, result[1]);
		}
	}
	close(result[1]);  /* the workers' answers end with the last worker */
	release(ready[0], go[0][1], pids, procs);
	release(ready[0], go[1][1], pids, procs);

	double w_sum = 0, r_sum = 0, w_max = 0, r_max = 0;
	int o_direct = 1, got = 0;
	struct answer a;
	while (read(result[0], &a, sizeof a) == (ssize_t)sizeof a) {
		double w = a.write_s * 1000.0 / iters, r = a.read_s * 1000.0 / iters;
		w_sum += w; r_sum += r;
		if (w > w_max) w_max = w;
		if (r > r_max) r_max = r;
		o_direct &= a.o_direct;
		got++;
	}
	int failed = 0, status;
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	if (failed || got != procs) { errno = ECHILD; die("%d of %d processes failed", procs - got, procs); }

	json_begin();
	json_num("write_ms", w_sum / procs);
	json_num("read_ms", r_sum / procs);
	json_num("write_ms_max", w_max);
	json_num("read_ms_max", r_max);
	json_num("procs", procs);
	json_num("iterations", iters);
	json_num("bytes", size);
	json_num("o_direct", o_direct);
	if (!o_direct)
		printf(", \"note\": \"O_DIRECT refused with EINVAL: buffered I/O (page cache)\"");
	json_end();
	return 0;
}

static int hog(size_t mib, const char *cpus)
{
	pin(cpus);
	size_t n = mib << 20;
	volatile uint64_t *p = (volatile uint64_t *)buffer(n);
	const size_t step = LINE / sizeof *p, words = n / sizeof *p;
	printf("ready\n");
	fflush(stdout);
	for (uint64_t x = 1;; x++)
		for (size_t i = 0; i < words; i += step)
			p[i] = p[i] + x;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: numa_rw rw SIZE ITERATIONS PROCS DIR[@CPUS] [DIR[@CPUS] ...]\n"
			"       numa_rw hog MIB [CPUS]\n");
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc >= 6 && !strcmp(argv[1], "rw")) {
		long size = atol(argv[2]), iters = atol(argv[3]), procs = atol(argv[4]);
		if (size <= 0 || size % ALIGN || iters <= 0 || procs <= 0) usage();
		return rw(size, iters, procs, argv + 5, argc - 5);
	}
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "hog") && atol(argv[2]) > 0)
		return hog(atol(argv[2]), argc == 4 ? argv[3] : NULL);
	usage();
	return 1;
}
