// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmark's pinned workload: open/read/close of one small file in a
 * loop on one CPU, about 3 kmem:kmem_cache_alloc events per operation (the
 * path-name buffer, the struct file, and one from the read).
 *
 *   alloc_loop [--cpu N] [--duration S] [--rate OPS_PER_S] [--file PATH]
 *
 * Prints one JSON line: {"ops": N, "seconds": S, "ops_per_s": R, "cpu": N}.
 * --rate paces the loop (0 = as fast as possible), for measuring a tracer's
 * cost at a fixed event rate rather than at saturation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *path = "/proc/self/comm";
	double duration = 2.0, rate = 0;
	int cpu = 1;
	char buf[256];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cpu") && i + 1 < argc)
			cpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--duration") && i + 1 < argc)
			duration = atof(argv[++i]);
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = atof(argv[++i]);
		else if (!strcmp(argv[i], "--file") && i + 1 < argc)
			path = argv[++i];
		else {
			fprintf(stderr,
				"usage: alloc_loop [--cpu N] [--duration S] [--rate OPS] [--file PATH]\n");
			return 2;
		}
	}
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			fprintf(stderr, "alloc_loop: cannot pin to CPU %d: %s\n", cpu,
				strerror(errno));
			return 1;
		}
	}

	unsigned long ops = 0;
	double start = now_s(), end = start + duration, t = start;
	double next_pace = start;

	while (t < end) {
		/* Check the clock every 256 operations: cheap next to a syscall. */
		for (int k = 0; k < 256; k++) {
			int fd = open(path, O_RDONLY);

			if (fd < 0) {
				fprintf(stderr, "alloc_loop: cannot open %s: %s\n", path,
					strerror(errno));
				return 1;
			}
			if (read(fd, buf, sizeof(buf)) < 0) {
				fprintf(stderr, "alloc_loop: cannot read %s: %s\n", path,
					strerror(errno));
				return 1;
			}
			close(fd);
			ops++;
			if (rate > 0)
				break;
		}
		t = now_s();
		if (rate > 0) {
			next_pace += 1.0 / rate;
			if (next_pace > t) {
				struct timespec ts;
				double d = next_pace - t;

				ts.tv_sec = (time_t)d;
				ts.tv_nsec = (long)((d - ts.tv_sec) * 1e9);
				nanosleep(&ts, NULL);
				t = now_s();
			}
		}
	}
	double secs = t - start;

	printf("{\"ops\": %lu, \"seconds\": %.6f, \"ops_per_s\": %.1f, \"cpu\": %d}\n", ops, secs,
	       ops / secs, cpu);
	return 0;
}
