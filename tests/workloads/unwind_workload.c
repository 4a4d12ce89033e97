// SPDX-License-Identifier: GPL-2.0
/*
 * The unwinder tests' workload (tests/unwind_walk_test.cpp,
 * tests/user_unwind_test.sh), built the way Debian builds: -O2, no frame
 * pointers, so only its .eh_frame tells a frame's caller.
 *
 *   unwind_workload sleep|signal|spin|deref SECONDS
 *
 * sleep:  main -> unwind_one -> unwind_two -> unwind_three -> nanosleep
 *         (libc), for SECONDS;
 * signal: main -> unwind_one -> unwind_two -> unwind_three, which sends
 *         itself SIGUSR1; the handler -> unwind_in_handler -> nanosleep, so
 *         a stack taken then crosses the signal frame (__restore_rt);
 * spin:   main -> unwind_one -> unwind_two -> unwind_three, computing in
 *         user mode only, then one getppid() call per round;
 * deref:  main -> unwind_one -> unwind_two -> unwind_three -> deref_frame,
 *         whose CFA is a word in its own frame (OpenSSL's assembly: CFA =
 *         *(rsp + 40) + 8) -> unwind_deref_callee -> nanosleep.
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
static int mode_signal, mode_spin, mode_deref;
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

__attribute__((noinline)) static void unwind_deref_callee(void)
{
	nap(seconds);
	sink++;
}

/* Calls fn with rsp realigned, the caller's rsp saved at 40(%rsp) and the
 * CFA described from there, as OpenSSL's perlasm writes it. */
void deref_frame(void (*fn)(void));
asm(".text\n.p2align 4\n.globl deref_frame\n.type deref_frame, @function\n"
    "deref_frame:\n.cfi_startproc\n"
    "mov %rsp, %rax\n.cfi_def_cfa_register %rax\n"
    "sub $64, %rsp\nand $-16, %rsp\nmov %rax, 40(%rsp)\n"
    /* DW_CFA_def_cfa_expression: DW_OP_breg7 40; DW_OP_deref; DW_OP_plus_uconst 8 */
    ".cfi_escape 0x0f, 0x05, 0x77, 0x28, 0x06, 0x23, 0x08\n"
    "call *%rdi\n"
    "mov 40(%rsp), %rsp\n.cfi_def_cfa %rsp, 8\n"
    "ret\n.cfi_endproc\n.size deref_frame, .-deref_frame\n");

static void on_usr1(int sig)
{
	unwind_in_handler();
	sink += sig;
}

__attribute__((noinline)) static void unwind_three(void)
{
	if (mode_signal) {
		kill(getpid(), SIGUSR1);
	} else if (mode_deref) {
		deref_frame(unwind_deref_callee);
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

	if (argc != 3 || (strcmp(argv[1], "sleep") && strcmp(argv[1], "signal") &&
			  strcmp(argv[1], "spin") && strcmp(argv[1], "deref"))) {
		fprintf(stderr, "usage: unwind_workload sleep|signal|spin|deref SECONDS\n");
		return 2;
	}
	mode_signal = !strcmp(argv[1], "signal");
	mode_spin = !strcmp(argv[1], "spin");
	mode_deref = !strcmp(argv[1], "deref");
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
