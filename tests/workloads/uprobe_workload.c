// SPDX-License-Identifier: GPL-2.0
/*
 * -u's workload (tests/uprobe_test.sh), built as Debian builds: -O2, no
 * frame pointers, so a probe at a function's entry finds its caller only
 * through the return address (the unwind tables' CFA = rsp + 8 there).
 *
 *   uprobe_workload A B
 *
 * Writes "ready PID", waits for SIGUSR1, then:
 *   main -> uprobe_call_a -> uprobe_target, A times;
 *   main -> uprobe_call_b -> uprobe_target, B times;
 *   uprobe_target calls libc's getppid() once each time;
 *   A + B rounds of the USDT probe stackmapd_test:tick, reached only while
 *   its semaphore says a tracer is attached (the way DTRACE_PROBE_ENABLED
 *   guards costly arguments);
 * then writes "ticks N": the rounds that saw the semaphore set, and waits
 * for a second SIGUSR1 to exit.
 */
#define _GNU_SOURCE
#define _SDT_HAS_SEMAPHORES 1
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <unistd.h>

/* The kernel increments it while a uprobe with its ref_ctr_offset is attached. */
volatile unsigned short stackmapd_test_tick_semaphore __attribute__((section(".probes")));

static volatile long sink;

__attribute__((noinline)) void uprobe_target(long i)
{
	sink += i + getppid();
}

__attribute__((noinline)) void uprobe_call_a(long n)
{
	for (long i = 0; i < n; i++)
		uprobe_target(i);
	sink++;
}

__attribute__((noinline)) void uprobe_call_b(long n)
{
	for (long i = 0; i < n; i++)
		uprobe_target(2 * i + 1);
	sink += 2;
}

int main(int argc, char **argv)
{
	long a, b, ticks = 0;
	sigset_t go;
	int sig;

	if (argc != 3) {
		fprintf(stderr, "usage: uprobe_workload A B\n");
		return 2;
	}
	a = atol(argv[1]);
	b = atol(argv[2]);
	sigemptyset(&go);
	sigaddset(&go, SIGUSR1);
	sigprocmask(SIG_BLOCK, &go, NULL);
	printf("ready %d\n", getpid());
	fflush(stdout);
	sigwait(&go, &sig);
	uprobe_call_a(a);
	uprobe_call_b(b);
	for (long i = 0; i < a + b; i++) {
		if (stackmapd_test_tick_semaphore) {
			STAP_PROBE1(stackmapd_test, tick, i);
			ticks++;
		}
	}
	printf("ticks %ld\n", ticks);
	fflush(stdout);
	/* Alive until told: the tracer reads its maps at the end of the session. */
	sigwait(&go, &sig);
	return 0;
}
