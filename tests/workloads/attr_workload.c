// SPDX-License-Identifier: GPL-2.0
/*
 * The attribution test's workload (tests/attribution_test.sh): a known number
 * of operations whose kernel events can be counted by ftrace and by stackmapd.
 *
 *   attr_workload [--go READY_FILE] [--comm NAME] stat N [EXEC_PATH M]
 *   attr_workload [--go READY_FILE] [--comm NAME] sleep N MS
 *   attr_workload [--go READY_FILE] [--comm NAME] vfork N MS
 *
 * --comm NAME: first names itself NAME with prctl(PR_SET_NAME), as any
 *   unprivileged process may, with any bytes (tests/byte_names_test.sh).
 * --go READY_FILE: block SIGUSR1, write "ready PID\n" to READY_FILE, then wait
 *   in rt_sigtimedwait (syscall 128, as /proc/PID/syscall shows) for SIGUSR1:
 *   the operations start only once the tracers are recording.
 * stat N: N stat("/") calls (each getname()s the path: one names_cache
 *   kmem:kmem_cache_alloc), then, with EXEC_PATH, execs EXEC_PATH stat M
 *   (same pid, new comm: the basename of EXEC_PATH); else exits at once.
 * sleep N MS: N clock_nanosleep(CLOCK_MONOTONIC) of MS milliseconds each.
 * vfork N MS: N vfork()s whose child sleeps MS milliseconds, then exits: the
 *   parent waits for it uninterruptibly (TASK_KILLABLE), sched_switch's
 *   prev_state D (2), as a task blocked on disk I/O does, with no disk.
 *
 * Prints to stderr, once done: "attr_workload: pid P comm C: N ops in U us".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: attr_workload [--go READY_FILE] [--comm NAME] stat N [EXEC_PATH M]\n"
		"       attr_workload [--go READY_FILE] [--comm NAME] sleep N MS\n"
		"       attr_workload [--go READY_FILE] [--comm NAME] vfork N MS\n");
	exit(2);
}

/* One vfork whose child sleeps *ts; a function of its own, so that no
 * variable of the caller lives across vfork(). */
static int vfork_and_wait(const struct timespec *ts)
{
	pid_t child = vfork();

	if (child == 0) {
		/* The child shares the parent's memory: system calls only. */
		syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, ts, NULL);
		_exit(0);
	}
	return child < 0 || waitpid(child, NULL, 0) != child;
}

static long number(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 0)
		usage();
	return v;
}

static void wait_for_go(const char *ready)
{
	sigset_t set;
	FILE *f;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &set, NULL)) {
		perror("attr_workload: sigprocmask");
		exit(1);
	}
	f = fopen(ready, "w");
	if (!f || fprintf(f, "ready %d\n", getpid()) < 0 || fclose(f)) {
		fprintf(stderr, "attr_workload: cannot write %s: %s\n", ready, strerror(errno));
		exit(1);
	}
	if (sigwait(&set, &sig)) {
		perror("attr_workload: sigwait");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *ready = NULL;
	char comm[17] = "";
	long n, done = 0;
	long long start;
	int i = 1;

	if (i + 1 < argc && !strcmp(argv[i], "--go")) {
		ready = argv[i + 1];
		i += 2;
	}
	if (i + 1 < argc && !strcmp(argv[i], "--comm")) {
		if (prctl(PR_SET_NAME, argv[i + 1])) {
			perror("attr_workload: prctl(PR_SET_NAME)");
			return 1;
		}
		i += 2;
	}
	if (argc - i < 2)
		usage();
	const char *mode = argv[i];

	n = number(argv[i + 1]);
	if (ready)
		wait_for_go(ready);
	start = now_us();
	if (!strcmp(mode, "stat") && (argc - i == 2 || argc - i == 4)) {
		struct stat st;

		for (; done < n; done++) {
			if (stat("/", &st)) {
				perror("attr_workload: stat /");
				return 1;
			}
		}
		if (argc - i == 4) {
			char *const args[] = { argv[i + 2], "stat", argv[i + 3], NULL };

			number(argv[i + 3]);
			execv(argv[i + 2], args);
			fprintf(stderr, "attr_workload: cannot exec %s: %s\n", argv[i + 2],
				strerror(errno));
			return 1;
		}
	} else if (!strcmp(mode, "sleep") && argc - i == 3) {
		long ms = number(argv[i + 2]);
		struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

		for (; done < n; done++) {
			int err = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);

			if (err) {
				fprintf(stderr, "attr_workload: clock_nanosleep: %s\n",
					strerror(err));
				return 1;
			}
		}
	} else if (!strcmp(mode, "vfork") && argc - i == 3) {
		long ms = number(argv[i + 2]);
		struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

		for (; done < n; done++) {
			if (vfork_and_wait(&ts)) {
				perror("attr_workload: vfork");
				return 1;
			}
		}
	} else {
		usage();
	}
	prctl(PR_GET_NAME, comm);
	fprintf(stderr, "attr_workload: pid %d comm %s: %ld ops in %lld us\n", getpid(), comm, done,
		now_us() - start);
	return 0;
}
