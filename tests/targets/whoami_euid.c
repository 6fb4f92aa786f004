/*
 * Prints the user ids it runs with ("euid E ruid R"), keeps a 4 MiB block made in keep_block,
 * and exits with status 7. tests/e2e/test_container.py runs a set-user-ID root copy of it as a
 * user who is not root: untraced it prints euid 0, under ptrace the id of the user who ran it.
 */
#include "target.h"

#define BLOCK (4 * MiB)

NOINLINE static void *keep_block(void)
{
	void *p = malloc(BLOCK);
	if (!p) {
		perror("malloc");
		exit(10);
	}
	touch(p, BLOCK);
	return p;
}

int main(void)
{
	void *volatile kept = keep_block();
	(void)kept;
	printf("euid %u ruid %u\n", (unsigned)geteuid(), (unsigned)getuid());
	return 7;
}
