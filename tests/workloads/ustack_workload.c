// SPDX-License-Identifier: GPL-2.0
/*
 * The user stack test's workload (tests/user_stacks_test.sh), built with
 * -fno-omit-frame-pointer: main -> ustack_level_one -> ustack_level_two ->
 * ustack_level_three, which makes newfstatat("/") itself (the syscall
 * instruction, no libc wrapper: glibc has no frame pointers, and a leaf
 * without one hides its caller from the unwinder), so every call's user
 * stack is exactly those three functions and main.
 *
 *   ustack_workload SECONDS [spin|nap]
 *
 * Writes "ready PID" to stdout, loops for SECONDS, then exits. With spin it
 * makes no syscall in its loop: main -> ustack_spin_one -> ustack_spin_two,
 * which only computes, so a CPU sample of it lands in user mode, with no
 * kernel frames (--profile with --user-stacks). With nap it blocks:
 * main -> ustack_nap_one -> ustack_nap_two -> usleep(1000) (--offcpu; libc's
 * leaf keeps no frame pointer, which --user-unwind fp stops at; the unwind
 * tables show ustack_nap_two).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

__attribute__((noinline)) long ustack_spin_two(void)
{
	/* A leaf sets up no frame (GCC 12 even with -mno-omit-leaf-frame-pointer),
	 * which would hide its caller: asking for its frame address makes one. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
	for (int i = 0; i < 100000; i++)
		sink += i;
	return sink;
}

__attribute__((noinline)) long ustack_spin_one(void)
{
	long r = ustack_spin_two();
	sink += 1;
	return r;
}

__attribute__((noinline)) long ustack_nap_two(void)
{
	usleep(1000);
	sink += 1;
	return sink;
}

__attribute__((noinline)) long ustack_nap_one(void)
{
	long r = ustack_nap_two();
	sink += 1;
	return r;
}

int main(int argc, char **argv)
{
	const double seconds = argc > 1 ? atof(argv[1]) : 5;
	const char *mode = argc > 2 ? argv[2] : "";
	long (*work)(void) = !strcmp(mode, "spin") ? ustack_spin_one :
			     !strcmp(mode, "nap")  ? ustack_nap_one :
						     ustack_level_one;
	const int rounds = work == ustack_nap_one ? 10 : 1000;
	struct timespec start, now;

	printf("ready %d\n", getpid());
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		for (int i = 0; i < rounds; i++)
			work();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	return 0;
}
