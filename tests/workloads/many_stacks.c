// SPDX-License-Identifier: GPL-2.0
// Many distinct user stacks: each of 2^DEPTH paths through two functions
// that call each other DEPTH deep ends in getppid(), so a tracer of
// syscalls:sys_enter_getppid with --user-stacks sees 2^DEPTH stacks (16384
// for 14). Frame pointers kept: the stacks unwind whole either way.
//   many_stacks DEPTH SECONDS   prints "ready" after the first round
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void left(int depth, unsigned path);
static void right(int depth, unsigned path);

static void __attribute__((noinline)) step(int depth, unsigned path)
{
	if (depth == 0) {
		getppid();
		return;
	}
	if (path & 1)
		left(depth - 1, path >> 1);
	else
		right(depth - 1, path >> 1);
}

static void __attribute__((noinline)) left(int depth, unsigned path)
{
	step(depth, path);
	__asm__ volatile("" ::: "memory"); // no tail call: the return address stays
}

static void __attribute__((noinline)) right(int depth, unsigned path)
{
	step(depth, path);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: many_stacks DEPTH SECONDS\n");
		return 2;
	}
	const int depth = atoi(argv[1]);
	const time_t end = time(NULL) + atoi(argv[2]);
	for (int round = 0; time(NULL) < end; round++) {
		for (unsigned path = 0; path < (1u << depth); path++)
			step(depth, path);
		if (round == 0) {
			printf("ready\n");
			fflush(stdout);
		}
		usleep(100000);
	}
	return 0;
}
