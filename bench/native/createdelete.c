/* The tmpfs paper's create/delete loop (after Ousterhout 1990): open a new
 * file, write SIZE bytes, close, reopen, read them back, close, delete.
 *
 * usage: createdelete DIR SIZE ITERATIONS
 * Data moves in 8 KiB write()/read() calls. Prints one JSON line:
 * "ms_per_iteration" (mean over the iterations) and "iterations".
 */
#include "common.h"
#include <fcntl.h>
#include <unistd.h>

#define CHUNK 8192

int main(int argc, char **argv)
{
	if (argc != 4) { fprintf(stderr, "usage: createdelete DIR SIZE ITERATIONS\n"); return 1; }
	long size = atol(argv[2]), iters = atol(argv[3]);
	char buf[CHUNK];
	memset(buf, 'd', sizeof buf);
	CHECK(chdir(argv[1]), "chdir %s", argv[1]);

	double t0 = now();
	for (long it = 0; it < iters; it++) {
		int fd = open("cd.file", O_CREAT | O_EXCL | O_WRONLY, 0644);
		CHECK(fd, "create");
		for (long done = 0; done < size; done += CHUNK) {
			long n = size - done < CHUNK ? size - done : CHUNK;
			if (write(fd, buf, n) != n) die("write");
		}
		CHECK(close(fd), "close");
		fd = open("cd.file", O_RDONLY);
		CHECK(fd, "reopen");
		long got = 0, n;
		while ((n = read(fd, buf, CHUNK)) > 0) got += n;
		CHECK(n, "read");
		CHECK(close(fd), "close");
		if (got != size) { errno = EIO; die("read back %ld of %ld bytes", got, size); }
		CHECK(unlink("cd.file"), "unlink");
	}
	double secs = now() - t0;
	json_begin();
	json_num("ms_per_iteration", secs * 1000.0 / iters);
	json_num("iterations", iters);
	json_end();
	return 0;
}
