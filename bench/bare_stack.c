// SPDX-License-Identifier: GPL-2.0
/*
 * Loader for bench/bare_stack.bpf.c.
 *
 *   bare_stack [--count-only] CATEGORY:NAME...
 *
 * Attaches the program to each tracepoint, prints "ready <prog_id>" on stdout
 * once attached, and stays attached until SIGINT/SIGTERM or stdin closes.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bare_stack.skel.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	struct bpf_link *links[32];
	struct bare_stack *skel;
	struct bpf_program *prog;
	struct bpf_prog_info info;
	__u32 info_len = sizeof(info);
	int nlinks = 0, first = 1;

	if (argc > 1 && !strcmp(argv[1], "--count-only"))
		first = 2;
	if (first >= argc) {
		fprintf(stderr, "usage: bare_stack [--count-only] CATEGORY:NAME...\n");
		return 2;
	}
	skel = bare_stack__open_and_load();
	if (!skel) {
		fprintf(stderr, "bare_stack: cannot load the BPF object: %s\n", strerror(errno));
		return 1;
	}
	prog = first == 2 ? skel->progs.count_only : skel->progs.bare_get_stack;
	for (int i = first; i < argc && nlinks < 32; i++) {
		char cat[128], name[128];
		const char *colon = strchr(argv[i], ':');

		if (!colon || colon - argv[i] >= (long)sizeof(cat) ||
		    strlen(colon + 1) >= sizeof(name)) {
			fprintf(stderr, "bare_stack: bad tracepoint '%s': use CATEGORY:NAME\n",
				argv[i]);
			return 2;
		}
		memcpy(cat, argv[i], colon - argv[i]);
		cat[colon - argv[i]] = 0;
		strcpy(name, colon + 1);
		links[nlinks] = bpf_program__attach_tracepoint(prog, cat, name);
		if (!links[nlinks]) {
			fprintf(stderr, "bare_stack: cannot attach to %s: %s\n", argv[i],
				strerror(errno));
			return 1;
		}
		nlinks++;
	}
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &info_len)) {
		fprintf(stderr, "bare_stack: cannot read the program's id: %s\n", strerror(errno));
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("ready %u\n", info.id);
	fflush(stdout);
	while (!stop) {
		struct pollfd p = { .fd = 0, .events = POLLIN };
		char c[64];

		if (poll(&p, 1, 200) > 0 && read(0, c, sizeof(c)) <= 0)
			break; /* stdin closed: the driver went away */
	}
	for (int i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	bare_stack__destroy(skel);
	return 0;
}
