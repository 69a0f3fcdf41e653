/* What the FUSE transport sets (bench/workloads/transport.py and
 * scripts/bench-transport.py): per-operation times of metadata calls whose
 * cost is mostly FUSE round trips.
 *
 *   transport DIR N   in DIR: N creates (open O_CREAT|O_EXCL + close) over 20
 *                     subdirectories, N stats of those names (cached), N/4
 *                     stats right after a write to the file (a GETATTR each),
 *                     N open + read(4 KiB) + close of one small file, N
 *                     fgetxattr of a missing name on an open file (one lone
 *                     request each: the round trip), N unlinks.
 *
 * Prints one JSON line of microseconds per operation. */
#include "common.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define DIRS 20

static void name(char *p, size_t n, const char *dir, int i)
{
	snprintf(p, n, "%s/d%d/f%d", dir, i % DIRS, i);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		die("usage: transport DIR N");
	const char *dir = argv[1];
	int n = atoi(argv[2]);
	char p[4096], buf[4096];
	struct stat st;
	for (int d = 0; d < DIRS; d++) {
		snprintf(p, sizeof p, "%s/d%d", dir, d);
		CHECK(mkdir(p, 0755), "mkdir %s", p);
	}
	double t = now();
	for (int i = 0; i < n; i++) {
		name(p, sizeof p, dir, i);
		int fd = open(p, O_CREAT | O_WRONLY | O_EXCL, 0644);
		CHECK(fd, "create %s", p);
		close(fd);
	}
	double create = now() - t;
	t = now();
	for (int i = 0; i < n; i++) {
		name(p, sizeof p, dir, i);
		CHECK(stat(p, &st), "stat %s", p);
	}
	double stat_cached = now() - t;
	int m = n / 4 > 0 ? n / 4 : 1;
	double after_write = 0;
	for (int i = 0; i < m; i++) {
		name(p, sizeof p, dir, i);
		int fd = open(p, O_WRONLY);
		CHECK(fd, "open %s", p);
		if (write(fd, "x", 1) != 1)
			die("write %s", p);
		close(fd);
		double t0 = now();
		CHECK(stat(p, &st), "stat %s", p);
		after_write += now() - t0;
	}
	snprintf(p, sizeof p, "%s/small", dir);
	int fd = open(p, O_CREAT | O_WRONLY, 0644);
	CHECK(fd, "create %s", p);
	memset(buf, 'a', sizeof buf);
	if (write(fd, buf, sizeof buf) != sizeof buf)
		die("write %s", p);
	close(fd);
	t = now();
	for (int i = 0; i < n; i++) {
		fd = open(p, O_RDONLY);
		CHECK(fd, "open %s", p);
		if (read(fd, buf, sizeof buf) != sizeof buf)
			die("read %s", p);
		close(fd);
	}
	double open_read = now() - t;
	fd = open(p, O_RDONLY);
	CHECK(fd, "open %s", p);
	t = now();
	for (int i = 0; i < n; i++)
		if (fgetxattr(fd, "user.missing", buf, sizeof buf) >= 0 || errno != ENODATA)
			die("fgetxattr of a missing name on %s did not fail with ENODATA", p);
	double round_trip = now() - t;
	close(fd);
	CHECK(unlink(p), "unlink %s", p);
	t = now();
	for (int i = 0; i < n; i++) {
		name(p, sizeof p, dir, i);
		CHECK(unlink(p), "unlink %s", p);
	}
	double unl = now() - t;
	for (int d = 0; d < DIRS; d++) {
		snprintf(p, sizeof p, "%s/d%d", dir, d);
		CHECK(rmdir(p), "rmdir %s", p);
	}
	json_begin();
	json_num("create", create / n * 1e6);
	json_num("stat", stat_cached / n * 1e6);
	json_num("stat_after_write", after_write / m * 1e6);
	json_num("open_read_close", open_read / n * 1e6);
	json_num("round_trip", round_trip / n * 1e6);
	json_num("unlink", unl / n * 1e6);
	json_end();
	return 0;
}
