/* fileop-style metadata rates, after IOzone's fileop as used in the FUSE
 * memfs study: X^3 files in X*X leaf directories under X top directories.
 *
 * usage: fileop -f X [-s SIZE] [-p] [-k] DIR
 *   -s SIZE  bytes written to (and read from) each file (default 0)
 *   -p       after the create pass print "CREATED" and wait for a line on
 *            stdin (the caller samples memory use there)
 *   -k       only create the tree of files and exit (no timing, nothing
 *            removed): used to fill a file system
 *
 * Each operation is timed on its own with a monotonic clock and summed; the
 * output is one JSON line: "<op>": operations per second, plus "files" and
 * "dirs". Passes, in fileop's order: mkdir/rmdir (the X + X^2 directories),
 * create/write/close, stat, access, chmod, readdir (one op = opendir + read
 * every entry + closedir of a leaf directory), link/unlink (a second name
 * for every file, then removing it), open+close/read, delete (unlink every
 * file). Like fileop, it works with chdir and base names.
 */
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MKDIR, RMDIR, CREATE, WRITE, CLOSE, STAT, ACCESS, CHMOD, READDIR,
       LINK, UNLINK, OPENCLOSE, READ, DELETE, NOPS };
static const char *names[NOPS] = { "mkdir", "rmdir", "create", "write",
	"close", "stat", "access", "chmod", "readdir", "link", "unlink",
	"open+close", "read", "delete" };
static double total[NOPS];
static long count[NOPS];
static int x;
static size_t sz;
static char *buf;

#define TIMED(op, expr) ({ double t0_ = now(); long r_ = (long)(expr); \
	total[op] += now() - t0_; count[op]++; r_; })

static void top(int i) { char p[64]; snprintf(p, sizeof p, "L1_%d", i); CHECK(chdir(p), "chdir %s", p); }
static void leaf(int i, int j) { char p[64]; snprintf(p, sizeof p, "L1_%d_L2_%d", i, j); CHECK(chdir(p), "chdir %s", p); }
static void up(void) { CHECK(chdir(".."), "chdir .."); }
static void fname(char *p, size_t n, int i, int j, int k) { snprintf(p, n, "file_%d_%d_%d", i, j, k); }

static void make_dirs(int timed)
{
	char p[64];
	for (int i = 0; i < x; i++) {
		snprintf(p, sizeof p, "L1_%d", i);
		CHECK(timed ? TIMED(MKDIR, mkdir(p, 0755)) : mkdir(p, 0755), "mkdir %s", p);
		top(i);
		for (int j = 0; j < x; j++) {
			snprintf(p, sizeof p, "L1_%d_L2_%d", i, j);
			CHECK(timed ? TIMED(MKDIR, mkdir(p, 0755)) : mkdir(p, 0755), "mkdir %s", p);
		}
		up();
	}
}

static void remove_dirs(int timed)
{
	char p[64];
	for (int i = 0; i < x; i++) {
		top(i);
		for (int j = 0; j < x; j++) {
			snprintf(p, sizeof p, "L1_%d_L2_%d", i, j);
			CHECK(timed ? TIMED(RMDIR, rmdir(p)) : rmdir(p), "rmdir %s", p);
		}
		up();
		snprintf(p, sizeof p, "L1_%d", i);
		CHECK(timed ? TIMED(RMDIR, rmdir(p)) : rmdir(p), "rmdir %s", p);
	}
}

/* Run fn(i, j, k, name) in every leaf directory for every file. */
static void each_file(void (*fn)(int, int, int, const char *))
{
	char p[64];
	for (int i = 0; i < x; i++) {
		top(i);
		for (int j = 0; j < x; j++) {
			leaf(i, j);
			for (int k = 0; k < x; k++) {
				fname(p, sizeof p, i, j, k);
				fn(i, j, k, p);
			}
			up();
		}
		up();
	}
}

static void do_create(int i, int j, int k, const char *p)
{
	memset(buf, (i ^ j ^ k) & 0xff, sz);
	int fd = TIMED(CREATE, open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644));
	CHECK(fd, "create %s", p);
	if (TIMED(WRITE, write(fd, buf, sz)) != (long)sz) die("write %s", p);
	CHECK(TIMED(CLOSE, close(fd)), "close %s", p);
}
static void do_stat(int i, int j, int k, const char *p)
{
	struct stat st;
	(void)i; (void)j; (void)k;
	CHECK(TIMED(STAT, stat(p, &st)), "stat %s", p);
	if ((size_t)st.st_size != sz) { errno = EIO; die("stat %s: wrong size", p); }
}
static void do_access(int i, int j, int k, const char *p)
{
	(void)i; (void)j; (void)k;
	CHECK(TIMED(ACCESS, access(p, F_OK)), "access %s", p);
}
static void do_chmod(int i, int j, int k, const char *p)
{
	(void)i; (void)j; (void)k;
	CHECK(TIMED(CHMOD, chmod(p, 0600)), "chmod %s", p);
}
static void do_link(int i, int j, int k, const char *p)
{
	char l[80];
	(void)i; (void)j; (void)k;
	snprintf(l, sizeof l, "%sL", p);
	CHECK(TIMED(LINK, link(p, l)), "link %s", p);
	CHECK(TIMED(UNLINK, unlink(l)), "unlink %s", l);
}
static void do_read(int i, int j, int k, const char *p)
{
	double t0 = now();
	int fd = open(p, O_RDONLY);
	total[OPENCLOSE] += now() - t0;
	CHECK(fd, "open %s", p);
	if (TIMED(READ, read(fd, buf, sz)) != (long)sz) die("read %s", p);
	if (sz && buf[0] != (char)((i ^ j ^ k) & 0xff)) { errno = EIO; die("read %s: wrong data", p); }
	t0 = now();
	int r = close(fd);
	total[OPENCLOSE] += now() - t0;
	count[OPENCLOSE]++;
	CHECK(r, "close %s", p);
}
static void do_delete(int i, int j, int k, const char *p)
{
	(void)i; (void)j; (void)k;
	CHECK(TIMED(DELETE, unlink(p)), "delete %s", p);
}

static void readdir_pass(void)
{
	for (int i = 0; i < x; i++) {
		top(i);
		for (int j = 0; j < x; j++) {
			char p[64];
			long n = 0;
			snprintf(p, sizeof p, "L1_%d_L2_%d", i, j);
			double t0 = now();
			DIR *d = opendir(p);
			if (!d) die("opendir %s", p);
			while (readdir(d)) n++;
			closedir(d);
			total[READDIR] += now() - t0;
			count[READDIR]++;
			if (n != x + 2) { errno = EIO; die("readdir %s: %ld entries", p, n); }
		}
		up();
	}
}

int main(int argc, char **argv)
{
	int opt, pause_after_create = 0, keep = 0;
	while ((opt = getopt(argc, argv, "f:s:pk")) != -1) {
		switch (opt) {
		case 'f': x = atoi(optarg); break;
		case 's': sz = strtoul(optarg, NULL, 10); break;
		case 'p': pause_after_create = 1; break;
		case 'k': keep = 1; break;
		default: fprintf(stderr, "usage: fileop -f X [-s SIZE] [-p] [-k] DIR\n"); return 1;
		}
	}
	if (x <= 0 || optind != argc - 1) { fprintf(stderr, "usage: fileop -f X [-s SIZE] [-p] [-k] DIR\n"); return 1; }
	CHECK(chdir(argv[optind]), "chdir %s", argv[optind]);
	buf = malloc(sz ? sz : 1);

	if (keep) {
		make_dirs(0);
		each_file(do_create);
		return 0;
	}
	make_dirs(1);
	remove_dirs(1);
	make_dirs(0);
	each_file(do_create);
	if (pause_after_create) {
		char line[16];
		printf("CREATED\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin)) { errno = EPIPE; die("waiting for the go-ahead"); }
	}
	each_file(do_stat);
	each_file(do_access);
	each_file(do_chmod);
	readdir_pass();
	each_file(do_link);
	each_file(do_read);
	each_file(do_delete);
	remove_dirs(0);

	json_begin();
	json_num("files", (double)x * x * x);
	json_num("dirs", (double)x + (double)x * x);
	for (int op = 0; op < NOPS; op++)
		json_num(names[op], total[op] > 0 ? count[op] / total[op] : 0);
	json_end();
	return 0;
}
