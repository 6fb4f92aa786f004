/*
 * A linked list built and freed: nodes of NODE bytes (default 512) malloc'd and written one by one
 * until MIB MiB (default 300) are live, walked once, then freed from the head: 614,400 mallocs and
 * as many frees by default, the peak MIB MiB of small blocks. Prints the node count and a checksum
 * that depends only on the arguments.
 * Usage: linked_list [MIB [NODE]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *next;
	uint64_t value;
};

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 300;
	long size = argc > 2 ? atol(argv[2]) : 512;
	if (mib < 1 || size < (long)sizeof(struct node)) {
		fprintf(stderr, "usage: linked_list [MIB [NODE]]   (NODE >= %zu)\n", sizeof(struct node));
		return 2;
	}
	long n = mib * 1048576 / size;
	struct node *head = NULL, **tail = &head;
	for (long i = 0; i < n; i++) {
		struct node *p = malloc((size_t)size);
		if (!p)
			return 10;
		memset(p, (int)(i & 0x7f), (size_t)size);
		p->next = NULL;
		p->value = (uint64_t)i * 2654435761u;
		*tail = p;
		tail = &p->next;
	}
	uint64_t sum = 0;
	long count = 0;
	for (struct node *p = head; p; p = p->next, count++)
		sum += p->value ^ ((unsigned char *)p)[size - 1];
	while (head) {
		struct node *next = head->next;
		free(head);
		head = next;
	}
	printf("nodes %ld checksum %016llx\n", count, (unsigned long long)sum);
	return 0;
}
