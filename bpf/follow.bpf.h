/* SPDX-License-Identifier: GPL-2.0 */
/*
 * -- CMD's part of the daemon's own object: the `tracked` map of the
 * command's processes, kept by fork and exit, never by name. The daemon
 * inserts the command's pid before it lets it exec; from then on every
 * process a tracked process forks is tracked (its threads share its tgid),
 * and a process leaves the map when its last thread exits, so a pid the
 * kernel hands out again is not mistaken for the command's.
 * tp_btf programs: the fork tracepoint's format differs across kernels
 * (6.x made its names __data_loc strings), the task's BTF does not.
 */
#ifndef STACKMAPD_FOLLOW_BPF_H
#define STACKMAPD_FOLLOW_BPF_H

/* sched_process_fork runs in the parent, before the child first runs. */
static __always_inline void follow_fork(const struct task_struct *child)
{
	__u32 parent = bpf_get_current_pid_tgid() >> 32, tgid = child->tgid, one = 1, zero = 0;
	__u64 *lost;
	long err;

	if (tgid == parent || !bpf_map_lookup_elem(&tracked, &parent))
		return;
	err = bpf_map_update_elem(&tracked, &tgid, &one, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST */) {
		lost = bpf_map_lookup_elem(&tracked_lost, &zero);
		if (lost)
			__sync_fetch_and_add(lost, 1);
	}
}

/* sched_process_exit runs in the exiting thread, after it left signal->live. */
static __always_inline void follow_exit(const struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (task->signal->live.counter == 0)
		bpf_map_delete_elem(&tracked, &tgid);
}

#endif /* STACKMAPD_FOLLOW_BPF_H */
