// long long is not int64_t's type on Linux (long is): must not compile, and say which types are.
#include <fusion/fusion.hpp>
int main() { fusion::Array<long long> a; }
