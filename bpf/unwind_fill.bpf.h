/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --user-stacks with unwind tables: each process's code mappings written by
 * the kernel side itself, as the process execs, forks and maps code, so that
 * a process the daemon never saw (one that lives 5 ms) walks whole from its
 * first event, with the tables of the files it maps (user_unwind.bpf.h).
 * A file without a table yet is asked for the moment it is mapped: a new
 * binary's table is built at its exec, before most of its life.
 *
 * ld.so maps each library's code with mmap(PROT_EXEC) (its text segment,
 * MAP_FIXED over the reservation), the kernel the binary and its
 * interpreter at exec; JIT compilers make memory executable with mprotect.
 * Those are the three places code appears; a munmap leaves a stale mapping
 * that the next one over its addresses replaces. Included by
 * stackmapd.bpf.c (the daemon's object only: it needs CO-RE and
 * bpf_find_vma).
 */
#ifndef STACKMAPD_UNWIND_FILL_BPF_H
#define STACKMAPD_UNWIND_FILL_BPF_H

#define SMT_VM_EXEC 0x4 /* include/linux/mm.h: VM_EXEC */
#define SMT_PROT_EXEC 0x4

/* What is read of a mapping, relocated against the kernel's BTF. */
struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	unsigned long vm_start, vm_end, vm_pgoff, vm_flags;
	struct file *vm_file;
} __attribute__((preserve_access_index));

struct mm_struct {
	unsigned long start_code;
	struct {
		void *vdso;
	} context; /* x86's mm_context_t */
} __attribute__((preserve_access_index));

/* One process entry's room, off the 512-byte stack: per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct smt_unwind_process);
	__uint(max_entries, 1);
} unwind_scratch SEC(".maps");

struct vma_found {
	struct smt_unwind_mapping m;
	__u32 exec;
	__u32 found;
};

static long vma_found_cb(struct task_struct *task, struct vm_area_struct *vma,
			 struct vma_found *out)
{
	struct file *f = vma->vm_file;

	out->m.start = vma->vm_start;
	out->m.end = vma->vm_end;
	out->exec = (vma->vm_flags & SMT_VM_EXEC) != 0;
	out->found = 1;
	if (f) {
		struct inode *in = f->f_inode;

		out->m.ino = in->i_ino;
		out->m.dev = in->i_sb->s_dev;
		out->m.pgoff = (__u32)vma->vm_pgoff;
	}
	return 0;
}

/* The mapping at addr of the current task into *out: 1 when it is code. */
static __always_inline int code_mapping_at(__u64 addr, struct vma_found *out)
{
	struct task_struct *task = bpf_get_current_task_btf();

	__builtin_memset(out, 0, sizeof(*out));
	if (bpf_find_vma(task, addr, vma_found_cb, out, 0) || !out->found)
		return 0;
	return out->exec;
}

struct unwind_add {
	struct smt_unwind_process *p;
	struct smt_unwind_mapping m;
	__u32 keep, at;
};

/* Mapping i kept, moved down to `keep`, unless m overlaps it (code unmapped
 * since). bpf_loop callbacks: as plain loops, the verifier walks 64 x 64. */
static long unwind_keep_cb(__u32 i, struct unwind_add *a)
{
	struct smt_unwind_process *p = a->p;
	__u32 keep = a->keep;

	if (i >= SMT_UNWIND_MAPPINGS_MAX || i >= p->nr)
		return 1;
	if (p->mappings[i].start < a->m.end && a->m.start < p->mappings[i].end)
		return 0;
	if (keep != i && keep < SMT_UNWIND_MAPPINGS_MAX)
		p->mappings[keep] = p->mappings[i];
	a->keep = keep + 1;
	return 0;
}

/* The mapping below `at` moved up one while it starts above m. */
static long unwind_shift_cb(__u32 i, struct unwind_add *a)
{
	struct smt_unwind_process *p = a->p;
	__u32 at = a->at;

	if (at == 0 || at >= SMT_UNWIND_MAPPINGS_MAX || p->mappings[at - 1].start < a->m.start)
		return 1;
	p->mappings[at] = p->mappings[at - 1];
	a->at = at - 1;
	return 0;
}

/*
 * Puts m in process tgid's entry, in order of start, in place of the
 * mappings it overlaps, and asks for its file's table if none is loaded. A
 * process without an entry (one that was running before the session) gets
 * one that lists only what it maps from now on. Two threads of a process
 * rarely map code at once (ld.so holds its lock); a walk that reads an entry
 * midway may miss a frame's mapping, never follow a wrong one's rows past
 * its own range.
 */
__noinline int smt_unwind_add(__u32 tgid, const struct smt_unwind_mapping *m)
{
	struct unwind_add a = {};
	__u32 zero = 0;

	if (!m)
		return 0;
	a.p = bpf_map_lookup_elem(&unwind_procs, &tgid);
	if (!a.p) {
		struct smt_unwind_process *fresh = bpf_map_lookup_elem(&unwind_scratch, &zero);

		if (!fresh)
			return 0;
		fresh->nr = 0;
		fresh->exec_id = 0;
		fresh->flags = SMT_UNWIND_UNLISTED_CODE | SMT_UNWIND_ANY_EXEC;
		bpf_map_update_elem(&unwind_procs, &tgid, fresh, BPF_NOEXIST);
		a.p = bpf_map_lookup_elem(&unwind_procs, &tgid);
		if (!a.p)
			return 0;
	}
	a.m = *m;
	bpf_loop(SMT_UNWIND_MAPPINGS_MAX, unwind_keep_cb, &a, 0);
	if (a.keep >= SMT_UNWIND_MAPPINGS_MAX) {
		a.p->nr = SMT_UNWIND_MAPPINGS_MAX;
		a.p->flags |= SMT_UNWIND_UNLISTED_CODE;
		return 0;
	}
	a.at = a.keep;
	bpf_loop(SMT_UNWIND_MAPPINGS_MAX, unwind_shift_cb, &a, 0);
	if (a.at >= SMT_UNWIND_MAPPINGS_MAX)
		return 0;
	a.p->mappings[a.at] = a.m;
	a.p->nr = a.keep + 1;
	if (m->ino && !bpf_map_lookup_elem(&unwind_files, SMT_UNWIND_KEY_OF(m)))
		smt_unwind_want(tgid, m);
	return 1;
}

/* The code mapping at addr, if it is one, into the current process's entry. */
static __always_inline void add_code_at(__u64 addr)
{
	struct vma_found v;

	if (code_mapping_at(addr, &v))
		smt_unwind_add(bpf_get_current_pid_tgid() >> 32, &v.m);
}

/* A new image: the entry starts over with the binary's code, the
 * interpreter's (where the new image starts running) and the vdso. */
static __always_inline void unwind_exec(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	const struct pt_regs___x86 *regs = (const void *)bpf_task_pt_regs(task);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, zero = 0;
	struct smt_unwind_process *fresh = bpf_map_lookup_elem(&unwind_scratch, &zero);
	struct mm_struct *mm = task->mm;
	struct vma_found v;

	if (!fresh || !mm)
		return;
	fresh->nr = 0;
	fresh->exec_id = (__u16)task->self_exec_id;
	fresh->flags = 0;
	if (bpf_map_update_elem(&unwind_procs, &tgid, fresh, BPF_ANY))
		return;
	add_code_at(mm->start_code);
	if (regs)
		add_code_at(regs->ip);
	if (code_mapping_at((__u64)mm->context.vdso, &v)) {
		v.m.ino = SMT_UNWIND_VDSO_INO;
		v.m.dev = 0;
		v.m.pgoff = 0;
		smt_unwind_add(tgid, &v.m);
	}
}

/* A new process (not a thread) starts with its parent's mappings. */
static __always_inline void unwind_fork(const struct task_struct *parent,
					const struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	const struct smt_unwind_process *p;

	if (ctgid == ptgid || (__u32)BPF_CORE_READ(child, pid) != ctgid)
		return;
	p = bpf_map_lookup_elem(&unwind_procs, &ptgid);
	if (p)
		bpf_map_update_elem(&unwind_procs, &ctgid, p, BPF_ANY);
}

/* mprotect(PROT_EXEC) of memory in no file: code without a table (JIT). */
static __always_inline void unwind_mprotect(__u64 start, __u64 len, __u64 prot)
{
	struct smt_unwind_mapping m = {};

	if (!(prot & SMT_PROT_EXEC) || !len || start + len < start)
		return;
	m.start = start;
	m.end = (start + len + 4095) & ~4095ull;
	smt_unwind_add(bpf_get_current_pid_tgid() >> 32, &m);
}

#endif /* STACKMAPD_UNWIND_FILL_BPF_H */
