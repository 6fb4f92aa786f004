/*
 * C++ as it is shipped: -O2 -g, the standard library's templates inlined
 * into the program's functions. load_samples reserves a std::vector of
 * 4,000,000 doubles (32,000,000 bytes): operator new is called from
 * std::vector's code inlined into load_samples, several calls deep.
 * Prints the sum of the samples.
 */
#include <cstdio>
#include <vector>

static const long N_SAMPLES = 4000000;

__attribute__((noinline)) std::vector<double> load_samples(long n)
{
	std::vector<double> v;
	v.reserve(n); // LINE_RESERVE
	for (long i = 0; i < n; i++)
		v.push_back((double)(i % 7));
	return v;
}

int main()
{
	std::vector<double> v = load_samples(N_SAMPLES); // LINE_MAIN
	double sum = 0;
	for (double x : v)
		sum += x;
	std::printf("sum %.0f\n", sum);
	return 0;
}
