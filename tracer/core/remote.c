/* A stopped thread's memory, read and written (tracer/core/remote.h). */
#include "tracer/core/remote.h"

#include <errno.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

/*
 * The piece of a transfer at addr with left bytes to go that one aligned
 * word holds: its address, where the piece starts in it, and how many bytes.
 */
static size_t word_piece(uint64_t addr, size_t left, uint64_t *word_addr, size_t *skip)
{
	*word_addr = addr & ~7ULL;
	*skip = (size_t)(addr - *word_addr);
	return 8 - *skip < left ? 8 - *skip : left;
}

/* The aligned word at word_addr. */
static int peek(pid_t tid, uint64_t word_addr, long *word)
{
	errno = 0;
	*word = ptrace(PTRACE_PEEKDATA, tid, (void *)(uintptr_t)word_addr, NULL);
	return errno ? -1 : 0;
}

int remote_read(pid_t tid, uint64_t addr, void *buf, size_t n)
{
	struct iovec l = { buf, n }, r = { (void *)(uintptr_t)addr, n };
	if (process_vm_readv(tid, &l, 1, &r, 1, 0) == (ssize_t)n)
		return 0;
	/* A page the kernel will not lend to process_vm_readv (or a short read): word by word. */
	for (size_t done = 0; done < n;) {
		uint64_t word_addr;
		size_t skip, take = word_piece(addr + done, n - done, &word_addr, &skip);
		long word;
		if (peek(tid, word_addr, &word))
			return -1;
		memcpy((char *)buf + done, (const char *)&word + skip, take);
		done += take;
	}
	return 0;
}

int remote_write(pid_t tid, uint64_t addr, const void *buf, size_t n)
{
	struct iovec l = { (void *)buf, n }, r = { (void *)(uintptr_t)addr, n };
	if (process_vm_writev(tid, &l, 1, &r, 1, 0) == (ssize_t)n)
		return 0;
	/* Not writable through the VM interface (a read-only or code page): ptrace's forced write. */
	for (size_t done = 0; done < n;) {
		uint64_t word_addr;
		size_t skip, take = word_piece(addr + done, n - done, &word_addr, &skip);
		long word;
		if (peek(tid, word_addr, &word))
			return -1;
		memcpy((char *)&word + skip, (const char *)buf + done, take);
		if (ptrace(PTRACE_POKEDATA, tid, (void *)(uintptr_t)word_addr, (void *)word))
			return -1;
		done += take;
	}
	return 0;
}
