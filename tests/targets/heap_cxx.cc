/*
 * C++ allocation through new/delete and std::vector, with a known peak:
 *   build_nodes   50,000 `new Node` of 128 bytes each (6,400,000 bytes), written
 *   fill_vector   a std::vector<long> of 1,000,000 elements (8,000,000 bytes, one large
 *                 block, written in full by the constructor)
 * Both live at once (14,400,000 bytes), then the nodes are deleted and the vector dropped.
 * With "baseline" it does none of this: the test compares the two runs' VmHWM.
 * The named functions are extern "C" so that their symbols are their names.
 */
#include <cstdio>
#include <cstring>
#include <vector>

#define NOINLINE __attribute__((noinline, noclone))

struct Node {
	Node *next;
	char payload[120];
};

static_assert(sizeof(Node) == 128, "Node is 128 bytes");

static const int N_NODES = 50000;
static const long N_LONGS = 1000000;

extern "C" {

NOINLINE Node *build_nodes(int n)
{
	Node *head = nullptr;
	for (int i = 0; i < n; i++) {
		Node *x = new Node;
		memset(x->payload, i & 0xff, sizeof(x->payload));
		x->next = head;
		head = x;
	}
	return head;
}

NOINLINE std::vector<long> *fill_vector(std::vector<long> *v, long n)
{
	v->assign(n, 7);
	return v;
}

NOINLINE void drop_nodes(Node *head)
{
	while (head) {
		Node *next = head->next;
		delete head;
		head = next;
	}
}
}

static std::vector<long> vec;

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "baseline")) {
		printf("baseline done\n");
		return 0;
	}
	Node *nodes = build_nodes(N_NODES);
	fill_vector(&vec, N_LONGS);
	drop_nodes(nodes);
	std::vector<long>().swap(vec);
	printf("done\n");
	return 0;
}
