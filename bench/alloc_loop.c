// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmark's pinned workload: open/read/close of one small file in a
 * loop on one CPU, about 3 kmem:kmem_cache_alloc events per operation (the
 * path-name buffer, the struct file, and one from the read).
 *
 *   alloc_loop [--cpu N] [--duration S] [--rate OPS_PER_S] [--file PATH]
 *
 *   alloc_loop --mix N ...
 *
 * Prints one JSON line: {"ops": N, "seconds": S, "ops_per_s": R, "cpu": N}.
 * --rate paces the loop (0 = as fast as possible), for measuring a tracer's
 * cost at a fixed event rate rather than at saturation.
 * --mix N: N processes on the CPU, each cycling through several syscalls
 * (open/read/close, stat, a pipe, a socket, mmap of fresh pages), so stacks
 * and per-process keys vary: the "mixed workload" of the ring-bytes figures.
 * --rate is then the total over the N processes; ops_per_s is their sum.
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* One operation of kind `kind` (0: the open/read/close of the plain loop). */
static int one_op(const char *path, int kind)
{
	char buf[256];
	struct stat st;
	int fd, p[2];
	void *m;

	switch (kind) {
	case 1:
		return stat(path, &st) ? perror("alloc_loop: stat"), 1 : 0;
	case 2:
		if (pipe(p))
			return perror("alloc_loop: pipe"), 1;
		if (write(p[1], "x", 1) != 1 || read(p[0], buf, 1) != 1)
			return perror("alloc_loop: pipe i/o"), 1;
		close(p[0]);
		close(p[1]);
		return 0;
	case 3:
		fd = socket(AF_UNIX, SOCK_DGRAM, 0);
		if (fd < 0)
			return perror("alloc_loop: socket"), 1;
		close(fd);
		return 0;
	case 4:
		m = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
		if (m == MAP_FAILED)
			return perror("alloc_loop: mmap"), 1;
		memset(m, 1, 4 * 4096);
		munmap(m, 4 * 4096);
		return 0;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "alloc_loop: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (read(fd, buf, sizeof(buf)) < 0) {
		fprintf(stderr, "alloc_loop: cannot read %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The loop: ops done in `duration` seconds (-1 on an error), the time in *secs. */
static long run_loop(const char *path, int mix, int idx, double duration, double rate, double *secs)
{
	long ops = 0;
	double start = now_s(), end = start + duration, t = start;
	double next_pace = start;

	while (t < end) {
		/* Check the clock every 256 operations: cheap next to a syscall. */
		for (int k = 0; k < 256; k++) {
			if (one_op(path, mix ? (int)((ops + idx) % 5) : 0))
				return -1;
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
	*secs = t - start;
	return ops;
}

int main(int argc, char **argv)
{
	const char *path = "/proc/self/comm";
	double duration = 2.0, rate = 0;
	int cpu = 1, mix = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cpu") && i + 1 < argc)
			cpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--duration") && i + 1 < argc)
			duration = atof(argv[++i]);
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = atof(argv[++i]);
		else if (!strcmp(argv[i], "--file") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--mix") && i + 1 < argc)
			mix = atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: alloc_loop [--cpu N] [--duration S] [--rate OPS] [--file PATH] "
				"[--mix N]\n");
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

	/* The other processes of --mix: each reports its ops through the pipe. */
	int nproc = mix > 1 ? mix : 1, idx = 0, rep[2];

	if (nproc > 1 && pipe(rep))
		return perror("alloc_loop: pipe"), 1;
	for (int i = 1; i < nproc && !idx; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return perror("alloc_loop: fork"), 1;
		if (pid == 0)
			idx = i;
	}
	double secs;
	long ops = run_loop(path, mix, idx, duration, rate / nproc, &secs);

	if (ops < 0)
		return 1;
	if (idx)
		return write(rep[1], &ops, sizeof(ops)) == sizeof(ops) ? 0 : 1;
	for (int i = 1; i < nproc; i++) {
		long child;

		if (read(rep[0], &child, sizeof(child)) != sizeof(child))
			return fprintf(stderr, "alloc_loop: a --mix process failed\n"), 1;
		ops += child;
	}
	while (wait(NULL) > 0)
		;
	printf("{\"ops\": %ld, \"seconds\": %.6f, \"ops_per_s\": %.1f, \"cpu\": %d}\n", ops, secs,
	       ops / secs, cpu);
	return 0;
}
