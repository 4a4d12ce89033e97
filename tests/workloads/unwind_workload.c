// SPDX-License-Identifier: GPL-2.0
/*
 * The unwinder tests' workload (tests/unwind_walk_test.cpp,
 * tests/user_unwind_test.sh), built the way Debian builds: -O2, no frame
 * pointers, so only its .eh_frame tells a frame's caller.
 *
 *   unwind_workload sleep|signal|spin SECONDS
 *
 * sleep:  main -> unwind_one -> unwind_two -> unwind_three -> nanosleep
 *         (libc), for SECONDS;
 * signal: main -> unwind_one -> unwind_two -> unwind_three, which sends
 *         itself SIGUSR1; the handler -> unwind_in_handler -> nanosleep, so
 *         a stack taken then crosses the signal frame (__restore_rt);
 * spin:   main -> unwind_one -> unwind_two -> unwind_three, computing in
 *         user mode only, then one getppid() call per round.
 * Writes "ready PID" to stdout first.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;
static int mode_signal, mode_spin;
static double seconds;

static void nap(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

__attribute__((noinline)) static void unwind_in_handler(void)
{
	nap(seconds);
	sink++;
}

static void on_usr1(int sig)
{
	unwind_in_handler();
	sink += sig;
}

__attribute__((noinline)) static void unwind_three(void)
{
	if (mode_signal) {
		kill(getpid(), SIGUSR1);
	} else if (mode_spin) {
		for (long i = 0; i < 20000; i++)
			sink += i * 7;
		sink += getppid();
	} else {
		nap(seconds);
	}
	sink++;
}

__attribute__((noinline)) static void unwind_two(void)
{
	unwind_three();
	sink++;
}

__attribute__((noinline)) static void unwind_one(void)
{
	unwind_two();
	sink++;
}

int main(int argc, char **argv)
{
	struct timespec start, now;

	if (argc != 3 ||
	    (strcmp(argv[1], "sleep") && strcmp(argv[1], "signal") && strcmp(argv[1], "spin"))) {
		fprintf(stderr, "usage: unwind_workload sleep|signal|spin SECONDS\n");
		return 2;
	}
	mode_signal = !strcmp(argv[1], "signal");
	mode_spin = !strcmp(argv[1], "spin");
	seconds = atof(argv[2]);
	signal(SIGUSR1, on_usr1);
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!mode_spin) {
		unwind_one();
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		unwind_one();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	return 0;
}
