// SPDX-License-Identifier: GPL-2.0
/*
 * The -- CMD test's workload (tests/cmd_test.sh): a process tree making a
 * known number of getppid() calls (syscalls:sys_enter_getppid) per process.
 *
 *   cmd_workload REPORT tree A B C   A calls in a thread of this process, then
 *                                    a child making B calls and forking a
 *                                    grandchild making C calls; waits for both
 *   cmd_workload REPORT calls N      N calls in this process
 *   cmd_workload REPORT spin         calls until killed (an unrelated process)
 *   cmd_workload REPORT busy MS      burns MS ms of CPU time in this process
 *                                    and in a child, in user mode (CPU time,
 *                                    so a loaded machine takes longer)
 *
 * Each process that makes calls appends "PID PPID CALLS\n" to REPORT, in one
 * write, once done (busy and spin at their start): CALLS counts every
 * getppid() the process made, the one that reports its parent included.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *report_path;

static void report(long calls)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%d %d %ld\n", getpid(), getppid(), calls + 1);
	int fd = open(report_path, O_WRONLY | O_APPEND | O_CREAT, 0644);

	if (fd < 0 || write(fd, line, n) != n) {
		perror("cmd_workload: report");
		exit(1);
	}
	close(fd);
}

/* The raw syscall: no libc may answer getppid() from a cache. */
static void calls(long n)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
}

static void *thread_calls(void *arg)
{
	calls(*(long *)arg);
	return NULL;
}

static void wait_child(pid_t pid)
{
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "cmd_workload: child %d failed\n", pid);
		exit(1);
	}
}

static void tree(long a, long b, long c)
{
	pthread_t t;
	pid_t child;

	/* The calls a thread makes count for its process. */
	if (pthread_create(&t, NULL, thread_calls, &a) || pthread_join(t, NULL))
		exit(1);
	report(a);
	child = fork();
	if (child == 0) {
		pid_t grandchild = fork();

		if (grandchild == 0) {
			calls(c);
			report(c);
			exit(0);
		}
		calls(b);
		wait_child(grandchild);
		report(b);
		exit(0);
	}
	wait_child(child);
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void busy(double ms)
{
	pid_t child = fork();
	volatile unsigned long x = 0;
	double end;

	report(0);
	end = cpu_ms() + ms;
	while (cpu_ms() < end)
		for (int i = 0; i < 100000; i++)
			x += i;
	if (child == 0)
		exit(0);
	wait_child(child);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
			"usage: cmd_workload REPORT tree A B C | calls N | spin | busy MS\n");
		return 2;
	}
	report_path = argv[1];
	if (!strcmp(argv[2], "tree") && argc == 6) {
		tree(atol(argv[3]), atol(argv[4]), atol(argv[5]));
	} else if (!strcmp(argv[2], "calls") && argc == 4) {
		calls(atol(argv[3]));
		report(atol(argv[3]));
	} else if (!strcmp(argv[2], "spin")) {
		report(0);
		for (;;)
			calls(1000);
	} else if (!strcmp(argv[2], "busy") && argc == 4) {
		busy(atof(argv[3]));
	} else {
		fprintf(stderr, "cmd_workload: unknown mode %s\n", argv[2]);
		return 2;
	}
	return 0;
}
