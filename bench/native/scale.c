/* Metadata at scale (issue 14): one phase over N empty files spread over D
 * directories, file k in directory k % D, by T threads (thread t takes the
 * directories t, t+T, ...). Prints {"seconds": s, "ops": n}.
 *
 *   scale DIR mkdirs N D T   make the D directories
 *   scale DIR create N D T   open(O_CREAT|O_EXCL) + close of each file
 *   scale DIR stat   N D T   stat of each file
 *   scale DIR list   N D T   readdir of each directory (ops = entries read)
 *   scale DIR unlink N D T   unlink of each file
 *   scale DIR rmdirs N D T   remove the directories
 *
 * Owns only the loops; bench/workloads/scale.py measures memory between
 * phases. */
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root, *phase;
static unsigned long n_files, n_dirs, n_threads;
static unsigned long counted[64];

static void dir_path(char *buf, size_t len, unsigned long d)
{
	snprintf(buf, len, "%s/d%04lu", root, d);
}

static void *work(void *arg)
{
	unsigned long t = (unsigned long)arg, ops = 0;
	char path[4096];
	for (unsigned long d = t; d < n_dirs; d += n_threads) {
		if (!strcmp(phase, "mkdirs")) {
			dir_path(path, sizeof path, d);
			CHECK(mkdir(path, 0755), "mkdir %s", path);
			ops++;
			continue;
		}
		if (!strcmp(phase, "rmdirs")) {
			dir_path(path, sizeof path, d);
			CHECK(rmdir(path), "rmdir %s", path);
			ops++;
			continue;
		}
		if (!strcmp(phase, "list")) {
			dir_path(path, sizeof path, d);
			DIR *dir = opendir(path);
			if (!dir)
				die("opendir %s", path);
			struct dirent *e;
			errno = 0;
			while ((e = readdir(dir)))
				ops++;
			if (errno)
				die("readdir %s", path);
			closedir(dir);
			continue;
		}
		for (unsigned long k = d; k < n_files; k += n_dirs) {
			snprintf(path, sizeof path, "%s/d%04lu/f%lu", root, d, k);
			if (!strcmp(phase, "create")) {
				int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
				CHECK(fd, "create %s", path);
				CHECK(close(fd), "close %s", path);
			} else if (!strcmp(phase, "stat")) {
				struct stat st;
				CHECK(stat(path, &st), "stat %s", path);
			} else if (!strcmp(phase, "unlink")) {
				CHECK(unlink(path), "unlink %s", path);
			} else {
				errno = EINVAL;
				die("unknown phase %s", phase);
			}
			ops++;
		}
	}
	counted[t] = ops;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: scale DIR mkdirs|create|stat|list|unlink|rmdirs FILES DIRS THREADS\n");
		return 2;
	}
	root = argv[1];
	phase = argv[2];
	n_files = strtoul(argv[3], NULL, 10);
	n_dirs = strtoul(argv[4], NULL, 10);
	n_threads = strtoul(argv[5], NULL, 10);
	if (!n_dirs || n_dirs > 9999 || !n_threads || n_threads > 64) {
		fprintf(stderr, "scale: need 1-9999 directories and 1-64 threads\n");
		return 2;
	}
	pthread_t th[64];
	double t0 = now();
	for (unsigned long t = 0; t < n_threads; t++)
		if (pthread_create(&th[t], NULL, work, (void *)t))
			die("pthread_create");
	unsigned long ops = 0;
	for (unsigned long t = 0; t < n_threads; t++) {
		pthread_join(th[t], NULL);
		ops += counted[t];
	}
	double s = now() - t0;
	json_begin();
	json_num("seconds", s);
	json_num("ops", ops);
	json_end();
	return 0;
}
