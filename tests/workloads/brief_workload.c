// SPDX-License-Identifier: GPL-2.0
/*
 * The symbols test's workload (tests/symbols_test.sh): a process that lives
 * only MILLISECONDS and makes getppid() as fast as it can, built with
 * -fno-omit-frame-pointer, so every getppid's user stack is
 * main -> brief_level_one -> brief_level_two -> brief_level_three (the
 * syscall instruction itself, no libc wrapper: glibc keeps no frame pointer).
 *
 *   brief_workload MILLISECONDS [jit]
 *
 * With jit (x86_64 only) the getppid is made by code copied into anonymous
 * executable memory, as a JIT compiler makes it, named in /tmp/perf-PID.map
 * ("START SIZE name", hex, perf's format) as brief_jit_getppid: main ->
 * brief_jit_one -> the copied code. The map is removed at exit, as a JIT that
 * cleans up does: its name must have been read while the process lived.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) long brief_level_three(void)
{
	long ret;

	/* A leaf sets up no frame (GCC 12 even with -mno-omit-leaf-frame-pointer),
	 * which would hide its caller from a frame-pointer walk (what the
	 * unwinder does before the process's tables are in): asking for its frame
	 * address makes one. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
#else
	ret = getppid();
#endif
	sink += ret;
	return ret;
}

__attribute__((noinline)) long brief_level_two(void)
{
	long r = brief_level_three();
	sink += 1; /* not a tail call: the frame stays */
	return r;
}

__attribute__((noinline)) long brief_level_one(void)
{
	long r = brief_level_two();
	sink += 1;
	return r;
}

typedef long (*jit_fn)(void);

__attribute__((noinline)) long brief_jit_one(jit_fn f)
{
	long r = f();
	sink += 1;
	return r;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: brief_workload MILLISECONDS [jit]\n");
		return 2;
	}
	const double until = now_ms() + atof(argv[1]);
	const int jit = argc > 2 && !strcmp(argv[2], "jit");
	char map_path[64] = "";
	jit_fn f = NULL;

	if (jit) {
#if defined(__x86_64__)
		/* mov $SYS_getppid, %eax; syscall; ret */
		static const unsigned char code[] = { 0xb8, SYS_getppid, 0, 0, 0, 0x0f, 0x05, 0xc3 };
		void *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FILE *map;

		if (mem == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		memcpy(mem, code, sizeof(code));
		f = (jit_fn)mem;
		snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", getpid());
		map = fopen(map_path, "w");
		if (!map) {
			perror(map_path);
			return 1;
		}
		fprintf(map, "%lx %zx brief_jit_getppid\n", (unsigned long)mem, sizeof(code));
		fclose(map);
#else
		fprintf(stderr, "brief_workload: jit is x86_64 only\n");
		return 2;
#endif
	}
	do {
		for (int i = 0; i < 100; i++)
			sink += jit ? brief_jit_one(f) : brief_level_one();
	} while (now_ms() < until);
	if (jit)
		unlink(map_path);
	return 0;
}
