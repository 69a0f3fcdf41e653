/* Connectathon-style basic tests, written from their published descriptions
 * (the tmpfs and HP-UX MemFS papers); not the Connectathon source.
 *
 * usage: cthon DIR LEVELS FILES DIRS LOOKUPS SETATTR_FILES SETATTR_COUNT
 *              RW_BYTES RW_COUNT READDIR_FILES READDIR_COUNT LINK_FILES
 *              LINK_COUNT SYMLINK_FILES SYMLINK_COUNT STATFS_COUNT
 *
 *   create   a tree LEVELS deep: FILES files and DIRS subdirectories in each
 *            directory of levels 1..LEVELS (the last level's subdirectories
 *            stay empty: 5 levels, 5 files, 2 dirs = 155 files, 62 dirs) (test1)
 *   remove   remove that tree (test2)
 *   lookup   stat a directory LOOKUPS times (test3)
 *   setattr  chmod and stat SETATTR_FILES files SETATTR_COUNT times each (test4)
 *   write    write RW_BYTES in 8 KiB writes and close, RW_COUNT times (test5a)
 *   read     open, read RW_BYTES in 8 KiB reads and close, RW_COUNT times (test5b)
 *   readdir  read a directory of READDIR_FILES files READDIR_COUNT times (test6)
 *   link_rename  rename, link back and unlink LINK_FILES files LINK_COUNT
 *            times (test7)
 *   symlink  create, lstat, readlink and remove a symlink to each of
 *            SYMLINK_FILES files, SYMLINK_COUNT times (test8)
 *   statfs   statfs the directory STATFS_COUNT times (test9)
 *
 * Prints one JSON line of seconds per test. Set-up and clean-up outside a
 * test's description are not timed. Any failed call exits non-zero.
 */
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CHUNK 8192
static long P[16];
enum { LEVELS, FILES, DIRS, LOOKUPS, SA_FILES, SA_COUNT, RW_BYTES, RW_COUNT,
       RD_FILES, RD_COUNT, LN_FILES, LN_COUNT, SL_FILES, SL_COUNT, SF_COUNT, NP };

static void touch(const char *p)
{
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd, "create %s", p);
	CHECK(close(fd), "close %s", p);
}

static void make_files(const char *fmt, long n)
{
	char p[64];
	for (long i = 0; i < n; i++) { snprintf(p, sizeof p, fmt, i); touch(p); }
}

static void remove_files(const char *fmt, long n)
{
	char p[64];
	for (long i = 0; i < n; i++) { snprintf(p, sizeof p, fmt, i); CHECK(unlink(p), "unlink %s", p); }
}

static void tree_create(int level)
{
	char p[64];
	make_files("file.%ld", P[FILES]);
	for (long d = 0; d < P[DIRS]; d++) {
		snprintf(p, sizeof p, "dir.%ld", d);
		CHECK(mkdir(p, 0755), "mkdir %s", p);
		if (level == P[LEVELS]) continue;
		CHECK(chdir(p), "chdir %s", p);
		tree_create(level + 1);
		CHECK(chdir(".."), "chdir ..");
	}
}

static void tree_remove(int level)
{
	char p[64];
	remove_files("file.%ld", P[FILES]);
	for (long d = 0; d < P[DIRS]; d++) {
		snprintf(p, sizeof p, "dir.%ld", d);
		if (level < P[LEVELS]) {
			CHECK(chdir(p), "chdir %s", p);
			tree_remove(level + 1);
			CHECK(chdir(".."), "chdir ..");
		}
		CHECK(rmdir(p), "rmdir %s", p);
	}
}

static void t_lookup(void)
{
	struct stat st;
	for (long i = 0; i < P[LOOKUPS]; i++) CHECK(stat(".", &st), "stat .");
}

static void t_setattr(void)
{
	char p[64];
	struct stat st;
	for (long c = 0; c < P[SA_COUNT]; c++)
		for (long i = 0; i < P[SA_FILES]; i++) {
			mode_t m = (c & 1) ? 0644 : 0600;
			snprintf(p, sizeof p, "sa.%ld", i);
			CHECK(chmod(p, m), "chmod %s", p);
			CHECK(stat(p, &st), "stat %s", p);
			if ((st.st_mode & 07777) != m) { errno = EIO; die("setattr %s: mode not kept", p); }
		}
}

static void t_write(char *buf)
{
	for (long c = 0; c < P[RW_COUNT]; c++) {
		int fd = open("bigfile", O_CREAT | O_WRONLY | O_TRUNC, 0644);
		CHECK(fd, "open bigfile");
		for (long done = 0; done < P[RW_BYTES]; done += CHUNK) {
			long n = P[RW_BYTES] - done < CHUNK ? P[RW_BYTES] - done : CHUNK;
			if (write(fd, buf, n) != n) die("write bigfile");
		}
		CHECK(close(fd), "close bigfile");
	}
}

static void t_read(char *buf)
{
	for (long c = 0; c < P[RW_COUNT]; c++) {
		long got = 0, n;
		int fd = open("bigfile", O_RDONLY);
		CHECK(fd, "open bigfile");
		while ((n = read(fd, buf, CHUNK)) > 0) got += n;
		CHECK(n, "read bigfile");
		CHECK(close(fd), "close bigfile");
		if (got != P[RW_BYTES]) { errno = EIO; die("read bigfile: %ld bytes", got); }
	}
}

static void t_readdir(void)
{
	for (long c = 0; c < P[RD_COUNT]; c++) {
		long n = 0;
		DIR *d = opendir("rd");
		if (!d) die("opendir rd");
		while (readdir(d)) n++;
		closedir(d);
		if (n != P[RD_FILES] + 2) { errno = EIO; die("readdir: %ld entries", n); }
	}
}

static void t_link(void)
{
	char a[64], b[64];
	for (long c = 0; c < P[LN_COUNT]; c++)
		for (long i = 0; i < P[LN_FILES]; i++) {
			snprintf(a, sizeof a, "ln.%ld", i);
			snprintf(b, sizeof b, "ln.new.%ld", i);
			CHECK(rename(a, b), "rename %s", a);
			CHECK(link(b, a), "link %s", b);
			CHECK(unlink(b), "unlink %s", b);
		}
}

static void t_symlink(void)
{
	char t[64], s[64], got[64];
	struct stat st;
	for (long c = 0; c < P[SL_COUNT]; c++) {
		for (long i = 0; i < P[SL_FILES]; i++) {
			snprintf(t, sizeof t, "sl.%ld", i);
			snprintf(s, sizeof s, "sl.link.%ld", i);
			CHECK(symlink(t, s), "symlink %s", s);
			CHECK(lstat(s, &st), "lstat %s", s);
			ssize_t n = readlink(s, got, sizeof got - 1);
			CHECK(n, "readlink %s", s);
			got[n] = 0;
			if (strcmp(got, t)) { errno = EIO; die("readlink %s: wrong target", s); }
		}
		remove_files("sl.link.%ld", P[SL_FILES]);
	}
}

static void t_statfs(void)
{
	struct statvfs sv;
	for (long i = 0; i < P[SF_COUNT]; i++) CHECK(statvfs(".", &sv), "statvfs");
}

#define RUN(name, call) do { double t0_ = now(); call; json_num(name, now() - t0_); } while (0)

int main(int argc, char **argv)
{
	if (argc != NP + 2) { fprintf(stderr, "usage: see the header of cthon.c\n"); return 1; }
	for (int i = 0; i < NP; i++) P[i] = atol(argv[i + 2]);
	CHECK(chdir(argv[1]), "chdir %s", argv[1]);
	char *buf = malloc(CHUNK);
	memset(buf, 'c', CHUNK);

	json_begin();
	CHECK(mkdir("tree", 0755), "mkdir tree");
	CHECK(chdir("tree"), "chdir tree");
	RUN("create", tree_create(1));
	RUN("remove", tree_remove(1));
	CHECK(chdir(".."), "chdir ..");
	CHECK(rmdir("tree"), "rmdir tree");

	RUN("lookup", t_lookup());
	make_files("sa.%ld", P[SA_FILES]);
	RUN("setattr", t_setattr());
	remove_files("sa.%ld", P[SA_FILES]);
	RUN("write", t_write(buf));
	RUN("read", t_read(buf));
	CHECK(unlink("bigfile"), "unlink bigfile");

	CHECK(mkdir("rd", 0755), "mkdir rd");
	CHECK(chdir("rd"), "chdir rd");
	make_files("rd.%ld", P[RD_FILES]);
	CHECK(chdir(".."), "chdir ..");
	RUN("readdir", t_readdir());
	CHECK(chdir("rd"), "chdir rd");
	remove_files("rd.%ld", P[RD_FILES]);
	CHECK(chdir(".."), "chdir ..");
	CHECK(rmdir("rd"), "rmdir rd");

	make_files("ln.%ld", P[LN_FILES]);
	RUN("link_rename", t_link());
	remove_files("ln.%ld", P[LN_FILES]);
	make_files("sl.%ld", P[SL_FILES]);
	RUN("symlink", t_symlink());
	remove_files("sl.%ld", P[SL_FILES]);
	RUN("statfs", t_statfs());
	json_end();
	return 0;
}
