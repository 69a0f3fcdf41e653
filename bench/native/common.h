/* Shared helpers for the benchmark's native programs: a monotonic clock,
 * fatal-error reporting and a tiny JSON emitter. Owns nothing else. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Any failed system call ends the program with a non-zero status, so that a
 * broken file system can never be reported as a fast one. */
static inline void die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(e));
	exit(2);
}

#define CHECK(expr, ...) do { if ((expr) < 0) die(__VA_ARGS__); } while (0)

/* JSON object of name -> number, printed on one line. */
static int json_first = 1;
static inline void json_begin(void) { printf("{"); json_first = 1; }
static inline void json_num(const char *k, double v)
{
	printf("%s\"%s\": %.9g", json_first ? "" : ", ", k, v);
	json_first = 0;
}
static inline void json_end(void) { printf("}\n"); fflush(stdout); }
#endif
