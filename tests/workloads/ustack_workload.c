// SPDX-License-Identifier: GPL-2.0
/*
 * The user stack test's workload (tests/user_stacks_test.sh), built with
 * -fno-omit-frame-pointer: main -> ustack_level_one -> ustack_level_two ->
 * ustack_level_three, which makes newfstatat("/") itself (the syscall
 * instruction, no libc wrapper: glibc has no frame pointers, and a leaf
 * without one hides its caller from the unwinder), so every call's user
 * stack is exactly those three functions and main.
 *
 *   ustack_workload SECONDS
 *
 * Writes "ready PID" to stdout, loops for SECONDS, then exits.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline)) long ustack_level_three(void)
{
	struct stat st;
	long ret;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = 0;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_newfstatat), "D"((long)AT_FDCWD), "S"("/"), "d"(&st),
			   "r"(r10)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_newfstatat;
	register long x0 __asm__("x0") = AT_FDCWD;
	register long x1 __asm__("x1") = (long)"/";
	register long x2 __asm__("x2") = (long)&st;
	register long x3 __asm__("x3") = 0;
	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
	ret = x0;
#else
	ret = fstatat(AT_FDCWD, "/", &st, 0);
#endif
	sink += ret;
	return ret;
}

__attribute__((noinline)) long ustack_level_two(void)
{
	long r = ustack_level_three();
	sink += 1; /* not a tail call: the frame stays */
	return r;
}

__attribute__((noinline)) long ustack_level_one(void)
{
	long r = ustack_level_two();
	sink += 1;
	return r;
}

int main(int argc, char **argv)
{
	const double seconds = argc > 1 ? atof(argv[1]) : 5;
	struct timespec start, now;

	printf("ready %d\n", getpid());
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		for (int i = 0; i < 1000; i++)
			ustack_level_one();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	return 0;
}
